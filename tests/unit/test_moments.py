"""The formats of a moment: second precision for Kubernetes, milliseconds where a
RollingSync compares (an equal second would stall it, argo-cd #13926)."""

from __future__ import annotations

import datetime

from gitops_ray.moments import rfc3339, rfc3339_fine, utc_text

T = 1_700_000_000.0


def test_kubernetes_times_are_whole_seconds() -> None:
    assert rfc3339(T + 0.9) == "2023-11-14T22:13:20Z"
    assert utc_text(T) == "2023-11-14 22:13:20 UTC"


def test_fine_times_keep_milliseconds_and_parse_as_rfc_3339() -> None:
    assert rfc3339_fine(T) == "2023-11-14T22:13:20Z"
    fine = rfc3339_fine(T + 0.0421)
    assert fine == "2023-11-14T22:13:20.042Z"
    parsed = datetime.datetime.fromisoformat(fine.replace("Z", "+00:00"))
    # strictly after the same second written at second precision: what RollingSync asks
    assert parsed > datetime.datetime.fromisoformat(rfc3339(T).replace("Z", "+00:00"))
