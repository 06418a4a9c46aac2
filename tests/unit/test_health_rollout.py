"""gitops_ray.health.rollout: which groups still run Pods from an older template.

Pods are built the way KubeRay v1.6.1 builds them (its labels, env, rewritten command,
API-server-canonicalised quantities), so the fingerprint is tested against the noise the
operator really adds, and autoscaler-only edits (replicas, workersToDelete) must never
show up as a pending rollout.
"""

from __future__ import annotations

import copy
from typing import Any

from gitops_ray.health import HealthStatus, assess
from gitops_ray.health.rollout import (
    GroupRollout,
    matches_template,
    pending_part,
    pending_rollouts,
    rollout_message,
)
from gitops_ray.reconcile.live import pods_token
from tests.samples import raycluster, worker_group

NS = "team-a"


def cluster() -> dict[str, Any]:
    rc = raycluster("demo", NS, groups=[worker_group("cpu", replicas=2),
                                        worker_group("gpu", replicas=3)])
    rc["spec"]["workerGroupSpecs"][1]["template"]["metadata"] = {
        "labels": {"team": "a"}, "annotations": {"example.com/owner": "ml"}}
    rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "MODE", "value": "fast"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    rc["status"] = {"state": "ready", "desiredWorkerReplicas": 5, "readyWorkerReplicas": 5,
                    "conditions": [{"type": "RayClusterProvisioned", "status": "True"},
                                   {"type": "HeadPodReady", "status": "True"}]}
    return rc


def pod_from(rc: dict[str, Any], group: str, index: int) -> dict[str, Any]:
    """A Pod as KubeRay creates it from the group's template at this moment."""
    head = group == "headgroup"
    spec = rc["spec"]["headGroupSpec"] if head else next(
        g for g in rc["spec"]["workerGroupSpecs"] if g["groupName"] == group)
    template = copy.deepcopy(spec["template"])
    meta = template.get("metadata") or {}
    labels = {**meta.get("labels", {}), "ray.io/cluster": rc["metadata"]["name"],
              "ray.io/group": group, "ray.io/node-type": "head" if head else "worker",
              "app.kubernetes.io/created-by": "kuberay-operator"}
    annotations = {**meta.get("annotations", {}), "ray.io/ft-enabled": "false"}
    container = template["spec"]["containers"][0]
    container["command"], container["args"] = ["/bin/bash", "-c", "--"], ["ray start ..."]
    container["env"] = [*container.get("env", []), {"name": "RAY_CLUSTER_NAME", "value": "x"}]
    for kind in ("requests", "limits"):  # the API server writes quantities canonically
        values = container.get("resources", {}).get(kind, {})
        if values.get("memory") == "4Gi":
            values["memory"] = "4096Mi"
    container["imagePullPolicy"] = "IfNotPresent"
    template["spec"].setdefault("serviceAccountName", rc["metadata"]["name"] if head
                                else "default")  # the operator's and the API server's
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"demo-{group}-{index}", "namespace": NS, "labels": labels,
                         "annotations": annotations},
            "spec": template["spec"], "status": {"phase": "Running"}}


def pods_of(rc: dict[str, Any]) -> list[dict[str, Any]]:
    return ([pod_from(rc, "headgroup", 0)] + [pod_from(rc, "cpu", i) for i in range(2)]
            + [pod_from(rc, "gpu", i) for i in range(3)])


def test_pods_fresh_from_the_template_are_current() -> None:
    rc = cluster()
    assert pending_rollouts(rc, pods_of(rc)) == []


def test_image_change_counts_old_pods_per_group() -> None:
    rc = cluster()
    pods = pods_of(rc)
    rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = "r:2"
    pods[-1] = pod_from(rc, "gpu", 9)  # one Pod created after the edit
    assert pending_rollouts(rc, pods) == [GroupRollout("gpu", 2, 3)]
    assert rollout_message(pending_rollouts(rc, pods)) == (
        "rollout pending: group gpu 2/3 pods on an older template")


