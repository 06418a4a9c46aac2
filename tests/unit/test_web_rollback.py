"""The pure parts of the web page's Rollback and Resume: which history entries offer a
rollback, how the pause shows, how the id is read, and which recorded operations count as
requested (a rollback is one, so its later wave steps continue at its revision)."""

from __future__ import annotations

import pytest

from gitops_ray.cli.history import pause_end
from gitops_ray.errors import ConfigError
from gitops_ray.reconcile.pause import PAUSE_KEY, Pause
from gitops_ray.reconcile.rollback import marks
from gitops_ray.runtime.controller import _carried, is_requested
from gitops_ray.runtime.server import Request
from gitops_ray.runtime.web.auth import APP_VERBS, Denied, Verb
from gitops_ray.runtime.web.pages import AppPage, Diffs, Slice, app_page
from gitops_ray.runtime.web.site import _entry_id, _fields, _query
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.sync.operation import OperationState

NOW = 1_767_600_000.0
SHA = "a" * 40


def page(status: dict[str, object]) -> AppPage:
    return app_page("prod", decode_status(status), resources=Slice(), live={}, desired={},
                    candidates=(), diffs=Diffs(), now=NOW)


def test_rollback_is_offered_on_older_deployments_only() -> None:
    history = [{"id": 3, "revision": SHA, "rollbackOf": 1}, {"revision": SHA},
               {"id": 2, "revision": SHA}, {"id": True, "revision": SHA}, {"id": 1},
               {"id": "7", "revision": SHA}]
    shown = page({"history": history}).history
    assert [h.rollback_to for h in shown] == [None, None, 2, None, None, None]
    assert shown[0].rollback_of == "1" and shown[2].rollback_of == ""


def test_the_pause_shows_with_its_rollback() -> None:
    paused = Pause(since=NOW, rollback_id=2, revision=SHA, by="u").to_record()
    assert page({PAUSE_KEY: paused}).paused == \
        "automated sync paused until resumed (rollback to #2)"
    assert page({PAUSE_KEY: "junk"}).paused == ""


def test_the_rollback_id_comes_from_the_form_or_the_query() -> None:
    form = Request("POST", "/apps/prod/rollback",
                   {"content-type": "application/x-www-form-urlencoded"}, b"id=2&token=t",
                   query="id=9")
    assert _entry_id(_fields(form)) == 2
    assert _entry_id(_fields(Request("POST", "/", {}, b"id=5", query="id=3"))) == 3
    for bad in ("", "-1", "1e3", "\u0661", "9" * 12):
        with pytest.raises(Denied) as refused:
            _entry_id({"id": [bad]})
        assert refused.value.status == 400
    with pytest.raises(Denied):
        _fields(Request("POST", "/", {"content-type": "application/x-www-form-urlencoded"},
                        b"\xff"))


def test_a_rollback_is_a_requested_operation_and_keeps_its_marks() -> None:
    assert marks(4) == {"trigger": "rollback", "rollbackOf": 4}
    assert is_requested({"trigger": "operation"}) and is_requested(marks(4))
    assert not is_requested({"trigger": "auto-sync"}) and not is_requested({})
    running = OperationState(revision=SHA, wave=1, started_at=NOW,
                             extra={**marks(4), "automated": False, "initiatedBy": "u",
                                    "attempt": 1})
    assert _carried(running) == {**marks(4), "automated": False, "initiatedBy": "u"}


def test_verbs() -> None:
    assert [v.value for v in Verb] == ["refresh", "sync", "rollback", "resume"]
    assert APP_VERBS == (Verb.REFRESH, Verb.SYNC)


def test_a_token_is_read_from_the_form_body_only_and_too_many_fields_are_refused() -> None:

    form = {"content-type": "application/x-www-form-urlencoded"}
    in_url = Request("POST", "/apps/a/sync", form, b"csrf=x", query="token=leaked&id=3")
    assert "token" not in _fields(in_url) and _fields(in_url)["id"] == ["3"]
    in_body = Request("POST", "/apps/a/sync", form, b"token=t&csrf=x", query="")
    assert _fields(in_body)["token"] == ["t"]
    assert _query(Request("GET", "/", {}, b"", query="a=1&b=2&c=3&d=4&e=5")) is None
    with pytest.raises(Denied):
        _fields(Request("POST", "/apps/a/sync", {}, b"", query="a=1&b=2&c=3&d=4&e=5"))


def test_a_pause_that_cannot_end_as_a_time_is_refused() -> None:

    for until in (float("inf"), float("nan"), 1e300, -1.0):
        assert Pause.of({PAUSE_KEY: {"since": 1.0, "until": until}}) is None
    assert Pause.of({PAUSE_KEY: {"since": 1.0, "until": 2.0}}) == Pause(since=1.0, until=2.0)
    with pytest.raises(ConfigError, match="too long"):
        pause_end(None, "99999999999h", now=0.0)
