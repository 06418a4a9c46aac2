"""gitops_ray.health.assess: verdicts on fixture objects, Argo CD's generic rules, the
InvalidRayClusterSpec Event rule, and totality on malformed objects."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.health import Health, HealthStatus, assess, check_for
from tests.harness.data import load_yaml

HEALTH_DATA = Path(__file__).parent.parent / "testdata" / "health"
RAY_DATA = HEALTH_DATA / "ray.io"
H, S, P, M, D, U = HealthStatus


def health_tests(root: Path) -> Iterator[Any]:
    """(object, expected) pairs from Argo CD style ``health_test.yaml`` files under ``root``."""
    for test_file in sorted(root.glob("**/health_test.yaml")):
        for case in load_yaml(test_file)["tests"]:
            path = test_file.parent / case["inputPath"]
            yield pytest.param(load_yaml(path), case["healthStatus"],
                               id=f"{test_file.parent.name}/{path.stem}")


def load(kind: str, name: str) -> dict[str, Any]:
    path = RAY_DATA / kind / "testdata" / f"{name}.yaml"
    obj: dict[str, Any] = load_yaml(path)
    return obj


def verdict(health: Health | None) -> dict[str, str] | None:
    return None if health is None else {"status": health.status.value, "message": health.message}


@pytest.mark.parametrize(("obj", "expected"), list(health_tests(HEALTH_DATA)))
def test_fixture_verdicts(obj: dict[str, Any], expected: dict[str, str] | None) -> None:
    assert verdict(assess(obj)) == expected


@pytest.mark.parametrize(("kind", "statuses"), [
    ("RayCluster", {H, S, P, D, U}),
    ("RayJob", {H, S, P, D}),
    ("RayService", {H, S, P, D}),
])
def test_fixtures_cover_every_status_of_ray_kinds(kind: str, statuses: set[HealthStatus]) -> None:
    tests = load_yaml(RAY_DATA / kind / "health_test.yaml")["tests"]
    assert {HealthStatus(t["healthStatus"]["status"]) for t in tests} == statuses


def test_missing_object() -> None:
    assert assess(None) == Health(M, "Resource does not exist in the cluster")


@pytest.mark.parametrize("name", ["healthy", "degraded-head-not-ready"])
def test_deletion_wins_over_the_kind_check(name: str) -> None:
    obj = load("RayCluster", name)
    obj["metadata"]["deletionTimestamp"] = "2026-11-20T11:00:00Z"
    assert assess(obj) == Health(P, "Pending deletion")


def test_deletion_applies_to_kinds_without_a_check() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "c", "deletionTimestamp": "2026-11-20T11:00:00Z",
                               "finalizers": ["example.com/keep"]}}
    assert assess(config_map) == Health(P, "Pending deletion")


def test_ignore_healthcheck_annotation_excludes_the_object() -> None:
    obj = load("RayCluster", "degraded-replica-failure")
    obj["metadata"]["annotations"] = {"argocd.argoproj.io/ignore-healthcheck": "true"}
    assert assess(obj) is None


def test_ignore_healthcheck_other_values_are_ignored() -> None:
    obj = load("RayCluster", "degraded-replica-failure")
    obj["metadata"]["annotations"] = {"argocd.argoproj.io/ignore-healthcheck": "True"}
    health = assess(obj)
    assert health is not None and health.status is D


@pytest.mark.parametrize(("api_version", "kind"), [
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("ray.io/v1", "RayNodePool"),
    ("extensions/v1beta1", "Deployment"), ("example.com/v1", "RayCluster"),
])
def test_kinds_without_a_check(api_version: str, kind: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    assert check_for(obj) is None
    assert assess(obj) is None


def test_ray_kinds_are_found_at_any_version() -> None:
    obj = load("RayCluster", "healthy")
    obj["apiVersion"] = "ray.io/v1alpha1"
    assert assess(obj) == Health(H, "RayCluster is ready (2/2 workers ready)")


# --- InvalidRayClusterSpec: the operator writes no status, only a Warning Event ---------------

def rejection_events() -> list[dict[str, Any]]:
    events = load_yaml(RAY_DATA / "RayCluster" / "events" / "invalid-spec.yaml")
    assert isinstance(events, list)
    return events


INVALID = ("InvalidRayClusterSpec: The RayCluster spec is invalid ml-team/training: "
           "worker group cpu has minReplicas 12 greater than maxReplicas 10")


def test_rejected_spec_is_degraded_with_the_newest_event() -> None:
    obj = load("RayCluster", "progressing-invalid-spec")
    assert assess(obj, events=rejection_events()) == Health(D, INVALID)


def test_rejected_new_cluster_without_any_status() -> None:
    obj = load("RayCluster", "progressing-invalid-spec")
    del obj["status"]
    assert assess(obj, events=rejection_events()) == Health(D, INVALID)


def test_rejection_of_another_cluster_or_a_normal_event_does_not_count() -> None:
    obj = load("RayCluster", "progressing-invalid-spec")
    decoys = [e for e in rejection_events()
              if e["type"] == "Normal" or e["involvedObject"]["name"] != "training"]
    health = assess(obj, events=decoys)
    assert health is not None and health.status is H  # the operator's last word


def test_rejection_of_a_previous_cluster_with_the_same_name_does_not_count() -> None:
    obj = load("RayCluster", "progressing-invalid-spec")
    events = rejection_events()
    for event in events:
        event["involvedObject"]["uid"] = "00000000-0000-0000-0000-000000000000"
    health = assess(obj, events=events)
    assert health is not None and health.status is H  # the operator's last word


def test_rejection_as_events_k8s_io_v1() -> None:
    obj = load("RayCluster", "progressing-invalid-spec")
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "type": "Warning",
             "reason": "InvalidRayClusterMetadata", "eventTime": "2026-11-20T10:01:00.000000Z",
             "note": "RayCluster name should be no more than 47 characters",
             "regarding": {"kind": "RayCluster", "name": "training", "namespace": "ml-team"}}
    assert assess(obj, events=[event]) == Health(
        D, "InvalidRayClusterMetadata: RayCluster name should be no more than 47 characters")


def test_old_rejection_does_not_matter_once_the_operator_caught_up() -> None:
    obj = load("RayCluster", "healthy")
    assert assess(obj, events=rejection_events()) == Health(
        H, "RayCluster is ready (2/2 workers ready)")


# --- Totality: odd shapes read as "not reported", never as an exception ------------------------

ODD_STATUSES: list[Any] = [
    "ready", 3, [], {"conditions": {"type": "HeadPodReady"}}, {"conditions": ["x", None, 7]},
    {"conditions": [{"type": "ReplicaFailure", "status": True}]},
    {"observedGeneration": "1", "desiredWorkerReplicas": "2", "readyWorkerReplicas": 1.5},
    {"state": None, "jobDeploymentStatus": 5, "serviceStatus": ["Running"]},
    {"loadBalancer": {"ingress": "x"}, "phase": 1, "containerStatuses": [{"state": "x"}]},
]

ALL_KINDS = [("ray.io/v1", k) for k in ("RayCluster", "RayJob", "RayService")] + [
    ("apps/v1", k) for k in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")] + [
    ("v1", k) for k in ("Service", "PersistentVolumeClaim", "Pod", "Namespace")] + [
    ("networking.k8s.io/v1", "Ingress"), ("batch/v1", "Job"),
    ("apiregistration.k8s.io/v1", "APIService")]


@pytest.mark.parametrize(("api_version", "kind"), ALL_KINDS)
@pytest.mark.parametrize("odd", ODD_STATUSES)
def test_checks_are_total(api_version: str, kind: str, odd: Any) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "generation": "2"},
           "spec": {"replicas": "3", "updateStrategy": "OnDelete", "managedBy": 7},
           "status": copy.deepcopy(odd)}
    health = assess(obj)
    assert health is not None and isinstance(health.message, str)


def test_health_status_order_is_argo_cds() -> None:
    assert sorted([U, D, M, P, S, H]) == [H, S, P, M, D, U]
    assert H < S < P < M < D < U and U >= D and max(P, M) is M
    assert P < "Missing" and D > "Progressing"
    assert f"{D}" == "Degraded" and str(Health(P, "waiting")) == "Progressing: waiting"


def _spec_written_at(obj: dict[str, Any], time: str) -> dict[str, Any]:
    obj["metadata"]["managedFields"] = [
        {"manager": "gitops-ray", "operation": "Apply", "time": time},
        {"manager": "kuberay-operator", "operation": "Update", "subresource": "status",
         "time": "2099-01-01T00:00:00Z"}]  # status writes do not count
    return obj


def test_rejection_of_an_earlier_spec_does_not_count() -> None:
    """KubeRay re-posts the Event while the spec stays invalid; a later edit supersedes it."""
    obj = _spec_written_at(load("RayCluster", "progressing-invalid-spec"), "2099-01-01T00:00:00Z")
    assert assess(obj, events=rejection_events()) == Health(
        H, "RayCluster is ready (2/2 workers ready)")
    obj = _spec_written_at(obj, "2026-11-20T09:00:00Z")
    assert assess(obj, events=rejection_events()) == Health(D, INVALID)


def test_raycronjob_health_from_suspend_and_last_schedule_time() -> None:
    cron = {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "0 2 * * *", "jobTemplate": {}}}
    assert assess(cron) == Health(HealthStatus.HEALTHY,
                                  "RayCronJob on schedule '0 2 * * *': no RayJob created yet")
    ran = {**cron, "status": {"lastScheduleTime": "2026-12-02T02:00:00Z"}}
    assert assess(ran) == Health(HealthStatus.HEALTHY, "RayCronJob on schedule '0 2 * * *': "
                                 "last RayJob created at 2026-12-02T02:00:00Z")
    held = {**ran, "spec": {**cron["spec"], "suspend": True}}
    assert assess(held) == Health(HealthStatus.SUSPENDED, "RayCronJob is suspended: no new RayJobs")
