"""The takeover's pure parts: fieldsV1 union, csaupgrade's migration, the predicted removals."""

from __future__ import annotations

import json
from typing import Any

from gitops_ray import FIELD_MANAGER
from gitops_ray.sync.takeover import (
    LAST_APPLIED,
    migrated_managed_fields,
    needs_takeover,
    predicted_after_takeover,
    takeover_patch,
    union_fields,
)


def entry(manager: str, operation: str, fields: dict[str, Any], *, api: str = "v1",
          subresource: str = "") -> dict[str, Any]:
    out = {"manager": manager, "operation": operation, "apiVersion": api,
           "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


def test_union_keeps_membership_of_a_leaf_that_is_a_parent_elsewhere() -> None:
    a = {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {}}}
    b = {"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}
    assert union_fields(a, b) == {
        "f:data": {".": {}, "f:a": {}, "f:b": {}},
        "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}
    assert union_fields({}, b) == b
    assert union_fields(a, a) == a


def test_csa_manager_becomes_ours_when_we_have_no_entry() -> None:
    csa = entry("kubectl-client-side-apply", "Update", {"f:data": {"f:a": {}}})
    scaler = entry("python-requests", "Update", {"f:spec": {"f:replicas": {}}})
    migrated = migrated_managed_fields([csa, scaler])
    assert migrated == [entry(FIELD_MANAGER, "Apply", {"f:data": {"f:a": {}}}), scaler]


def test_previous_appliers_merge_into_our_entry_and_disappear() -> None:
    ours = entry(FIELD_MANAGER, "Apply", {"f:data": {"f:a": {}}})
    migrated = migrated_managed_fields([
        entry("argocd-controller", "Update", {"f:data": {"f:b": {}}}),
        ours,
        entry("before-first-apply", "Update", {"f:data": {"f:c": {}}}),
        entry("argocd-controller", "Apply", {"f:metadata": {"f:labels": {"f:x": {}}}}),
        entry("kubectl-edit", "Update", {"f:data": {"f:d": {}}}),
    ])
    assert migrated == [
        entry(FIELD_MANAGER, "Apply", {"f:data": {"f:a": {}, "f:b": {}, "f:c": {}},
                                       "f:metadata": {"f:labels": {"f:x": {}}}}),
        entry("kubectl-edit", "Update", {"f:data": {"f:d": {}}})]


def test_only_the_same_api_version_is_merged_and_subresources_stay() -> None:
    """As csaupgrade: other versions of the manager are dropped, subresources untouched."""
    status = entry("kubectl-client-side-apply", "Update", {"f:status": {}},
                   subresource="status")
    migrated = migrated_managed_fields([
        entry(FIELD_MANAGER, "Apply", {"f:a": {}}, api="ray.io/v1"),
        entry("kubectl-client-side-apply", "Update", {"f:b": {}}, api="ray.io/v1alpha1"),
        status])
    assert migrated == [entry(FIELD_MANAGER, "Apply", {"f:a": {}}, api="ray.io/v1"), status]


def test_our_status_ownership_is_released() -> None:
    ours = entry(FIELD_MANAGER, "Apply", {"f:spec": {"f:a": {}}, "f:status": {"f:x": {}}})
    live = {"metadata": {"resourceVersion": "7", "managedFields": [ours]}}
    assert needs_takeover(live)
    assert takeover_patch(live) == [
        {"op": "replace", "path": "/metadata/managedFields",
         "value": [entry(FIELD_MANAGER, "Apply", {"f:spec": {"f:a": {}}})]},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"}]


def test_nothing_to_do_without_previous_appliers() -> None:
    live = {"metadata": {"resourceVersion": "7", "managedFields": [
        entry(FIELD_MANAGER, "Apply", {"f:data": {}}),
        entry("python-requests", "Update", {"f:spec": {}})]}}
    assert not needs_takeover(live)
    assert takeover_patch(live) is None
    assert not needs_takeover(None)


def cm_live(data: dict[str, str], last: dict[str, Any] | None,
            entries: list[dict[str, Any]]) -> dict[str, Any]:
    annotations = {LAST_APPLIED: json.dumps(last)} if last is not None else {}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": annotations, "managedFields": entries},
            "data": data}


def test_prediction_drops_what_git_dropped_and_only_that() -> None:
    csa = entry("kubectl-client-side-apply", "Update", {"f:data": {
        ".": {}, "f:a": {}, "f:b": {}, "f:defaulted": {}}})
    edit = entry("kubectl-edit", "Update", {"f:data": {"f:c": {}}})
    live = cm_live({"a": "1", "b": "2", "c": "3", "defaulted": "x"},
                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"a": "1", "b": "2"}}, [csa, edit])
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "1"}}
    predicted = predicted_after_takeover(live, body=body, live=live)
    # b: applied before, gone from git; c: kubectl-edit's; defaulted: never applied
    assert predicted["data"] == {"a": "1", "c": "3", "defaulted": "x"}
    assert live["data"]["b"] == "2"  # the input is not touched


def test_a_field_someone_else_also_owns_is_not_predicted_removed() -> None:
    csa = entry("kubectl-client-side-apply", "Update", {"f:spec": {"f:replicas": {},
                                                                  "f:x": {}}})
    scaler = entry("python-requests", "Update", {"f:spec": {"f:replicas": {}}})
    live = {"apiVersion": "v1", "kind": "K", "metadata": {
        "annotations": {LAST_APPLIED: json.dumps({"spec": {"replicas": 1, "x": 1}})},
        "managedFields": [csa, scaler]}, "spec": {"replicas": 4, "x": 1}}
    predicted = predicted_after_takeover(live, body={"spec": {}}, live=live)
    assert predicted["spec"] == {"replicas": 4}


def test_argo_server_side_apply_entry_counts_as_applied() -> None:
    """Without last-applied, an Apply entry of a previous applier says what it applied."""
    argo = entry("argocd-controller", "Apply", {"f:metadata": {"f:labels": {
        "f:team": {}, "f:tier": {}}}})
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "c", "labels": {"team": "ml", "tier": "gold"}, "managedFields": [argo]}}
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"team": "ml"}}}
    predicted = predicted_after_takeover(live, body=body, live=live)
    assert predicted["metadata"]["labels"] == {"team": "ml"}


def test_keyed_list_items_are_matched_by_key() -> None:
    item = 'k:{"name":"b"}'
    csa = entry("kubectl-client-side-apply", "Update", {"f:spec": {"f:ports": {
        'k:{"name":"a"}': {".": {}, "f:name": {}, "f:port": {}},
        item: {".": {}, "f:name": {}, "f:port": {}}}}})
    ports = [{"name": "b", "port": 2}, {"name": "a", "port": 1}]
    live = {"apiVersion": "v1", "kind": "Service", "metadata": {
        "annotations": {LAST_APPLIED: json.dumps({"spec": {"ports": ports}})},
        "managedFields": [csa]}, "spec": {"ports": ports}}
    body = {"spec": {"ports": [{"name": "a", "port": 1}]}}
    predicted = predicted_after_takeover(live, body=body, live=live)
    assert predicted["spec"]["ports"] == [{"name": "a", "port": 1}]
