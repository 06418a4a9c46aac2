"""The operator's rules for a change (KubeRay v1.6.1), as :mod:`gitops_ray.health.impact` has them.

Each case is a rule read in the operator's source (module docstring); the e2e tier
(tests/e2e/test_impact.py) checks the main two against the real operator.
"""

from __future__ import annotations

import copy
from typing import Any

from gitops_ray.health.impact import (
    Effect,
    GroupPods,
    changed_parts,
    clusters_of,
    desired_pods,
    predict,
    worker_count,
)
from gitops_ray.sync.appstatus import decode_status
from tests.samples import raycluster, worker_group

NS = "ray"
HASH = {"ray.io/upgrade-strategy-recreate-hash": "abc"}


def pod(cluster: str, group: str, index: int, *, head: bool = False,
        deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"{cluster}-{group}-{index}", "namespace": NS,
        "labels": {"ray.io/cluster": cluster, "ray.io/group": group,
                   "ray.io/node-type": "head" if head else "worker"},
        "annotations": dict(HASH) if head else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"metadata": meta}


def cluster_pods(name: str, groups: dict[str, int]) -> list[dict[str, Any]]:
    out = [pod(name, "headgroup", 0, head=True)]
    for group, count in groups.items():
        out += [pod(name, group, i) for i in range(count)]
    return out


def rc(groups: list[dict[str, Any]], *, strategy: str | None = None) -> dict[str, Any]:
    out = raycluster("big", NS, groups=groups, autoscaling=False)
    if strategy is not None:
        out["spec"]["upgradeStrategy"] = {"type": strategy}
    return out


def with_image(obj: dict[str, Any], group: int, image: str,
               path: tuple[str, ...] = ("spec",)) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    spec = out
    for key in path:
        spec = spec[key]
    spec["workerGroupSpecs"][group]["template"]["spec"]["containers"][0]["image"] = image
    return out


GROUPS = [worker_group("gpu-a100", replicas=48, max_replicas=64),
          worker_group("cpu", replicas=3)]
PODS = {"big": cluster_pods("big", {"gpu-a100": 48, "cpu": 3})}


def test_recreate_deletes_every_pod_and_names_the_changed_group() -> None:
    live = rc(GROUPS, strategy="Recreate")
    impact = predict(with_image(live, 0, "ray:2.53"), live, PODS)
    assert impact is not None
    assert impact.effect == Effect.RECREATES
    assert impact.deletes == (GroupPods("headgroup", 1), GroupPods("gpu-a100", 48),
                              GroupPods("cpu", 3))
    assert impact.creates == (GroupPods("headgroup", 1), GroupPods("gpu-a100", 48),
                              GroupPods("cpu", 3))
    assert impact.changed == ("gpu-a100",)
    assert impact.cluster == "big"
    assert impact.message.startswith(
        "recreates all 52 Pods (1 head, 48 workers of gpu-a100, 3 workers of cpu) from the "
        "new spec (upgradeStrategy Recreate; changed: gpu-a100)")
    assert impact.as_dict()["operatorVersion"] == "v1.6.1"


def test_without_recreate_running_pods_stay_on_the_old_template() -> None:
    for strategy in (None, "None"):
        live = rc(GROUPS, strategy=strategy)
        impact = predict(with_image(live, 0, "ray:2.53"), live, PODS)
        assert impact is not None
        assert impact.effect == Effect.ROLLOUT_PENDING
        assert impact.stale == (GroupPods("gpu-a100", 48),)
        assert impact.deletes == () and impact.creates == ()
        assert impact.message.startswith("leaves 48 Pods (48 workers of gpu-a100) on the old")


