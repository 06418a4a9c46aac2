"""The worker-group view (pure): git next to live, the replicas' manager, Pod counts."""

from __future__ import annotations

import json
from typing import Any

from gitops_ray.health.workergroups import has_worker_groups, worker_groups
from tests.samples import raycluster


def _cluster(groups: list[dict[str, Any]], managed: list[dict[str, Any]] | None = None,
             kind: str = "RayCluster") -> dict[str, Any]:
    spec: dict[str, Any] = {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                            "workerGroupSpecs": groups}
    if kind == "RayJob":
        spec = {"rayClusterSpec": spec}
    return {"apiVersion": "ray.io/v1", "kind": kind,
            "metadata": {"name": "rc", "namespace": "ns", "managedFields": managed or []},
            "spec": spec}


def _group(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {"groupName": name, "replicas": replicas, "minReplicas": 0, "maxReplicas": 10,
            "template": {"spec": {"containers": [{"name": "ray", "image": "ray:1"}]}}, **extra}


def _pod(group: str, *, ready: bool = True, image: str = "ray:1", cluster: str = "rc",
         head: bool = False) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "labels": {
                "ray.io/cluster": cluster, "ray.io/group": group,
                "ray.io/node-type": "head" if head else "worker"}},
            "spec": {"containers": [{"name": "ray", "image": image}]},
            "status": {"phase": "Running" if ready else "Pending",
                       "conditions": [{"type": "Ready", "status": str(ready)}]}}


ATOMIC = {"f:spec": {"f:workerGroupSpecs": {}}}


def test_git_and_live_side_by_side_with_the_autoscaler_as_the_writer() -> None:
    desired = _cluster([_group("cpu", 1), _group("gpu", 0)])
    live = _cluster([_group("cpu", 4, scaleStrategy={"workersToDelete": ["w-1"]}),
                     _group("gpu", 0)],
                    managed=[{"manager": "gitops-ray", "operation": "Apply",
                              "time": "2026-01-01T00:00:00Z", "fieldsV1": {"f:spec": {}}},
                             {"manager": "python-requests", "operation": "Update",
                              "time": "2026-01-02T00:00:00Z", "fieldsV1": ATOMIC}])
    pods = [_pod("cpu"), _pod("cpu", ready=False), _pod("cpu", image="ray:0"),
            _pod("cpu", cluster="other"), _pod("headgroup", head=True)]
    cpu, gpu = worker_groups(desired, live, pods)
    assert (cpu.group, cpu.git_replicas, cpu.live_replicas) == ("cpu", 1, 4)
    assert cpu.replicas_manager == "python-requests" and cpu.drifted
    assert (cpu.ready_pods, cpu.total_pods, cpu.stale_pods) == (2, 3, 1)
    assert cpu.workers_to_delete == ("w-1",)
    assert (gpu.min_replicas, gpu.max_replicas, gpu.total_pods) == (0, 10, 0)
    assert cpu.as_dict()["replicasManager"] == "python-requests"


def test_a_keyed_list_names_the_manager_per_group_and_git_only_groups_come_last() -> None:
    keyed = {"f:spec": {"f:workerGroupSpecs": {
        f"k:{json.dumps({'groupName': 'cpu'})}": {"f:replicas": {}}}}}
    live = _cluster([_group("cpu", 2)],
                    managed=[{"manager": "kubectl-edit", "time": "t", "fieldsV1": keyed}])
    views = worker_groups(_cluster([_group("new", 1), _group("cpu", 2)]), live, [])
    assert [(v.group, v.in_git, v.live, v.replicas_manager) for v in views] == [
        ("cpu", True, True, "kubectl-edit"), ("new", True, False, "")]


def test_embedded_cluster_specs_and_garbage_are_total() -> None:
    job = _cluster([_group("w", 3)], kind="RayJob")
    assert has_worker_groups(job) and [v.group for v in worker_groups(job, None)] == ["w"]
    assert worker_groups(None, None) == []
    assert worker_groups({"spec": "nonsense"}, {"kind": "RayCluster", "spec": []}) == []
    assert not has_worker_groups({"apiVersion": "v1", "kind": "ConfigMap"})


