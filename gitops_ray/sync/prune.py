"""Pruning: what left git is deleted, unless it is not ours, protected, or kept by option.

Why apart from :mod:`gitops_ray.sync.engine`: deciding and doing a prune is its own
protocol (read, decide, delete with the UID and version read as preconditions; read again
when it changed in between), and :mod:`gitops_ray.sync.teardown` shares its checks.
"""

from __future__ import annotations

from gitops_ray.kube import Conflict, Kube, KubeError, LeaseExpired
from gitops_ray.sync.events import post_event
from gitops_ray.sync.order import prune_order, sync_options
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import AppRecord, InventoryEntry
from gitops_ray.sync.request import ResourceResult, SyncRequest, SyncResult, told
from gitops_ray.sync.tracking import is_tracked_by
from gitops_ray.types import Manifest, ResourceAction, ResourceKey, SyncOption

MAX_CONFLICT_RETRIES = 5
"""Reads of one object when it keeps changing between a read and the write based on it."""
PRUNE_CONFIRM_UNSUPPORTED = ("not pruned: Prune=confirm is not supported (gitops-ray has no "
                             "confirmation step), so it is treated as Prune=false; delete "
                             "the object by hand once you are sure")
STILL_DELETING = "deletion accepted; waiting for finalizers (e.g. foreground deletion)"
KEPT_IN_INVENTORY = frozenset({ResourceAction.PRUNE_SKIPPED, ResourceAction.PENDING_PRUNE,
                               ResourceAction.FAILED, ResourceAction.DELETING})
"""Prune outcomes after which the object may still exist, so the app must still track it."""


def prune(kube: Kube, request: SyncRequest, record: AppRecord, wanted: set[ResourceKey],
          result: SyncResult) -> list[InventoryEntry]:
    """Delete what left git; return the entries that must stay in the inventory."""
    stale = [e for e in record.inventory if e.key not in wanted]
    kept: list[InventoryEntry] = []
    for entry in prune_order([_stub(e) for e in stale]):
        outcome = told(request, _prune_one(kube, request, InventoryEntry.of(entry)))
        if outcome.action in KEPT_IN_INVENTORY:
            kept.append(InventoryEntry.of(entry))
        if outcome.action != ResourceAction.GONE:
            result.resources.append(outcome)
        if outcome.action == ResourceAction.FAILED:
            result.fail(outcome.message, Reason.PRUNE_FAILED)
        if outcome.message == PRUNE_CONFIRM_UNSUPPORTED:
            result.note(PRUNE_CONFIRM_UNSUPPORTED)
    return kept

def _prune_one(kube: Kube, request: SyncRequest, entry: InventoryEntry) -> ResourceResult:
    """Read, decide, delete; again when it changed in between (module docstring)."""
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            live = kube.get(entry.api_version, entry.kind, name=entry.name,
                                 namespace=entry.namespace or None)
        except LeaseExpired:
            raise
        except KubeError as e:  # e.g. RBAC denies the GET: cannot check it is ours
            return ResourceResult(entry.key, ResourceAction.FAILED,
                                  f"prune failed: cannot read it: {e}")
        if live is None:
            return ResourceResult(entry.key, ResourceAction.GONE)
        outcome = _protected(request, entry) or _not_pruned(request, live, entry) \
            or _delete(kube, request, live, entry)
        if outcome is not None:
            return outcome
    return ResourceResult(entry.key, ResourceAction.FAILED, "prune failed: it kept "
                          f"changing; still there after {MAX_CONFLICT_RETRIES} attempts")

def _delete(kube: Kube, request: SyncRequest, live: Manifest, entry: InventoryEntry
            ) -> ResourceResult | None:
    """Delete ``live`` as read; ``None`` when it changed since (read it again)."""
    policy = _propagation(request)
    try:
        kube.delete(entry.api_version, entry.kind, name=entry.name,
                         namespace=entry.namespace or None,
                         propagation_policy=policy, uid=live["metadata"]["uid"],
                         resource_version=live["metadata"]["resourceVersion"],
                         dry_run=request.dry_run)
        if not request.dry_run:
            post_event(kube, live, reason="ResourcePruned",
                       message=f"pruned by app {request.app.name}: no longer in git")
        if not request.dry_run and still_there(kube, entry, live["metadata"]["uid"]):
            return ResourceResult(entry.key, ResourceAction.DELETING, STILL_DELETING)
    except LeaseExpired:
        raise
    except Conflict:
        return None
    except KubeError as e:
        return ResourceResult(entry.key, ResourceAction.FAILED, f"prune failed: {e}")
    return ResourceResult(entry.key, ResourceAction.PRUNED)


def still_there(kube: Kube, entry: InventoryEntry, uid: str) -> bool:
    """Whether the object we asked to delete still exists (deletion is asynchronous)."""
    live = kube.get(entry.api_version, entry.kind, name=entry.name,
                    namespace=entry.namespace or None)
    return live is not None and live["metadata"].get("uid") == uid


def is_deleting(obj: Manifest) -> bool:
    """Whether the API server has accepted a deletion of ``obj`` (it waits on finalizers)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _protected(request: SyncRequest, entry: InventoryEntry) -> ResourceResult | None:
    """Skip the prune of an object the request protects (e.g. its AppProject forbids it)."""
    why = request.protected(entry.key) if request.protected is not None else ""
    return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, f"not pruned: {why}") \
        if why else None


def _not_pruned(request: SyncRequest, live: Manifest,
                entry: InventoryEntry) -> ResourceResult | None:
    """Why a live object that left git is not deleted now, or ``None``: delete it."""
    if not is_tracked_by(request.app.name, live):
        return ResourceResult(entry.key, ResourceAction.NOT_OURS,
                              "not pruned: its tracking id does not name this app")
    if is_deleting(live):
        return ResourceResult(entry.key, ResourceAction.DELETING, STILL_DELETING)
    if sync_options(live).has(SyncOption.PRUNE_FALSE) or request.option(SyncOption.PRUNE_FALSE):
        return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, "ignored (Prune=false)")
    if sync_options(live).has(SyncOption.PRUNE_CONFIRM) or \
            request.option(SyncOption.PRUNE_CONFIRM):
        return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, PRUNE_CONFIRM_UNSUPPORTED)
    if not request.prune:
        return ResourceResult(entry.key, ResourceAction.PENDING_PRUNE,
                              "not in git; prune is off")
    return None


def _propagation(request: SyncRequest) -> str:
    return request.app.sync_policy.options.prune_propagation().capitalize()


def _stub(entry: InventoryEntry) -> Manifest:
    return {"apiVersion": entry.api_version, "kind": entry.kind,
            "metadata": {"name": entry.name, "namespace": entry.namespace or None}}