def test_recreate_ignores_what_the_operators_hash_leaves_out() -> None:
    live = rc(GROUPS, strategy="Recreate")
    desired = copy.deepcopy(live)
    group = desired["spec"]["workerGroupSpecs"][1]
    group["replicas"] = 5
    group["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    impact = predict(desired, live, PODS)
    assert impact is not None
    assert impact.effect == Effect.SCALES
    assert impact.deletes == ()
    assert "scales cpu 3 → 5 workers" in impact.message
    # and the strategy itself is not part of the hash
    assert changed_parts(rc(GROUPS)["spec"], live["spec"]) == ()


def test_recreate_needs_the_head_pods_hash() -> None:
    live = rc(GROUPS, strategy="Recreate")
    unhashed = {"big": [p for p in PODS["big"] if not p["metadata"]["annotations"]]}
    impact = predict(with_image(live, 0, "ray:2.53"), live, unhashed)
    assert impact is not None and impact.effect == Effect.ROLLOUT_PENDING


def test_recreate_and_a_spec_field_outside_the_groups() -> None:
    live = rc(GROUPS, strategy="Recreate")
    desired = copy.deepcopy(live)
    desired["spec"]["rayVersion"] = "2.53.0"
    impact = predict(desired, live, PODS)
    assert impact is not None and impact.effect == Effect.RECREATES
    assert impact.changed == ("spec.rayVersion",)


def test_deleting_pods_are_not_counted() -> None:
    live = rc(GROUPS, strategy="Recreate")
    pods = {"big": PODS["big"] + [pod("big", "cpu", 9, deleting=True)]}
    impact = predict(with_image(live, 1, "ray:2.53"), live, pods)
    assert impact is not None and GroupPods("cpu", 3) in impact.deletes


def test_desired_pods_follow_the_operators_count() -> None:
    assert worker_count({"replicas": 3, "minReplicas": 5, "maxReplicas": 10}) == 5
    assert worker_count({"replicas": 30, "minReplicas": 0, "maxReplicas": 10}) == 10
    assert worker_count({"minReplicas": 2}) == 2
    assert worker_count({"replicas": 2, "numOfHosts": 4}) == 8
    assert worker_count({"replicas": 2, "suspend": True}) == 0
    spec = rc([worker_group("a", replicas=0), worker_group("b", replicas=2)])["spec"]
    assert desired_pods(spec) == (GroupPods("headgroup", 1), GroupPods("b", 2))


def test_a_new_cluster_and_a_suspended_one() -> None:
    desired = rc(GROUPS)
    created = predict(desired, None, {})
    assert created is not None and created.effect == Effect.CREATES
    assert created.creates[1] == GroupPods("gpu-a100", 48)
    live = rc(GROUPS)
    live["spec"]["suspend"] = True
    kept = predict(with_image(live, 0, "x"), live, {})
    assert kept is not None and kept.effect == Effect.NOTHING
    desired = copy.deepcopy(live)
    desired["spec"]["suspend"] = False
    resumed = predict(desired, live, {})
    assert resumed is not None and resumed.effect == Effect.RESUMES


def test_replicas_an_ignore_rule_removed_are_live_s() -> None:
    full = rc(GROUPS, strategy="Recreate")
    live = copy.deepcopy(full)
    for group in live["spec"]["workerGroupSpecs"]:
        del group["replicas"]  # as the autoscaler's ignore rule leaves both sides
    desired = with_image(live, 0, "ray:2.53")
    impact = predict(desired, live, PODS, full=full)
    assert impact is not None
    assert GroupPods("gpu-a100", 48) in impact.creates


# -- RayService ------------------------------------------------------------------------------

def service(groups: list[dict[str, Any]], *, active: str = "svc-a", pending: str = "",
            strategy: str | None = None) -> dict[str, Any]:
    spec = copy.deepcopy(raycluster("x", groups=groups, autoscaling=False)["spec"])
    out: dict[str, Any] = {
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "svc", "namespace": NS},
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": spec},
        "status": {"activeServiceStatus": {"rayClusterName": active},
                   "pendingServiceStatus": {"rayClusterName": pending}}}
    if strategy is not None:
        out["spec"]["upgradeStrategy"] = {"type": strategy}
    return out


SERVE = [worker_group("serve", replicas=2)]
CONFIG = ("spec", "rayClusterConfig")


def test_rayservice_config_change_starts_a_new_cluster_beside_the_active_one() -> None:
    for strategy in (None, "NewCluster"):
        live = service(SERVE, strategy=strategy)
        impact = predict(with_image(live, 0, "ray:2.53", CONFIG), live,
                         {"svc-a": cluster_pods("svc-a", {"serve": 2})})
        assert impact is not None
        assert impact.effect == Effect.NEW_CLUSTER
        assert impact.creates == (GroupPods("headgroup", 1), GroupPods("serve", 2))
        assert impact.deletes == (GroupPods("headgroup", 1), GroupPods("serve", 2))
        assert impact.cluster == "svc-a"
        assert "starts a new RayCluster beside svc-a" in impact.message
        assert "deleted 60s after the new one serves" in impact.message


def test_rayservice_pending_cluster_is_replaced() -> None:
    live = service(SERVE, active="", pending="svc-p")
    live["spec"]["rayClusterDeletionDelaySeconds"] = 0
    impact = predict(with_image(live, 0, "ray:2.53", CONFIG), live,
                     {"svc-p": cluster_pods("svc-p", {"serve": 2})})
    assert impact is not None and impact.effect == Effect.REPLACES_PENDING
    assert impact.cluster == "svc-p"
    assert "after 0s" in impact.message
    assert clusters_of(live) == ("svc-p",)


