"""Argo CD's health vocabulary, its order, and how app health is aggregated.

The six codes and their order come from gitops-engine (``pkg/health/health.go``): an app
is as healthy as its worst resource, Healthy < Suspended < Progressing < Missing <
Degraded < Unknown. Aggregation follows Argo CD's ``controller/health.go``: resources
without a health check do not count, missing resources do not count (OutOfSync already
says they are missing) unless nothing at all is live, and an app with no resources is
Healthy. Users who read both tools see the same verdict for the same objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

MAX_MESSAGES = 3
"""How many distinct resource messages an app message quotes (Argo CD shows 3 causes)."""


class HealthStatus(StrEnum):
    """A health code; ``<`` means "healthier than", in Argo CD's order."""

    HEALTHY = "Healthy"
    SUSPENDED = "Suspended"
    PROGRESSING = "Progressing"
    MISSING = "Missing"
    DEGRADED = "Degraded"
    UNKNOWN = "Unknown"

    @property
    def rank(self) -> int:
        """0 for Healthy up to 5 for Unknown."""
        return _ORDER.index(self)

    def __lt__(self, other: str) -> bool:
        return self.rank < HealthStatus(other).rank

    def __le__(self, other: str) -> bool:
        return self.rank <= HealthStatus(other).rank

    def __gt__(self, other: str) -> bool:
        return self.rank > HealthStatus(other).rank

    def __ge__(self, other: str) -> bool:
        return self.rank >= HealthStatus(other).rank



_ORDER = tuple(HealthStatus)


@dataclass(frozen=True)
class Health:
    """The verdict on one object (or one app) and a message for humans."""

    status: HealthStatus
    message: str = ""

    def __str__(self) -> str:
        return f"{self.status.value}: {self.message}" if self.message else self.status.value


def aggregate(healths: Iterable[Health | None]) -> Health:
    """App health: the worst resource health, with Argo CD's skipping rules.

    ``None`` (a live object without a health check, or with
    ``argocd.argoproj.io/ignore-healthcheck``) is live but not assessed; Missing is not
    live. If there are resources and none is live, the app is Missing.
    """
    entries = list(healths)
    live = [h for h in entries if h is None or h.status is not HealthStatus.MISSING]
    if entries and not live:
        return Health(HealthStatus.MISSING, _missing_message(len(entries)))
    assessed = [h for h in live if h is not None]
    worst = max((h.status for h in assessed), default=HealthStatus.HEALTHY)
    if worst is HealthStatus.HEALTHY:
        return Health(worst)
    return Health(worst, _summary([h.message for h in assessed if h.status is worst]))


def _missing_message(count: int) -> str:
    return "The resource is missing" if count == 1 else f"All {count} resources are missing"


def _summary(messages: list[str]) -> str:
    distinct = list(dict.fromkeys(m for m in messages if m))
    shown = "; ".join(distinct[:MAX_MESSAGES])
    hidden = len(distinct) - MAX_MESSAGES
    return f"{shown}; and {hidden} more" if hidden > 0 else shown
