"""Worker-group change summaries: keyed by groupName, readable paths, autoscaler fields left out."""

from __future__ import annotations

import copy
import json
from typing import Any

from gitops_ray.diff import AppDiff, compare, compile_rules
from gitops_ray.diff.format import to_json
from gitops_ray.diff.groups import readable_path, worker_group_changes
from tests.samples import raycluster, worker_group


def cluster(*groups: dict[str, Any]) -> dict[str, Any]:
    return raycluster(groups=list(groups))


def limits(group: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, Any] = group["template"]["spec"]["containers"][0]["resources"]
    return resources["limits"]  # type: ignore[no-any-return]


def test_a_changed_field_is_keyed_by_group_name_with_from_and_to() -> None:
    live = cluster(worker_group("cpu"), worker_group("gpu", cpu="2"))
    desired = copy.deepcopy(live)
    limits(desired["spec"]["workerGroupSpecs"][1])["cpu"] = "4"
    assert worker_group_changes(desired, live) == {"gpu": {"changed": {
        "template.spec.containers[0].resources.limits.cpu": {"from": "2", "to": "4"}}}}


def test_groups_are_matched_by_name_not_position() -> None:
    live = cluster(worker_group("cpu"), worker_group("gpu"))
    desired = cluster(worker_group("gpu"), worker_group("cpu"))
    assert worker_group_changes(desired, live) == {}


def test_added_and_removed_fields_and_groups() -> None:
    live = cluster(worker_group("cpu"), worker_group("old"))
    desired = cluster(worker_group("cpu"), worker_group("new"))
    group = desired["spec"]["workerGroupSpecs"][0]
    group["rayStartParams"]["num-cpus"] = "1"
    group["template"]["metadata"] = {"labels": {"ray.io/team": "ml"}}
    del group["maxReplicas"]
    assert worker_group_changes(desired, live) == {
        "cpu": {"added": {"rayStartParams.num-cpus": "1",
                          "template.metadata": {"labels": {"ray.io/team": "ml"}}},
                "removed": {"maxReplicas": 10}},
        "new": {"group": "added"},
        "old": {"group": "removed"},
    }


def test_the_autoscalers_fields_are_not_changes() -> None:
    live = cluster(worker_group("cpu", replicas=7))
    live["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["pod-a"]}
    desired = cluster(worker_group("cpu", replicas=1))
    assert worker_group_changes(desired, live) == {}


def test_a_missing_side_adds_or_removes_every_group() -> None:
    obj = cluster(worker_group("cpu"), worker_group("gpu"))
    assert worker_group_changes(obj, None) == {"cpu": {"group": "added"},
                                               "gpu": {"group": "added"}}
    assert worker_group_changes(None, obj) == {"cpu": {"group": "removed"},
                                               "gpu": {"group": "removed"}}


def test_rayjob_and_rayservice_groups_are_found_where_their_cluster_spec_is() -> None:
    live_spec = cluster(worker_group("cpu", cpu="1"))["spec"]
    desired_spec = cluster(worker_group("cpu", cpu="3"))["spec"]
    for kind, field in (("RayJob", "rayClusterSpec"), ("RayService", "rayClusterConfig")):
        def wrap(spec: dict[str, Any], kind: str = kind, field: str = field) -> dict[str, Any]:
            return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "x"},
                    "spec": {field: spec}}
        changes = worker_group_changes(wrap(desired_spec), wrap(live_spec))
        assert set(changes["cpu"]["changed"]) == {
            "template.spec.containers[0].resources.limits.cpu",
            "template.spec.containers[0].resources.requests.cpu"}


def test_other_kinds_have_no_worker_groups() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}}
    assert worker_group_changes(deployment, None) == {}
    foreign = cluster(worker_group("cpu")) | {"apiVersion": "example.com/v1"}
    assert worker_group_changes(foreign, None) == {}


def test_readable_paths_quote_keys_that_are_not_plain_words() -> None:
    assert readable_path(["template", "spec", "containers", 0, "image"]) == (
        "template.spec.containers[0].image")
    assert readable_path(["template", "metadata", "labels", "ray.io/node-type"]) == (
        'template.metadata.labels["ray.io/node-type"]')


def test_json_records_of_ray_objects_carry_worker_groups() -> None:
    live = cluster(worker_group("gpu", cpu="2", replicas=5))
    desired = cluster(worker_group("gpu", cpu="4", replicas=None))
    diff = compare(desired=desired, predicted=None, live=live, rules=compile_rules([]))
    [record] = to_json(AppDiff(resources=[diff]))
    assert record["workerGroups"] == {"gpu": {"changed": {
        "template.spec.containers[0].resources.limits.cpu": {"from": "2", "to": "4"},
        "template.spec.containers[0].resources.requests.cpu": {"from": "2", "to": "4"}}}}
    json.dumps(record)