def test_rayservice_strategies_that_do_not_upgrade() -> None:
    for strategy in ("None", "NewClusterWithIncrementalUpgrade"):
        live = service(SERVE, strategy=strategy)
        impact = predict(with_image(live, 0, "ray:2.53", CONFIG), live, {})
        assert impact is not None and impact.effect == Effect.IGNORED, strategy
        assert impact.creates == () and impact.deletes == ()


def test_rayservice_replica_changes_do_not_reach_the_cluster() -> None:
    live = service(SERVE)
    desired = copy.deepcopy(live)
    desired["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 4
    impact = predict(desired, live, {})
    assert impact is not None and impact.effect == Effect.IGNORED
    assert "serve 2 → 4 workers" in impact.message


def test_rayservice_appended_group_and_serve_config_are_in_place() -> None:
    live = service(SERVE)
    desired = copy.deepcopy(live)
    desired["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
        worker_group("extra", replicas=3))
    impact = predict(desired, live, {})
    assert impact is not None and impact.effect == Effect.IN_PLACE
    assert impact.creates == (GroupPods("extra", 3),)
    desired = copy.deepcopy(live)
    desired["spec"]["serveConfigV2"] = "applications: [{name: a}]"
    impact = predict(desired, live, {})
    assert impact is not None and impact.effect == Effect.IN_PLACE
    assert impact.creates == ()


# -- RayJob --------------------------------------------------------------------------------

def job(phase: str, *, suspend: bool = False) -> dict[str, Any]:
    spec = copy.deepcopy(raycluster("x", groups=SERVE, autoscaling=False)["spec"])
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": NS},
            "spec": {"entrypoint": "python a.py", "rayClusterSpec": spec, "suspend": suspend,
                     "shutdownAfterJobFinishes": True},
            "status": {"jobDeploymentStatus": phase, "rayClusterName": "job-abc"}}


def test_rayjob_changes_to_a_started_job_are_disregarded() -> None:
    live = job("Running")
    desired = with_image(live, 0, "ray:2.53", ("spec", "rayClusterSpec"))
    desired["spec"]["activeDeadlineSeconds"] = 60
    impact = predict(desired, live, {"job-abc": cluster_pods("job-abc", {"serve": 2})})
    assert impact is not None and impact.effect == Effect.IGNORED
    assert "disregards spec changes" in impact.message
    assert "read at its next step: activeDeadlineSeconds" in impact.message
    retry = predict(desired, job("Retrying"), {})
    assert retry is not None and retry.message == "retrying: its next attempt is made from " \
        "the new spec"
    finished = predict(desired, job("Complete"), {})
    assert finished is not None and finished.effect == Effect.IGNORED
    assert "does not run it again" in finished.message


def test_rayjob_suspend_and_resume() -> None:
    live = job("Running")
    desired = copy.deepcopy(live)
    desired["spec"]["suspend"] = True
    impact = predict(desired, live, {"job-abc": cluster_pods("job-abc", {"serve": 2})})
    assert impact is not None and impact.effect == Effect.SUSPENDS
    assert impact.deletes == (GroupPods("headgroup", 1), GroupPods("serve", 2))
    live = job("Suspended", suspend=True)
    desired = copy.deepcopy(live)
    desired["spec"]["suspend"] = False
    impact = predict(desired, live, {})
    assert impact is not None and impact.effect == Effect.RESUMES
    assert impact.creates == (GroupPods("headgroup", 1), GroupPods("serve", 2))


def test_other_kinds_and_prunes_are_not_predicted() -> None:
    assert predict(None, rc(GROUPS), PODS) is None
    assert predict({"kind": "ConfigMap", "metadata": {"name": "a"}}, None, {}) is None


# -- where it is shown from the record -------------------------------------------------------

def test_the_record_s_impact_reads_on_the_web_page_and_in_get() -> None:
    from gitops_ray.cli.get import summary_lines
    from gitops_ray.runtime.web.pages import summary

    live = rc(GROUPS, strategy="Recreate")
    impact = predict(with_image(live, 0, "ray:2.53"), live, PODS)
    assert impact is not None
    status = {"sync": "OutOfSync", "impact": [impact.as_dict(), "junk", {"key": "x"}]}
    assert [v for k, v in summary(decode_status(status), now=0.0) if k == "Impact"] == \
        [impact.line()]
    rows = [str(v) for k, v in summary_lines("big", decode_status(status)) if k == "Impact"]
    assert rows == [impact.line()]
