"""The sync vocabulary: actions, what stays in the inventory, ``wait``'s deletion check,
and how an "already exists" answer is told apart from other conflicts."""

from __future__ import annotations

import json

from gitops_ray.kube.errors import AlreadyExists, Conflict, error_from_response
from gitops_ray.reconcile.deletions import deleting_entries
from gitops_ray.sync.prune import KEPT_IN_INVENTORY
from gitops_ray.sync.records import AppRecord, InventoryEntry
from gitops_ray.sync.request import ResourceResult, SyncResult
from gitops_ray.types import ResourceAction, ResourceKey

CM = InventoryEntry("v1", "ConfigMap", "ns", "old")
RC = InventoryEntry("ray.io/v1", "RayCluster", "ns", "ray")


def test_an_accepted_deletion_is_not_gone() -> None:
    assert ResourceAction.DELETING in KEPT_IN_INVENTORY
    assert ResourceAction.PRUNED not in KEPT_IN_INVENTORY
    result = SyncResult("app", "abc", resources=[
        ResourceResult(CM.key, ResourceAction.DELETING, "waiting"),
        ResourceResult(RC.key, ResourceAction.CONFIGURED)])
    assert result.deleting == [CM.key]
    resources = result.as_operation()["resources"]
    assert json.loads(json.dumps(resources))[0]["action"] == "deleting"


def _record(*resources: tuple[InventoryEntry, str], sync: str = "OutOfSync") -> AppRecord:
    return AppRecord(inventory=[CM, RC], status={"sync": sync, "resources": [
        {"key": str(e.key), "status": "OutOfSync" if reason else "Synced", "reason": reason}
        for e, reason in resources]})


def test_wait_looks_at_deletions_only_when_nothing_else_differs() -> None:
    assert deleting_entries(_record((CM, "deleting"), (RC, ""))) == [CM]
    assert deleting_entries(_record((CM, "deleting"), (RC, "modified"))) is None
    assert deleting_entries(_record((CM, "extraneous"))) is None
    assert deleting_entries(_record((RC, ""), sync="Synced")) is None
    unknown = AppRecord(inventory=[RC], status=_record((CM, "deleting")).status)
    assert deleting_entries(unknown) is None  # the record cannot say what to look for


def test_already_exists_is_a_conflict_of_its_own() -> None:
    body = json.dumps({"kind": "Status", "reason": "AlreadyExists",
                       "message": 'namespaces "ray-demo" already exists'}).encode()
    error = error_from_response(409, body, "POST /api/v1/namespaces")
    assert isinstance(error, AlreadyExists) and isinstance(error, Conflict)
    stale = json.dumps({"kind": "Status", "reason": "Conflict"}).encode()
    assert type(error_from_response(409, stale, "PUT x")) is Conflict


def test_resource_keys_match_the_status_record() -> None:
    assert str(RC.key) == str(ResourceKey("ray.io", "RayCluster", "ns", "ray"))
