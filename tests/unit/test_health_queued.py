"""A Ray object waiting in a Kueue queue is Suspended, with Kueue's reason (pure)."""

from __future__ import annotations

from typing import Any

from gitops_ray.health import HealthStatus, assess

REASON = ("couldn't assign flavors to pod set head: insufficient quota for cpu in flavor "
          "a100, 2 more needed")


def _cluster(*, suspend: bool = True, queue: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ns", "uid": "u-1",
                         "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
            "spec": {"suspend": suspend},
            "status": {"conditions": [{"type": "RayClusterSuspended", "status": "True"}]}}


def _workload(*conditions: dict[str, Any], owner: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "raycluster-rc-1a2b3", "namespace": "ns",
                         "ownerReferences": [{"uid": owner, "controller": True,
                                              "kind": "RayCluster", "name": "rc"}]},
            "status": {"conditions": list(conditions)}}


def test_waiting_for_quota_says_the_queue_the_workload_and_kueues_reason():
    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending",
               "message": REASON}
    health = assess(_cluster(), workloads=[_workload(pending)])
    assert health is not None and health.status is HealthStatus.SUSPENDED
    assert health.message == (f"waiting for admission in LocalQueue team-a "
                              f"(Workload raycluster-rc-1a2b3: {REASON})")


def test_no_workload_yet_and_someone_elses_workload_say_so():
    health = assess(_cluster(), workloads=[_workload(owner="other")])
    assert health is not None and health.status is HealthStatus.SUSPENDED
    assert "Kueue has not made its Workload yet" in health.message


def test_admitted_but_not_started_is_progressing_and_unqueued_is_the_operators_word():
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted"}
    health = assess(_cluster(), workloads=[_workload(admitted)])
    assert health is not None and health.status is HealthStatus.PROGRESSING
    plain = assess(_cluster(queue=""))
    assert plain is not None and plain.message == "RayCluster is suspended"
    running = assess(_cluster(suspend=False), workloads=[_workload(admitted)])
    assert running is not None and "admission" not in running.message
