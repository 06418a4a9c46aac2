"""KubeRay v1.6.2's operator-side rules, checked before a sync (gitops_ray.diff.refusals).

The rules follow ``ray-operator/controllers/ray/utils/validation.go`` of that release; the
e2e tier (tests/e2e/test_kuberay_rules.py) shows the real operator refusing the same.
"""

from __future__ import annotations

import copy
from typing import Any

from gitops_ray.diff.refusals import (
    API_SERVER,
    OPERATOR,
    RULES_VERSION,
    operator_refusals,
    server_refusals,
)
from gitops_ray.types import ResourceKey
from tests.samples import raycluster


def rayjob(**cluster: Any) -> dict[str, Any]:
    spec = raycluster("job")["spec"]
    spec.update(cluster)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {"entrypoint": "python run.py", "rayClusterSpec": spec}}


def fields(found: tuple[Any, ...]) -> list[str]:
    return [r.field for r in found]


def test_upgrade_strategy_in_a_rayjob_cluster_is_refused_by_the_operator() -> None:
    job = rayjob(upgradeStrategy={"type": "Recreate"})
    found = operator_refusals(job, None)
    assert fields(found) == ["spec.rayClusterSpec.upgradeStrategy"]
    assert found[0].by == OPERATOR and RULES_VERSION in OPERATOR
    assert "cannot be set when RayCluster is created by RayJob" in found[0].why
    assert operator_refusals(rayjob(upgradeStrategy={}), None) == ()  # no type: allowed


def test_only_a_change_counts() -> None:
    job = rayjob(upgradeStrategy={"type": "Recreate"})
    assert operator_refusals(job, copy.deepcopy(job)) == ()  # live has it: refused already
    assert fields(operator_refusals(job, rayjob())) == ["spec.rayClusterSpec.upgradeStrategy"]


def test_rayservice_and_rayjob_made_clusters_and_cron_templates() -> None:
    service = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s"},
               "spec": {"upgradeStrategy": {"type": "Rolling"},
                        "rayClusterConfig": {**raycluster("s")["spec"],
                                             "upgradeStrategy": {"type": "None"}}}}
    assert fields(operator_refusals(service, None)) == [
        "spec.upgradeStrategy.type", "spec.rayClusterConfig.upgradeStrategy"]
    child = raycluster("child")
    child["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    child["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    assert fields(operator_refusals(child, None)) == ["spec.upgradeStrategy"]
    child["metadata"]["labels"] = {}
    assert operator_refusals(child, None) == ()  # a user's own cluster may set it
    cron = {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "*/5 * * * *",
                     "jobTemplate": {**rayjob()["spec"], "suspend": True}}}
    found = operator_refusals(cron, None)
    assert fields(found) == ["spec.jobTemplate.suspend"]
    assert found[0].why.startswith("invalid RayJob template: ")


def test_worker_group_rules() -> None:
    rc = raycluster("g", autoscaling=True)
    rc["spec"]["workerGroupSpecs"][0].update(suspend=True, idleTimeoutSeconds=60)
    assert fields(operator_refusals(rc, None)) == ["spec.workerGroupSpecs[0].suspend",
                                                   "spec.workerGroupSpecs[0].idleTimeoutSeconds"]
    rc["spec"]["workerGroupSpecs"][0].pop("suspend")
    rc["spec"]["autoscalerOptions"] = {"version": "v2"}
    assert operator_refusals(rc, None) == ()


def test_not_ray_objects_are_never_refused_here() -> None:
    assert operator_refusals({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "x"}}, None) == ()


def test_server_refusals_name_the_field_never_the_value() -> None:
    key = ResourceKey("ray.io", "RayCluster", "ns", "rc")
    details = {"causes": [{"reason": "FieldValueInvalid", "field": "spec.managedBy",
                           "message": 'Invalid value: "kueue.x-k8s.io/multikueue": '
                                      "the managedBy field is immutable"}]}
    (found,) = server_refusals(key, details, "ignored")
    assert (found.field, found.why, found.by) == (
        "spec.managedBy", "the managedBy field is immutable", API_SERVER)
    assert "multikueue" not in str(found)
    (bare,) = server_refusals(key, {}, "PATCH rc: is invalid")
    assert (bare.field, bare.why) == ("-", "PATCH rc: is invalid")
