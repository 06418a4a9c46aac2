"""Built-in rules: the Ray autoscaler's replicas and scaleStrategy are not drift."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops_ray.diff import compare, compile_rules
from tests.samples import raycluster, worker_group


def autoscaled(obj: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as live after the autoscaler scaled group 0 to 5 and marked a pod."""
    live = copy.deepcopy(obj)
    groups = _at(live, cluster)["workerGroupSpecs"]
    groups[0]["replicas"] = 5
    groups[0]["scaleStrategy"] = {"workersToDelete": ["demo-cpu-worker-x"]}
    return live


def _at(obj: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    for key in cluster["path"]:
        spec = spec[key]
    return spec


def rayjob(autoscaling: bool = True) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"},
            "spec": {"entrypoint": "python run.py",
                     "rayClusterSpec": raycluster(autoscaling=autoscaling)["spec"]}}


def rayservice(autoscaling: bool = True) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "svc"},
            "spec": {"serveConfigV2": "applications: []",
                     "rayClusterConfig": raycluster(autoscaling=autoscaling)["spec"]}}


KINDS: dict[str, Any] = {
    "RayCluster": {"make": lambda on: raycluster(autoscaling=on), "path": []},
    "RayJob": {"make": rayjob, "path": ["rayClusterSpec"]},
    "RayService": {"make": rayservice, "path": ["rayClusterConfig"]},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_autoscaler_fields_are_not_drift(kind: str) -> None:
    cluster = KINDS[kind]
    desired = cluster["make"](True)
    diff = compare(desired=desired, predicted=None, live=autoscaled(desired, cluster),
                   rules=compile_rules([]))
    assert (diff.status, diff.reason, diff.warnings) == ("Synced", "", ())
    assert "replicas" not in _at(diff.live_normalized or {}, cluster)["workerGroupSpecs"][0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_builtin_rules_can_be_turned_off(kind: str) -> None:
    cluster = KINDS[kind]
    desired = cluster["make"](True)
    diff = compare(desired=desired, predicted=None, live=autoscaled(desired, cluster),
                   rules=compile_rules([], builtin=False))
    assert (diff.status, diff.reason) == ("OutOfSync", "modified")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_without_autoscaling_replicas_are_gits(kind: str) -> None:
    cluster = KINDS[kind]
    desired = cluster["make"](False)
    diff = compare(desired=desired, predicted=None, live=autoscaled(desired, cluster),
                   rules=compile_rules([]))
    assert (diff.status, diff.reason) == ("OutOfSync", "modified")


@pytest.mark.parametrize(("git", "cluster"), [(True, False), (False, True)])
def test_autoscaling_on_either_side_activates_the_rule(git: bool, cluster: bool) -> None:
    desired, live = raycluster(autoscaling=git), raycluster(autoscaling=cluster)
    live["spec"]["workerGroupSpecs"][0]["replicas"] = 7
    diff = compare(desired=desired, predicted=None, live=live, rules=compile_rules([]))
    assert diff.reason == "modified"  # enableInTreeAutoscaling itself differs ...
    assert diff.desired_normalized is not None and diff.live_normalized is not None
    assert "replicas" not in diff.live_normalized["spec"]["workerGroupSpecs"][0]  # ... not this
    assert compile_rules([]).ignored_paths(desired, live=live)[0] == (
        "spec", "workerGroupSpecs", 0, "replicas")


def test_only_ray_io_is_concerned() -> None:
    desired = raycluster()
    desired["apiVersion"] = "example.com/v1"
    live = autoscaled(desired, KINDS["RayCluster"])
    diff = compare(desired=desired, predicted=None, live=live, rules=compile_rules([]))
    assert diff.reason == "modified"


def test_a_cluster_without_worker_groups_gives_no_warning() -> None:
    desired = raycluster(groups=[])
    del desired["spec"]["workerGroupSpecs"]
    result = compile_rules([]).normalize(desired)
    assert result.warnings == [] and result.obj == desired


def test_other_worker_group_edits_still_show() -> None:
    desired = raycluster(groups=[worker_group("cpu", replicas=1, max_replicas=10)])
    live = autoscaled(desired, KINDS["RayCluster"])
    desired["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 20
    diff = compare(desired=desired, predicted=None, live=live, rules=compile_rules([]))
    assert diff.reason == "modified"
    assert diff.desired_normalized is not None
    assert diff.desired_normalized["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 20
