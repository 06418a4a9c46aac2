"""The sync engine's pure decisions: what goes first, what is settled, whose object it is.

And how an apply's answer is named.

Pure functions of a :class:`~gitops_ray.sync.request.SyncRequest` and the objects in
hand, apart from :mod:`gitops_ray.sync.engine` so that module is only how a sync runs
(and these can be read, and tested, without a cluster).
"""

from __future__ import annotations

import copy

from gitops_ray.health import Health
from gitops_ray.sync.reasons import Reason, StepFailed
from gitops_ray.sync.request import SyncRequest
from gitops_ray.sync.tracking import shared_message, shared_with
from gitops_ray.types import Manifest, ResourceAction, ResourceKey, SyncOption

VOLATILE = ("managedFields", "resourceVersion", "generation")
"""Metadata that changes on every write: not a difference between an apply and live."""
FAIL_ON_SHARED = SyncOption.FAIL_ON_SHARED_RESOURCE


SHARED_WARNING = "SharedResourceWarning: "


def shared(request: SyncRequest, obj: Manifest, live: Manifest | None) -> str:
    """``""``, or the warning that ``live`` is another app's; refused with the option."""
    other = shared_with(obj, live)
    if not other:
        return ""
    message = shared_message(ResourceKey.of(obj), request.app.name, other)
    if request.option(FAIL_ON_SHARED):
        raise StepFailed(Reason.SHARED_RESOURCE, f"Shared resource found: {message}")
    return SHARED_WARNING + message


def changed_first(request: SyncRequest, objs: list[Manifest], *,
                   leaving: frozenset[ResourceKey] = frozenset()) -> list[list[Manifest]]:
    """``objs`` as batches: those the comparison found OutOfSync, then the rest.

    Objects in ``leaving`` (the settled ones) are in neither: they are not applied. The
    second batch starts once the first has landed, so a commit's change does not wait
    behind (nor share the API server with) re-asserting what was in sync.
    """
    changed = request.out_of_sync or frozenset()
    first = [o for o in objs if ResourceKey.of(o) in changed]
    not_rest = changed | leaving
    rest = [o for o in objs if ResourceKey.of(o) not in not_rest]
    return [batch for batch in (first, rest) if batch]


def seen_in(request: SyncRequest, namespace: str) -> bool:
    """Whether the comparison before the sync found a live object in ``namespace``.

    Then the namespace exists (a settled object is live as our last apply left it), and
    ``CreateNamespace`` need not ask. One deleted since, with all it held, fails this
    step's applies; the retry's comparison finds nothing live there and creates it.
    """
    live = request.live or {}
    return any(k.namespace == namespace for k in request.settled) or any(
        k.namespace == namespace and obj is not None for k, obj in live.items())


def is_settled(request: SyncRequest, key: ResourceKey) -> bool:
    """Whether ``key`` is not re-applied: live is as our last apply left it (module doc)."""
    return key in request.settled and key not in (request.out_of_sync or frozenset())


def said(health: Health) -> str:
    return f"{health.status.value} ({health.message})" if health.message \
        else health.status.value


def action(live: Manifest | None, written: Manifest) -> ResourceAction:
    if live is None:
        return ResourceAction.CREATED
    if comparable(live) == comparable(written):
        return ResourceAction.UNCHANGED
    return ResourceAction.CONFIGURED


def comparable(obj: Manifest) -> Manifest:
    out = copy.copy(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items()
                       if k not in VOLATILE}
    out.pop("status", None)
    return out
