"""Deleting an app: Argo CD's resources finalizer decides what happens to its objects.

Argo CD deletes an Application's objects with it only when the Application carries
``resources-finalizer.argocd.argoproj.io`` (foreground deletion; ``.../background`` for
background); without it the objects are orphaned and keep running. We follow that, for
an Application removed from its app-of-apps source (the controller) and for
``gitops-ray delete``. Either way the app's record goes, so ``status`` stops listing an
app nobody manages; a cascade that could not delete everything keeps the record with what
is left (and the error), so nothing is lost track of and the deletion can be retried.

Cascade deletion is prune with the same safety: only objects in the app's inventory
*and* carrying a tracking id that names this app and themselves, with ``uid`` and
``resourceVersion`` preconditions (one that changed since it was read, say another app
took it, is left and retried); ``argocd.argoproj.io/sync-options: Delete=false`` keeps
an object, as in Argo CD, and so does the app's AppProject when it forbids the object's
kind or namespace (Argo CD's finalizer deletes only what the project permits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from gitops_ray.kube import Kube, KubeError
from gitops_ray.render.apps import Application
from gitops_ray.sync import statuswrites
from gitops_ray.sync.events import post_event
from gitops_ray.sync.order import prune_order, sync_options
from gitops_ray.sync.prune import STILL_DELETING, still_there
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore
from gitops_ray.sync.request import ResourceResult
from gitops_ray.sync.tracking import is_tracked_by
from gitops_ray.types import Manifest, ResourceAction, ResourceKey, SyncOption

log = structlog.get_logger(__name__)
Protected = Callable[[ResourceKey], str]
_DELETED = (ResourceAction.DELETED, ResourceAction.DELETING)
RESOURCES_FINALIZER = "resources-finalizer.argocd.argoproj.io"
_POLICIES = {RESOURCES_FINALIZER: "Foreground", f"{RESOURCES_FINALIZER}/foreground":
             "Foreground", f"{RESOURCES_FINALIZER}/background": "Background"}


def cascade_policy(app: Application) -> str | None:
    """The propagation policy of the app's resources finalizer; ``None``: orphan."""
    return policy_of(app.finalizers)


def policy_of(finalizers: Iterable[str]) -> str | None:
    return next((_POLICIES[f] for f in finalizers if f in _POLICIES), None)


@dataclass
class Teardown:
    """What deleting an app did to each of its objects (empty when orphaning)."""

    app: str
    resources: list[ResourceResult] = field(default_factory=list)
    left: list[InventoryEntry] = field(default_factory=list)  # failed: still tracked

    @property
    def ok(self) -> bool:
        return not self.left

    @property
    def message(self) -> str:
        return "; ".join(r.message for r in self.resources if r.action == ResourceAction.FAILED)


def delete_app(kube: Kube, store: RecordStore, app: str, *, policy: str | None,
               protected: Protected | None = None) -> Teardown:
    """Delete (``policy`` set) or orphan (``None``) the app's objects, then its record.

    ``protected``: why an object must not be deleted (``""``: it may), e.g. its kind is
    one the app's AppProject forbids; such an object is orphaned.
    """
    record = store.read(app)  # the watch cache may not have the last sync's inventory
    teardown = Teardown(app)
    if policy is not None:
        _delete_objects(kube, record, teardown, policy, protected)
    if teardown.ok:
        store.delete(app)
    else:
        _keep_what_is_left(store, teardown)
    log.info("app_deleted", app=app, cascade=policy or "orphan", ok=teardown.ok,
             deleted=sum(r.action in _DELETED for r in teardown.resources))
    return teardown


def _delete_objects(kube: Kube, record: AppRecord, teardown: Teardown, policy: str,
                    protected: Protected | None) -> None:
    for stub in prune_order([_stub(e) for e in record.inventory]):
        entry = InventoryEntry.of(stub)
        why = protected(entry.key) if protected is not None else ""
        outcome = ResourceResult(entry.key, ResourceAction.ORPHANED, f"not deleted: {why}") \
            if why else _delete_one(kube, teardown.app, entry, policy)
        if outcome.action != ResourceAction.GONE:
            teardown.resources.append(outcome)
        if outcome.action == ResourceAction.FAILED:
            teardown.left.append(entry)


def _delete_one(kube: Kube, app: str, entry: InventoryEntry, policy: str) -> ResourceResult:
    try:
        live = kube.get(entry.api_version, entry.kind, name=entry.name,
                        namespace=entry.namespace or None)
        if live is None:
            return ResourceResult(entry.key, ResourceAction.GONE)
        if not is_tracked_by(app, live):
            return ResourceResult(entry.key, ResourceAction.NOT_OURS,
                                  "not deleted: its tracking id does not name this app")
        if sync_options(live).has(SyncOption.DELETE_FALSE):
            return ResourceResult(entry.key, ResourceAction.ORPHANED, "kept (Delete=false)")
        post_event(kube, live, reason="ResourceDeleted",
                   message=f"deleted with app {app}: its Application was deleted")
        kube.delete(entry.api_version, entry.kind, name=entry.name,
                    namespace=entry.namespace or None,
                    propagation_policy=policy, uid=live["metadata"]["uid"],
                    resource_version=live["metadata"]["resourceVersion"])
        if still_there(kube, entry, live["metadata"]["uid"]):  # finalizers: accepted, not gone
            return ResourceResult(entry.key, ResourceAction.DELETING, STILL_DELETING)
    except KubeError as e:
        return ResourceResult(entry.key, ResourceAction.FAILED, f"{entry.key}: delete failed: {e}")
    return ResourceResult(entry.key, ResourceAction.DELETED)


def _keep_what_is_left(store: RecordStore, teardown: Teardown) -> None:
    def change(record: AppRecord) -> None:
        record.inventory = sorted(set(teardown.left))
        statuswrites.failed(record, f"delete: {teardown.message}")

    store.update(teardown.app, change)


def _stub(entry: InventoryEntry) -> Manifest:
    return {"apiVersion": entry.api_version, "kind": entry.kind,
            "metadata": {"name": entry.name, "namespace": entry.namespace or None}}
