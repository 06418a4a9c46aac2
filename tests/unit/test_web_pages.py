"""The web page's pure parts: times, pagination, CSRF tokens, origin checks, prefix routes."""

from __future__ import annotations

from gitops_ray.packed import pack
from gitops_ray.runtime.compared import Compared, KeptDiff, LastComparisons, diff_text
from gitops_ray.runtime.server import Route, find_route
from gitops_ray.runtime.web.auth import FormTokens, bearer, same_origin
from gitops_ray.runtime.web.pages import (
    app_href,
    app_row,
    history_entry,
    page_of,
    resource_slice,
    when,
)
from gitops_ray.sync.appstatus import decode_operation, decode_status
from gitops_ray.types import ResourceKey

NOW = 1_767_600_000.0


def test_times_read_as_people_read_them() -> None:
    assert when(NOW - 90, now=NOW).ago == "1m ago"  # the one ago (gitops_ray.moments)
    assert when(NOW - 7200, now=NOW).ago == "2h ago"
    assert when("2026-01-05T08:00:00Z", now=NOW).exact == "2026-01-05 08:00:00 UTC"
    assert when(None, now=NOW).ago == when("garbage", now=NOW).ago == when(True, now=NOW).ago == ""
    assert when(float("nan"), now=NOW).exact == ""


def test_the_list_paginates_and_filters() -> None:
    names = [f"app-{i:04d}" for i in range(250)]
    first = page_of(names, number=1)
    assert len(first.items) == 100 and first.pages == 3 and first.next == "/?page=2"
    last = page_of(names, number=99)
    assert last.number == 3 and len(last.items) == 50 and last.next == ""
    found = page_of(names, number=1, query="app-00", size=10)
    assert found.total == 100 and found.next == "/?page=2&q=app-00"


def test_rows_and_history_are_read_generically() -> None:
    row = app_row("a/b", {"sync": "Synced", "revision": "f" * 40,
                          "operation": {"phase": "Failed", "finishedAt": NOW - 5}}, now=NOW)
    assert (row.href, row.revision, row.operation) == ("/apps/a%2Fb", "f" * 12, "Failed")
    assert app_row("x", {}, now=NOW).sync == "Unknown"
    entry = history_entry(decode_operation({"id": 3, "subject": "bump ray",
                                            "initiatedBy": {"username": "u"},
                                            "finishedAt": "bad"}), now=NOW)
    assert (entry.id, entry.subject, entry.initiated_by, entry.finished.ago) == \
        ("3", "bump ray", "u", "")
    assert app_href("<x>") == "/apps/%3Cx%3E"


def test_resources_are_sliced_per_page() -> None:
    status = {"resources": [{"name": str(i)} for i in range(120)] + ["junk"]}
    page = resource_slice(decode_status(status), number=3)
    assert (len(page.rows), page.first, page.pages, page.previous, page.next) == \
        (20, 101, 3, "?page=2", "")


def test_form_tokens_are_bound_to_the_app_and_expire() -> None:
    forms = FormTokens(key=b"k" * 32, ttl=60)
    token = forms.issue("prod", now=NOW)
    assert forms.valid(token, "prod", now=NOW + 59)
    assert not forms.valid(token, "staging", now=NOW)
    assert not forms.valid(token, "prod", now=NOW + 61)
    assert not FormTokens(key=b"j" * 32).valid(token, "prod", now=NOW)
    assert not forms.valid("9" * 40 + ".x", "prod", now=NOW)


def test_same_origin_and_bearer() -> None:
    assert same_origin({"sec-fetch-site": "same-origin", "origin": "http://evil"})
    assert not same_origin({"sec-fetch-site": "cross-site"})
    assert same_origin({"origin": "http://ui:8080", "host": "ui:8080"})
    assert not same_origin({"origin": "http://evil:8080", "host": "ui:8080"})
    assert not same_origin({})
    assert bearer({"authorization": "Bearer abc "}) == "abc"
    assert bearer({"authorization": "Basic abc"}) is None


def test_prefix_routes() -> None:
    exact, apps, deep = Route(lambda r: None), Route(lambda r: None), Route(lambda r: None)  # type: ignore[arg-type, return-value]
    table = {("GET", "/apps"): exact, ("GET", "/apps/*"): apps, ("GET", "/apps/x/*"): deep}
    assert find_route(table, "GET", "/apps") is exact
    assert find_route(table, "GET", "/apps/a") is apps
    assert find_route(table, "GET", "/apps/x/y") is deep
    assert find_route(table, "GET", "/apps/") is None
    assert find_route(table, "POST", "/apps/a") is None


def test_kept_diffs_are_bounded_and_masked() -> None:
    key = ResourceKey("", "Secret", "ns", "s")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"password": "aHVudGVyMg=="}}
    kept = KeptDiff(key, "modified", pack(secret), pack({**secret, "data": {}}))
    assert "aHVudGVyMg==" not in diff_text(kept)
    memory = LastComparisons(max_bytes=kept.size)
    memory.put("a", Compared("r", NOW, diffs=(kept,), out_of_sync=1, size=kept.size))
    memory.put("b", Compared("r", NOW, diffs=(kept,), out_of_sync=1, size=kept.size))
    a, b = memory.get("a"), memory.get("b")
    assert a is not None and a.dropped and not a.diffs
    assert b is not None and b.diffs and not b.dropped


def test_the_auto_sync_line_says_what_automation_decided() -> None:
    from gitops_ray.runtime.web.pages import summary

    def line(auto: dict[str, str]) -> str:
        return dict(summary(decode_status({"autoSync": auto}), now=0.0)).get("Auto-sync", "")

    assert line({"action": "none", "reason": "sync status is Synced"}) == "sync status is Synced"
    assert line({"action": "paused", "reason": "until resumed"}) == "paused: until resumed"
    assert line({"action": "sync", "reason": ""}) == "sync"
    assert line({}) == ""
