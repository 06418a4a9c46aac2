"""Has an app's prune finished? What ``wait`` asks when the record says "deleting".

After a prune the status record honestly says OutOfSync: the objects' deletion was
accepted, but finalizers still hold them (see :mod:`gitops_ray.sync.engine`). The
controller rewrites the record when the watch reports them gone; a ``gitops-ray sync
--prune`` run without a controller has no one to do that. So ``wait`` looks for itself:
an app whose only differences are objects being deleted is done when each of them is
really gone (a plain GET per object, nothing written). Anything else out of sync, or a
record without the details, keeps it waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitops_ray.diff.compare import DELETING
from gitops_ray.kube import Kube, UnknownKind
from gitops_ray.sync.records import AppRecord, InventoryEntry
from gitops_ray.types import SyncStatus


def deleting_entries(record: AppRecord) -> list[InventoryEntry] | None:
    """The inventory entries of the objects still being deleted, when that is all that differs.

    ``None`` when the app is out of sync for any other reason (or the record cannot say).
    """
    out = [r for r in record.status.get("resources") or [] if _out_of_sync(r)]
    if record.status.get("sync") != SyncStatus.OUT_OF_SYNC or not out:
        return None
    if any(r.get("reason") != DELETING for r in out):
        return None
    keys = {str(r.get("key")) for r in out}
    entries = [e for e in record.inventory if str(e.key) in keys]
    return entries if len(entries) == len(keys) else None


def deletions_finished(record: AppRecord, kube: Kube) -> bool:
    """Whether the record's only differences were deletions, and every one has finished."""
    entries = deleting_entries(record)
    return entries is not None and all(_gone(kube, e) for e in entries)


def _out_of_sync(resource: Mapping[str, Any]) -> bool:
    return bool(resource.get("status") == SyncStatus.OUT_OF_SYNC)


def _gone(kube: Kube, entry: InventoryEntry) -> bool:
    try:
        return kube.get(entry.api_version, entry.kind, name=entry.name,
                        namespace=entry.namespace or None) is None
    except UnknownKind:  # the CRD itself was removed: its objects are gone too
        return True
