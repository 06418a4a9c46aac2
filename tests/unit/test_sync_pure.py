"""Pure parts of sync: keyed merge of ignored paths, validation, tracking, order."""

from __future__ import annotations

import copy

from gitops_ray.sync.merge import keep_live_values, keyed_path
from gitops_ray.sync.order import apply_order, prune_order, sync_options, wave_of
from gitops_ray.sync.tracking import (
    app_label_value,
    is_tracked_by,
    parse_tracking_id,
    with_tracking,
)
from gitops_ray.sync.validate import validate_ray_objects
from gitops_ray.types import ResourceKey
from tests.samples import raycluster, worker_group


def _replicas_paths(obj: dict) -> list[tuple]:
    groups = obj["spec"].get("workerGroupSpecs", [])
    return [("spec", "workerGroupSpecs", i, f) for i in range(len(groups))
            for f in ("replicas", "scaleStrategy")]


def test_keyed_path_uses_group_name() -> None:
    rc = raycluster(groups=[worker_group("a"), worker_group("b")])
    assert keyed_path(rc, ("spec", "workerGroupSpecs", 1, "replicas")) == [
        "spec", "workerGroupSpecs", ("groupName", "b"), "replicas"]


def test_git_edits_land_and_autoscaler_values_survive() -> None:
    live = raycluster(groups=[worker_group("cpu", replicas=1), worker_group("old", replicas=2),
                              worker_group("gpu", replicas=0)])
    live["spec"]["workerGroupSpecs"][0]["replicas"] = 7
    live["spec"]["workerGroupSpecs"][2]["scaleStrategy"] = {"workersToDelete": ["p-1"]}
    desired = raycluster(groups=[worker_group("cpu", replicas=1, cpu="3"),
                                 worker_group("gpu", replicas=0),
                                 worker_group("new", replicas=3)])
    merged = keep_live_values(desired, live, live_paths=_replicas_paths(live),
                              desired_paths=_replicas_paths(desired))
    groups = {g["groupName"]: g for g in merged["spec"]["workerGroupSpecs"]}
    assert [g["groupName"] for g in merged["spec"]["workerGroupSpecs"]] == ["cpu", "gpu", "new"]
    assert groups["cpu"]["replicas"] == 7  # autoscaler's value kept
    assert groups["cpu"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"] == "3"  # git's template edit landed
    assert groups["gpu"]["scaleStrategy"] == {"workersToDelete": ["p-1"]}
    assert groups["new"]["replicas"] == 3  # a new group starts with git's value
    assert "old" not in groups


def test_git_value_dropped_where_live_has_none() -> None:
    live = raycluster(groups=[worker_group("cpu")])
    desired = copy.deepcopy(live)
    desired["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["x"]}
    merged = keep_live_values(desired, live, live_paths=_replicas_paths(live),
                              desired_paths=_replicas_paths(desired))
    assert "scaleStrategy" not in merged["spec"]["workerGroupSpecs"][0]


def test_git_omitting_replicas_keeps_live() -> None:
    live = raycluster(groups=[worker_group("cpu", replicas=5)])
    desired = raycluster(groups=[worker_group("cpu", replicas=None)])
    merged = keep_live_values(desired, live, live_paths=_replicas_paths(live))
    assert merged["spec"]["workerGroupSpecs"][0]["replicas"] == 5
    assert "replicas" not in desired["spec"]["workerGroupSpecs"][0]  # input untouched


def test_validation_messages() -> None:
    bad = raycluster("x" * 60, groups=[worker_group("a", min_replicas=5, max_replicas=2),
                                       worker_group("a")])
    bad["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"] = []
    problems = validate_ray_objects([bad])
    text = "\n".join(problems)
    assert "at most 53" in text
    assert "minReplicas (5) is greater than maxReplicas (2)" in text
    assert "groupName 'a' is used by more than one group" in text
    assert "needs at least one container" in text
    assert validate_ray_objects([raycluster("ok")]) == []


def test_validation_of_embedded_specs() -> None:
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
           "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {}}}}}}
    assert any("headGroupSpec" in p for p in validate_ray_objects([job]))


def test_tracking_round_trip_and_self_reference() -> None:
    rc = raycluster("demo", "ns1")
    tracked = with_tracking("ray-apps", rc)
    tid = tracked["metadata"]["annotations"]["gitops-ray.io/tracking-id"]
    assert tid == "ray-apps:ray.io/RayCluster:ns1/demo"
    assert parse_tracking_id(tid).key == ResourceKey("ray.io", "RayCluster", "ns1", "demo")
    assert is_tracked_by("ray-apps", tracked)
    assert not is_tracked_by("other", tracked)
    copied = copy.deepcopy(tracked)
    copied["metadata"]["name"] = "copy"  # annotation copied onto another object
    assert not is_tracked_by("ray-apps", copied)
    assert parse_tracking_id("a:/ConfigMap:ns/name:with:colons").key.name == "name:with:colons"


def test_label_value_is_valid_for_long_names() -> None:
    value = app_label_value("x" * 80)
    assert len(value) <= 63
    assert app_label_value("short") == "short"


def test_order_namespaces_first_custom_resources_last() -> None:
    objs = [raycluster("rc"),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {
                "name": "early", "annotations": {"argocd.argoproj.io/sync-wave": "-1"}}}]
    assert [o["metadata"]["name"] for o in apply_order(objs)] == ["early", "ns", "cm", "rc"]
    assert prune_order(objs)[0]["metadata"]["name"] == "rc"
    assert wave_of({"metadata": {"annotations": {"argocd.argoproj.io/sync-wave": "x"}}}) == 0


def test_sync_options_annotation() -> None:
    obj = {"metadata": {"annotations": {
        "argocd.argoproj.io/sync-options": "Prune=false, Replace=true"}}}
    assert set(sync_options(obj).written) == {"Prune=false", "Replace=true"}