def test_each_covered_field_is_detected() -> None:
    edits = [
        lambda t: t["spec"]["containers"][0]["resources"]["limits"].update(cpu="3"),
        lambda t: t["spec"]["containers"][0]["env"].append({"name": "NEW", "value": "1"}),
        lambda t: t["spec"]["containers"][0]["env"][0].update(value="slow"),
        lambda t: t["metadata"]["labels"].update(team="b"),
        lambda t: t["metadata"]["annotations"].update({"example.com/cost": "x"}),
        lambda t: t["spec"].update(nodeSelector={"pool": "gpu"}),
        lambda t: t["spec"].update(serviceAccountName="ray"),
        lambda t: t["spec"]["containers"].append({"name": "sidecar", "image": "s:1"}),
    ]
    for edit in edits:
        rc = cluster()
        pods = pods_of(rc)
        edit(rc["spec"]["workerGroupSpecs"][1]["template"])
        assert pending_rollouts(rc, pods) == [GroupRollout("gpu", 3, 3)], edit


def test_head_template_change_is_reported_as_headgroup() -> None:
    rc = cluster()
    pods = pods_of(rc)
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "r:2"
    assert pending_rollouts(rc, pods) == [GroupRollout("headgroup", 1, 1)]


def test_autoscaler_and_scheduling_edits_are_not_a_rollout() -> None:
    rc = cluster()
    pods = pods_of(rc)
    gpu = rc["spec"]["workerGroupSpecs"][1]
    gpu.update(replicas=7, minReplicas=1, maxReplicas=20,
               scaleStrategy={"workersToDelete": ["demo-gpu-0"]})
    gpu["template"]["spec"]["tolerations"] = [{"key": "kueue", "operator": "Exists"}]
    gpu["template"]["spec"]["schedulingGates"] = [{"name": "kueue"}]
    rc["spec"]["upgradeStrategy"] = {"type": "None"}
    assert pending_rollouts(rc, pods) == []


def test_equal_quantities_written_differently_match() -> None:
    rc = cluster()
    pods = pods_of(rc)
    limits = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0][
        "resources"]["limits"]
    limits.update(cpu="1000m", memory=str(4 * 2**30))
    assert pending_rollouts(rc, pods) == []


def test_other_clusters_deleting_and_unknown_group_pods_are_ignored() -> None:
    rc = cluster()
    pods = pods_of(rc)
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "r:2"
    pods[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    other = copy.deepcopy(pods[2])
    other["metadata"]["labels"]["ray.io/cluster"] = "other"
    removed = copy.deepcopy(pods[2])
    removed["metadata"]["labels"]["ray.io/group"] = "gone"
    elsewhere = copy.deepcopy(pods[2])
    elsewhere["metadata"]["namespace"] = "team-b"
    assert pending_rollouts(rc, [*pods, other, removed, elsewhere]) == [
        GroupRollout("cpu", 1, 1)]


def test_malformed_input_is_total() -> None:
    assert pending_rollouts({}, [{}, {"metadata": None}, {"spec": []}]) == []
    assert matches_template({"spec": {"containers": "x"}}, {"spec": None})
    rc = cluster()
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "lots"}}
    assert pending_rollouts(rc, pods_of(rc)) == []


def test_health_stays_healthy_and_says_rollout_pending() -> None:
    rc = cluster()
    pods = pods_of(rc)
    rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = "r:2"
    health = assess(rc, pods=pods)
    assert health is not None
    assert health.status == HealthStatus.HEALTHY
    assert health.message == ("RayCluster is ready (5/5 workers ready); rollout pending: "
                              "group gpu 3/3 pods on an older template")
    assert assess(rc) == assess(rc, pods=[])  # without Pods: as before


def test_only_a_healthy_verdict_carries_the_rollout() -> None:
    rc = cluster()
    pods = pods_of(rc)
    rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = "r:2"
    rc["status"]["conditions"][0]["status"] = "False"
    health = assess(rc, pods=pods)
    assert health is not None and health.status == HealthStatus.PROGRESSING
    assert "rollout pending" not in health.message


def test_pending_part_reads_back_the_groups() -> None:
    message = "RayCluster is ready; rollout pending: group gpu 1/2 pods on an older template"
    assert pending_part(message) == "group gpu 1/2 pods on an older template"
    assert pending_part("RayCluster is ready (2/2 workers ready)") == ""


def test_pods_token_ignores_status_churn_but_not_a_new_pod() -> None:
    rc = cluster()
    pods = pods_of(rc)
    churned = copy.deepcopy(pods)
    for pod in churned:
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready"}]}
        pod["metadata"]["resourceVersion"] = "999"
    assert pods_token(churned) == pods_token(pods)
    assert pods_token(list(reversed(pods))) == pods_token(pods)
    assert pods_token(pods[:-1]) != pods_token(pods)
    deleting = copy.deepcopy(pods)
    deleting[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pods_token(deleting) != pods_token(pods)
    assert pods_token([]) == ""
