"""The settings a test controller runs with: one builder instead of a dict per test module.

A test controller polls rarely (``interval``: the tests push webhooks or wait on watches),
never jitters (a test waits on its conditions, not on chance) and debounces briefly. The
rest (``applications``, ``appSources``, ``leaderElection``, ...) is the test's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAST_LEASE: dict[str, Any] = {"enabled": True, "leaseDuration": "3s", "renewDeadline": "2s",
                              "retryPeriod": "500ms"}
"""A lease that expires within seconds: for the few tests that kill or pause a real leader."""

NO_LEADER_ELECTION: dict[str, Any] = {"enabled": False}


def controller_settings(kubeconfig: Path | str, namespace: str, *, interval: str = "1h",
                        debounce: str | None = "100ms", **fields: Any) -> dict[str, Any]:
    """``kubeconfig``, ``controlNamespace``, ``interval``, no jitter, ``debounce`` (``None``
    leaves it to the default) and ``fields`` as they are."""
    out: dict[str, Any] = {"kubeconfig": str(kubeconfig), "controlNamespace": namespace,
                           "interval": interval, "jitter": "0"}
    if debounce is not None:
        out["debounce"] = debounce
    return {**out, **fields}
