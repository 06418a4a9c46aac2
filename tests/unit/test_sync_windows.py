"""Sync windows as Argo CD v3.2.11 evaluates them (``pkg/apis/application/v1alpha1/types.go``).

Pure: every case passes its own ``now``, so windows open and close without a clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.reconcile.windows import (
    SyncWindow,
    Target,
    describe,
    is_active,
    matching,
    opens_at,
    parse_windows,
    verdict,
)


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


def deny(schedule: str, duration: str, **kw: object) -> SyncWindow:
    return SyncWindow(kw.pop("index", 0), "deny", schedule, duration,  # type: ignore[arg-type]
                      applications=("*",), **kw)  # type: ignore[arg-type]


def allow(schedule: str, duration: str, **kw: object) -> SyncWindow:
    return SyncWindow(kw.pop("index", 1), "allow", schedule, duration,  # type: ignore[arg-type]
                      applications=("*",), **kw)  # type: ignore[arg-type]


# 2026-12-01 is a Tuesday.
@pytest.mark.parametrize(("schedule", "duration", "now", "active"), [
    ("0 22 * * *", "1h", at(2026, 12, 1, 22, 30), True),
    ("0 22 * * *", "1h", at(2026, 12, 1, 23, 0), False),  # ends at fire + duration
    ("0 22 * * *", "1h", at(2026, 12, 1, 22, 0), False),  # starts strictly after the fire
    ("0 22 * * *", "1h", at(2026, 12, 1, 22, 0, 1), True),
    ("0 9 * * 1-5", "8h", at(2026, 12, 1, 12), True),  # Tuesday: 1-5 is Monday..Friday
    ("0 9 * * 0", "8h", at(2026, 12, 6, 12), True),  # 0 is Sunday (robfig), not Monday
    ("0 9 * * 0", "8h", at(2026, 12, 7, 12), False),
    ("0 9 * * SUN", "8h", at(2026, 12, 6, 12), True),
    ("0 9 * * 7", "8h", at(2026, 12, 6, 12), None),  # robfig refuses 7
    ("0 9 15 * 1", "1h", at(2026, 12, 7, 9, 30), True),  # day 15 *or* Monday
    ("0 9 15 * 1", "1h", at(2026, 12, 15, 9, 30), True),
    ("0 9 15 * 1", "1h", at(2026, 12, 16, 9, 30), False),
    ("0 9 ? * *", "1h", at(2026, 12, 16, 9, 30), True),
    ("*/15 * * * *", "5m", at(2026, 12, 1, 10, 47), True),
    ("*/15 * * * *", "5m", at(2026, 12, 1, 10, 52), False),
    ("0 0 1 jan *", "24h", at(2027, 1, 1, 3), True),
    ("0 0 30 2 *", "1m", at(2026, 12, 1, 3), True),  # never fires: Go's zero time, active
    ("0 22 * * *", "90m", at(2026, 12, 1, 23, 15), True),
    ("0 22 * * *", "1.5h", at(2026, 12, 1, 23, 45), False),
])
def test_active(schedule: str, duration: str, now: float, active: bool | None) -> None:
    window = deny(schedule, duration)
    if active is None:
        with pytest.raises(ValueError, match="cannot parse schedule"):
            is_active(window, now)
    else:
        assert is_active(window, now) is active


def test_a_time_zone_shifts_the_schedule_by_its_offset_now() -> None:
    window = deny("0 9 * * *", "1h", time_zone="Europe/Berlin")  # UTC+1 in December
    assert is_active(window, at(2026, 12, 1, 8, 30))
    assert not is_active(window, at(2026, 12, 1, 9, 30))
    summer = at(2026, 7, 1, 7, 30)  # UTC+2 in July
    assert is_active(window, summer)
    assert not is_active(deny("0 9 * * *", "1h", time_zone="No/Such_Zone"), summer)  # UTC


@pytest.mark.parametrize(("schedule", "duration", "error"), [
    ("0 22 * *", "1h", "cannot parse schedule '0 22 * *': expected exactly 5 fields"),
    ("@daily", "1h", "parser does not accept descriptors"),
    ("0 24 * * *", "1h", "cannot parse schedule '0 24 * * *'"),
    ("0 22 * * *", "1 hour", "cannot parse duration '1 hour'"),
    ("0 22 * * *", "", "cannot parse duration ''"),
    ("x" * 300, "1h", "too long"),
])
def test_an_invalid_window_closes_the_app(schedule: str, duration: str, error: str) -> None:
    found = verdict([deny(schedule, duration, manual_sync=True)], at(2026, 12, 1), manual=True)
    assert not found.can_sync and error in found.error
    assert found.message.startswith("sync blocked: invalid sync windows: ")


NOW = at(2026, 12, 1, 22, 30)  # the deny window below is active, the allow one is not
DENY = deny("0 22 * * *", "1h")
ALLOW = allow("0 2 * * *", "2h")


def test_an_active_deny_window_closes_the_app_and_says_when_it_opens() -> None:
    found = verdict([DENY], NOW, manual=False)
    assert not found.can_sync and found.closed_by == (DENY,)
    assert found.opens_at == at(2026, 12, 1, 23)
    assert found.message == ("sync blocked by active deny window 0 (schedule '0 22 * * *', "
                             "duration 1h); opens at 2026-12-01T23:00:00Z")
    assert verdict([DENY], at(2026, 12, 1, 23, 1), manual=False).can_sync


def test_deny_wins_over_an_active_allow_window() -> None:
    assert not verdict([DENY, allow("0 22 * * *", "2h")], NOW, manual=False).can_sync


def test_allow_windows_close_the_time_outside_them() -> None:
    found = verdict([ALLOW], NOW, manual=False)
    assert not found.can_sync and found.closed_by == (ALLOW,)
    assert found.opens_at == at(2026, 12, 2, 2)
    assert "outside the allow windows: allow window 1" in found.message
    assert verdict([ALLOW], at(2026, 12, 2, 3), manual=False).can_sync
    both = verdict([DENY, ALLOW], NOW, manual=False)  # the deny ends, the allow is not open
    assert both.opens_at == at(2026, 12, 2, 2)


def test_manual_sync_needs_every_closing_window_to_allow_it() -> None:
    manual_deny = deny("0 22 * * *", "1h", manual_sync=True)
    assert verdict([manual_deny], NOW, manual=True).can_sync
    assert not verdict([manual_deny], NOW, manual=False).can_sync
    assert not verdict([manual_deny, deny("0 21 * * *", "3h", index=2)], NOW,
                       manual=True).can_sync
    assert not verdict([DENY], NOW, manual=True).can_sync
    assert verdict([allow("0 2 * * *", "2h", manual_sync=True)], NOW, manual=True).can_sync
    assert not verdict([ALLOW], NOW, manual=True).can_sync


def test_no_matching_window_is_open() -> None:
    assert verdict([], NOW, manual=False).can_sync


def test_opens_at_is_none_when_it_never_opens_soon() -> None:
    assert opens_at([deny("* * * * *", "1h")], NOW) is None  # fires again before it ends


TARGET = Target("ray-gpu", "prod", server="https://gpu.example", name="gpu")


@pytest.mark.parametrize(("fields", "matched"), [
    ({"applications": ("ray-*",)}, True),
    ({"applications": ("web-*",)}, False),
    ({"namespaces": ("prod",)}, True),
    ({"clusters": ("gpu",)}, True),  # the destination's name
    ({"clusters": ("https://gpu.*",)}, True),  # or its server
    ({"clusters": ("cpu",), "namespaces": ("prod",)}, True),  # any list (OR)
    ({"clusters": ("cpu",), "namespaces": ("prod",), "and_operator": True}, False),
    ({"applications": ("ray-*",), "namespaces": ("prod",), "and_operator": True}, True),
    ({"applications": ("[",)}, False),  # a bad glob matches nothing
    ({}, False),  # a window with no lists applies to nothing
])
def test_matching(fields: dict[str, object], matched: bool) -> None:
    window = SyncWindow(0, "deny", "* * * * *", "1h", **fields)  # type: ignore[arg-type]
    assert matching([window], TARGET) == ((window,) if matched else ())


def test_parse_windows_keeps_bad_schedules_and_refuses_wrong_types() -> None:
    [window] = parse_windows([{"kind": "deny", "schedule": "bad", "duration": "1h",
                               "applications": ["*"], "manualSync": True,
                               "andOperator": True, "timeZone": "Europe/Berlin"}], "w")
    assert (window.schedule, window.manual_sync, window.and_operator) == ("bad", True, True)
    assert describe([window], NOW)[0]["state"] == "invalid"
    with pytest.raises(ConfigError, match=r"w\[0\].manualSync: must be true or false"):
        parse_windows([{"kind": "deny", "manualSync": "yes"}], "w")
    with pytest.raises(ConfigError, match=r"w\[0\].applications: must be a list of strings"):
        parse_windows([{"applications": "*"}], "w")
    with pytest.raises(ConfigError, match="at most 64"):
        parse_windows([{}] * 65, "w")
