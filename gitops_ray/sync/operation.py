"""A sync operation that spans several steps: sync waves, and where a waiting sync stands.

Why this exists: with ``argocd.argoproj.io/sync-wave`` a sync applies wave N, then waits
until wave N is healthy before it applies wave N+1 (Argo CD's gitops-engine does the same:
an unhealthy wave keeps the operation ``Running``, a Degraded one fails it, and the last
wave is not waited for). Waiting must not hold a controller worker, and it must survive a
controller restart, so a sync is a sequence of *steps*: each step applies what it can and
returns ``Running`` with the wave it waits for. That state is recorded in the app's record
(``status.operationState``, like Argo CD's ``status.operationState``) and the next step,
possibly in another controller process, continues from it instead of deciding afresh.

This module owns the recorded shape (:class:`OperationState`); the phases are
:class:`gitops_ray.types.OperationPhase`, the reasons a wave ends a sync are in
:class:`gitops_ray.sync.reasons.Reason`; :mod:`gitops_ray.sync.engine` runs the steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitops_ray.sync.appstatus import OPERATION_STATE
from gitops_ray.types import OperationPhase, ResourceKey

__all__ = ["OPERATION_STATE", "OperationState", "only_field"]


@dataclass(frozen=True)
class OperationState:
    """Where a running sync stands: what the next step needs to continue it.

    ``wave`` was applied and is waited for; every lower wave is done. ``resources`` are
    the per-object results so far, so the finished operation lists every wave's work.
    ``extra`` carries the controller's bookkeeping (trigger, attempt counters) unchanged.
    """

    revision: str
    wave: int
    started_at: float
    prune: bool = False
    sync_phase: str = "Sync"  # the phase the wave is of (hooks: PreSync, Sync, ...)
    failure: str = ""  # SyncFail hooks run: the failure they run for (message)
    failure_reason: str = ""  # and its reason (a sync.reasons.Reason value)
    only: frozenset[ResourceKey] | None = None
    resources: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> OperationState | None:
        """The running operation recorded in an app's status, or ``None``."""
        op = status.get(OPERATION_STATE)
        if not isinstance(op, Mapping) or op.get("phase") != OperationPhase.RUNNING:
            return None
        try:
            return cls.parse(op)
        except (KeyError, TypeError, ValueError):
            return None  # unreadable (hand-edited): start afresh rather than crash

    @classmethod
    def parse(cls, op: Mapping[str, Any]) -> OperationState:
        """A recorded running operation (``KeyError``/``ValueError`` when malformed)."""
        only = op.get("only")
        known = {"revision", "wave", "startedAt", "prune", "only", "resources", "phase",
                 "message", "finishedAt", "reason", "syncPhase", "failure", "failureReason"}
        return cls(revision=str(op["revision"]), wave=int(op["wave"]),
                   started_at=float(op["startedAt"]), prune=bool(op.get("prune", False)),
                   sync_phase=str(op.get("syncPhase") or "Sync"),
                   failure=str(op.get("failure") or ""),
                   failure_reason=str(op.get("failureReason") or ""),
                   only=None if only is None else frozenset(ResourceKey(*k) for k in only),
                   resources=tuple(dict(r) for r in op.get("resources") or ()),
                   extra={k: v for k, v in op.items() if k not in known})


def only_field(only: frozenset[ResourceKey] | None) -> list[list[str]] | None:
    """``only`` as recorded (sorted lists of group, kind, namespace, name)."""
    if only is None:
        return None
    return sorted([k.group, k.kind, k.namespace, k.name] for k in only)
