"""Which Pods ``gitops-ray restart`` deletes, in which order, and what it refuses."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.sync.records import InventoryEntry
from gitops_ray.sync.restart import PodAction, PodOutcome, RestartResult, event_message, rfc3339
from gitops_ray.sync.restartplan import (
    NO_HEAD_RESTART,
    PodRef,
    check_groups,
    desired_pods,
    plan_restart,
    replaced,
    select_clusters,
)
from tests.samples import raycluster, worker_group

UID = "rc-uid"


def cluster(**annotations: str) -> dict[str, Any]:
    rc = raycluster("rc", "ns", groups=[worker_group("g1"), worker_group("g2")])
    rc["metadata"].update(uid=UID, annotations=annotations)
    return rc


def pod(name: str, group: str, *, head: bool = False, owner: str = UID,
        **meta: Any) -> dict[str, Any]:
    labels = {"ray.io/cluster": "rc", "ray.io/node-type": "head" if head else "worker",
              "ray.io/group": "headgroup" if head else group}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": labels,
                         "ownerReferences": [{"kind": "RayCluster", "name": "rc",
                                              "uid": owner, "controller": True}],
                         **meta}}


PODS = [pod("g2-a", "g2"), pod("g1-b", "g1"), pod("head", "", head=True), pod("g1-a", "g1")]


def names(plan: Any) -> list[str]:
    return [p.name for p in plan.pods]


def test_whole_cluster_is_head_first_then_workers_in_spec_order() -> None:
    plan = plan_restart(cluster(), PODS, groups=[], head=True)
    assert names(plan) == ["head", "g1-a", "g1-b", "g2-a"]
    assert plan.summary() == "head, group g1, group g2, 4 pods"
    assert plan.pods[0] == PodRef("head", "uid-head", "headgroup")


def test_groups_select_only_their_workers() -> None:
    plan = plan_restart(cluster(), PODS, groups=["g1"], head=False)
    assert names(plan) == ["g1-a", "g1-b"]
    assert plan.summary() == "group g1, 2 pods"
    assert names(plan_restart(cluster(), PODS, groups=["g2"], head=True)) == ["head", "g2-a"]


def test_pods_the_operator_would_not_recreate_are_left_alone() -> None:
    rc = cluster()
    rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["g1-b"]}
    others = [pod("foreign", "g1", owner="other-uid"),
              pod("going", "g1", deletionTimestamp="2026-01-01T00:00:00Z"),
              {**pod("elsewhere", "g1"), "metadata": {**pod("elsewhere", "g1")["metadata"],
                                                       "namespace": "other"}},
              pod("unowned", "g1", ownerReferences=[]),
              pod("g3-a", "g3")]
    plan = plan_restart(rc, PODS + others, groups=[], head=False)
    assert names(plan) == ["g1-a", "g2-a"]
    assert plan.summary() == "group g1, group g2, 2 pods"


def test_a_head_kuberay_would_not_recreate_is_refused() -> None:
    rc = cluster(**{NO_HEAD_RESTART: "true"})
    with pytest.raises(ConfigError, match="--no-head"):
        plan_restart(rc, PODS, groups=[], head=True)
    assert names(plan_restart(rc, PODS, groups=["g1"], head=False)) == ["g1-a", "g1-b"]


def entry(kind: str, name: str) -> InventoryEntry:
    api = "v1" if kind == "ConfigMap" else "ray.io/v1"
    return InventoryEntry(api, kind, "ns", name)


INVENTORY = [entry("ConfigMap", "conf"), entry("RayCluster", "alpha"),
             entry("RayCluster", "beta"), entry("RayJob", "nightly")]


def test_clusters_all_or_named() -> None:
    assert [e.name for e in select_clusters("app", INVENTORY, [])] == ["alpha", "beta"]
    assert [e.name for e in select_clusters("app", INVENTORY, ["beta"])] == ["beta"]


def test_unknown_cluster_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"^no RayCluster alhpa in app app "
                                          r"\(did you mean alpha\?\)$"):
        select_clusters("app", INVENTORY, ["alhpa"])
    with pytest.raises(ConfigError, match=r"^no RayCluster conf in app app$"):
        select_clusters("app", INVENTORY, ["conf"])  # a ConfigMap is no RayCluster


def test_rayjob_and_rayservice_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"RayJob ns/nightly owns its RayCluster.*fails the job"):
        select_clusters("app", INVENTORY, ["nightly"])
    only_owners = [entry("RayService", "serve"), entry("RayJob", "nightly")]
    with pytest.raises(ConfigError, match=r"^app app has no RayCluster to restart; RayJob "
                                          r"ns/nightly, RayService ns/serve own their"):
        select_clusters("app", sorted(only_owners), [])
    with pytest.raises(ConfigError, match=r"^app app has no RayCluster to restart$"):
        select_clusters("app", [entry("ConfigMap", "conf")], [])


def test_unknown_group_suggests_the_closest() -> None:
    check_groups(["g1", "g2"], [cluster()])
    with pytest.raises(ConfigError, match=r"no worker group g11 .*\(g1, g2\) "
                                          r"\(did you mean g1\?\)$"):
        check_groups(["g11"], [cluster()])


def test_event_message_names_groups_and_counts() -> None:
    plan = plan_restart(cluster(), PODS, groups=["g1"], head=False)
    done = RestartResult(plan, [PodOutcome(p, PodAction.DELETED) for p in plan.pods])
    assert event_message(done) == "Restarted by gitops-ray restart: group g1, 2 pods"
    done.outcomes[1] = PodOutcome(plan.pods[1], PodAction.FAILED, "forbidden")
    assert not done.ok
    assert event_message(done).endswith("2 pods (1 could not be deleted)")


def test_rfc3339_is_utc_seconds() -> None:
    moment = datetime.datetime(2026, 11, 23, 11, 0, 0, 500,
                               tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert rfc3339(moment) == "2026-11-23T10:00:00Z"


def ready(p: dict[str, Any], value: str = "True") -> dict[str, Any]:
    return {**p, "status": {"phase": "Running",
                            "conditions": [{"type": "Ready", "status": value}]}}


def test_replaced_when_no_old_pod_is_left_and_the_groups_are_ready_again() -> None:
    rc = cluster()
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    plan = plan_restart(rc, PODS, groups=["g1"], head=False)
    new = [ready(pod("g1-c", "g1")), ready(pod("g1-d", "g1"))]
    assert not replaced(rc, PODS, plan)  # nothing happened yet
    assert not replaced(rc, [PODS[0], PODS[2], PODS[1], *new], plan)  # g1-b still there
    assert not replaced(rc, [new[0], ready(pod("g1-d", "g1"), "False")], plan)
    assert replaced(rc, new, plan)
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 1  # the autoscaler scaled down meanwhile
    assert replaced(rc, new[:1], plan)
    whole = plan_restart(rc, PODS, groups=[], head=True)
    assert not replaced(rc, new, whole)  # no head, no g2
    assert replaced(rc, [*new, ready(pod("h2", "", head=True)), ready(pod("g2-b", "g2"))],
                    whole)


@pytest.mark.parametrize(("group", "want"), [
    ({"replicas": 3, "minReplicas": 0, "maxReplicas": 5}, 3),
    ({"replicas": 0, "minReplicas": 2, "maxReplicas": 5}, 2),
    ({"minReplicas": 1}, 1),
    ({"replicas": 9, "minReplicas": 0, "maxReplicas": 4}, 4),
    ({"replicas": 2, "numOfHosts": 4}, 8),
    ({"replicas": 2, "suspend": True}, 0),
])
def test_desired_pods_as_kuberay(group: dict[str, Any], want: int) -> None:
    rc = cluster()
    rc["spec"]["workerGroupSpecs"][0] = {"groupName": "g1", **group}
    assert desired_pods(rc, "g1") == want
    assert desired_pods(rc, "headgroup") == 1
