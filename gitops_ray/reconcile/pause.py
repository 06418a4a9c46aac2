"""A pause of automated sync, kept in the app's record: what a rollback leaves behind.

Why: rolling an automated app back to an older revision is pointless if the controller
syncs git's revision again on its next pass. Argo CD refuses ``argocd app rollback``
while auto-sync is on (the user must switch it off in the Application, i.e. in git);
gitops-ray pauses automation for that one app instead, until a given time or until
``gitops-ray resume APP``. The pause lives in the app's record ConfigMap (status key
:data:`PAUSE_KEY`), which the controller reads from its watch cache, so no extra request
is made and a change of the pause reaches the controller as a watch event.

While a pause is active, auto-sync neither syncs nor self-heals the app
(:func:`gitops_ray.reconcile.autosync.decide`); requested operations (Argo CD's Sync
button, ``gitops-ray sync``) still run. Once it ends, the controller syncs git's revision
again, because the app's last operation is the rollback's (an older revision).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops_ray.moments import utc_text

PAUSE_KEY = "autoSyncPause"


@dataclass(frozen=True)
class Pause:
    """Automated sync paused since ``since``, until ``until`` (``None``: until resumed)."""

    since: float
    until: float | None = None
    rollback_id: int | None = None  # the history entry rolled back to
    revision: str = ""  # the revision rolled back to
    by: str = ""  # who paused it (the CLI's user name, if known)

    def active(self, now: float) -> bool:
        return self.until is None or now < self.until

    def remaining(self, now: float) -> float:
        """Seconds until the pause ends by itself (0: it does not, or it has)."""
        return max(self.until - now, 0.0) if self.until is not None else 0.0

    @property
    def message(self) -> str:
        """``automated sync paused until … (rollback to #ID)``: status, condition, Event."""
        until = utc_text(self.until) if self.until is not None else "resumed"
        why = f" (rollback to #{self.rollback_id})" if self.rollback_id is not None else ""
        return f"automated sync paused until {until}{why}"

    def to_record(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "rollbackId": self.rollback_id,
                "revision": self.revision, "by": self.by}

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Pause | None:
        """The pause recorded in a record's status, if any (a malformed one counts as none)."""
        raw = status.get(PAUSE_KEY)
        if not isinstance(raw, Mapping):
            return None
        try:
            until = raw.get("until")
            rollback = raw.get("rollbackId")
            end = float(until) if until is not None else None
            if end is not None and not 0 <= end < MAX_UNTIL:  # inf, NaN, year 10000
                return None
            return cls(since=float(raw.get("since") or 0.0), until=end,
                       rollback_id=int(rollback) if rollback is not None else None,
                       revision=str(raw.get("revision") or ""), by=str(raw.get("by") or ""))
        except (TypeError, ValueError):
            return None


MAX_UNTIL = 253402300799.0  # 9999-12-31T23:59:59Z: the last moment datetime can show