def _owned(obj: dict[str, Any], uid: str, owner: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    obj["metadata"]["ownerReferences"] = [{"uid": owner, "kind": "X", "name": "x"}]
    return obj


def test_the_tree_finds_children_by_owner_uid_and_shows_a_rayjobs_cluster_groups() -> None:
    from gitops_ray.reconcile.tree import resource_tree
    from gitops_ray.sync.appstatus import decode_row
    from gitops_ray.types import ResourceKey

    job = _cluster([_group("w", 2)], kind="RayJob")
    job["metadata"] |= {"name": "job", "uid": "job-uid"}
    child = _owned(_cluster([_group("w", 5)]), "rc-uid", "job-uid")
    pod = _owned(_pod("w"), "p1", "rc-uid")
    pod["apiVersion"], pod["kind"], pod["metadata"]["name"] = "v1", "Pod", "rc-w-1"
    stray = _owned(_pod("w"), "p2", "someone-else")
    key = ResourceKey("ray.io", "RayJob", "ns", "job")
    rows = [decode_row({"group": "ray.io", "kind": "RayJob", "namespace": "ns", "name": "job",
                        "status": "Synced",
                        "health": {"status": "Progressing", "message": "m"}})]
    (node,) = resource_tree(rows, {key: job}, {key: job}, [child, pod, stray])
    assert (node.sync, node.health, node.message) == ("Synced", "Progressing", "m")
    assert [(d, n.kind, n.name) for d, n in node.walk()] == [
        (0, "RayJob", "job"), (1, "RayCluster", "rc"), (2, "Pod", "rc-w-1")]
    (w,) = node.worker_groups
    assert (w.git_replicas, w.live_replicas, w.total_pods) == (2, 5, 1)
    assert node.as_dict()["children"][0]["children"][0]["health"] == "Healthy"
    (missing,) = resource_tree(rows, {}, {key: job}, [child])
    assert missing.children == () and missing.worker_groups[0].live is False


def test_the_tree_names_each_pods_ray_group() -> None:
    from gitops_ray.reconcile.tree import resource_tree
    from gitops_ray.sync.appstatus import decode_row
    from gitops_ray.types import ResourceKey

    rc = _cluster([_group("w", 1)])
    rc["metadata"]["uid"] = "rc-uid"
    head, worker = _owned(_pod("headgroup", head=True), "h", "rc-uid"), \
        _owned(_pod("w"), "p", "rc-uid")
    for pod, name in ((head, "rc-head"), (worker, "rc-w-1")):
        pod["apiVersion"], pod["kind"], pod["metadata"]["name"] = "v1", "Pod", name
    key = ResourceKey("ray.io", "RayCluster", "ns", "rc")
    rows = [decode_row({"group": "ray.io", "kind": "RayCluster", "namespace": "ns",
                        "name": "rc"})]
    (node,) = resource_tree(rows, {key: rc}, {}, [head, worker])
    assert [(c.name, c.ray_group) for c in node.children] == [("rc-head", "head"),
                                                              ("rc-w-1", "w")]
    assert node.as_dict()["children"][1]["rayGroup"] == "w"
    assert "rayGroup" not in node.as_dict()


def test_git_replicas_survive_a_record_as_a_skeleton() -> None:
    from gitops_ray.health.workergroups import replicas_of, replicas_skeleton

    job = _cluster([_group("a", 2), {"groupName": "b", "template": {}}], kind="RayJob")
    kept = json.loads(json.dumps(replicas_of(job)))  # what the record stores
    assert kept == {"a": 2, "b": None}
    skeleton = replicas_skeleton("ray.io/v1", "RayJob", kept)
    live = _cluster([_group("a", 5), _group("b", 1)])
    views = {v.group: v for v in worker_groups(skeleton, live)}
    assert (views["a"].git_replicas, views["a"].live_replicas) == (2, 5)
    assert views["b"].in_git and views["b"].git_replicas is None
    assert replicas_skeleton("v1", "ConfigMap", kept) is None


def test_a_raycronjob_shows_the_groups_of_its_job_template() -> None:
    spec = raycluster("t")["spec"]
    cron = {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "0 2 * * *",
                     "jobTemplate": {"entrypoint": "python x.py", "rayClusterSpec": spec}}}
    assert has_worker_groups(cron)
    assert [v.group for v in worker_groups(cron, cron)] == ["cpu", "gpu"]
