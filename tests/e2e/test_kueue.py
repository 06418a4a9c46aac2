"""RayClusters and RayJobs from git through the real Kueue v0.17.0, beside gitops-ray.

Kueue (``localcluster.kueue``, webhooks on, ``ElasticJobsViaWorkloadSlices`` on: see the
``kueue`` fixture) suspends a queued RayCluster at creation, admits it when its
ClusterQueue has quota, and then merges the ResourceFlavor's nodeSelector and tolerations
into every pod template; the KubeRay operator v1.6.2 and kube-scheduler then put its Pods
on the flavor's (kwok) nodes, which are tainted so that only the flavor's toleration lets
them in. gitops-ray must show the queued cluster Suspended with Kueue's reason, write
nothing while Kueue works, keep Kueue's fields through its own applies, and land git's
edits beside them.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from localcluster.kueue import ELASTIC_ANNOTATION, QUEUE_LABEL, queue_objects, resource_flavor
from localcluster.raystack import fake_node, ready_and_untainted
from tests.e2e.raycluster import pods, wait
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, application, push_payload
from tests.samples import raycluster, worker_group

TIMEOUT = 180.0
QUEUE = "team-a"
FLAVOR_LABEL = "gitops-ray.io/e2e-flavor"
_PASSES = itertools.count()


@contextmanager
def flavor(kube: Kube, namespace: str, *, cpu: str) -> Iterator[dict[str, Any]]:
    """Two tainted fake nodes, a flavor that selects and tolerates them, and the queues.

    The ClusterQueue ``<ns>-cq`` has ``cpu`` of quota (memory ample); the LocalQueue
    :data:`QUEUE` in ``namespace`` points at it.
    """
    taint = {"key": FLAVOR_LABEL, "value": namespace, "effect": "NoSchedule"}
    toleration = {"key": FLAVOR_LABEL, "operator": "Equal", "value": namespace,
                  "effect": "NoSchedule"}
    names = [f"{namespace}-{i}" for i in range(2)]
    for name in names:
        node = fake_node(name, "m5.2xlarge", 8, "32Gi")
        node["metadata"]["labels"][FLAVOR_LABEL] = namespace
        node["spec"]["taints"] = [taint]
        kube.apply(node, field_manager="tests", force=True)
    objects = queue_objects(namespace, queue=QUEUE,
                            flavor=resource_flavor(namespace, {FLAVOR_LABEL: namespace},
                                                   [toleration]),
                            cpu=cpu, memory="64Gi")
    objects[1]["metadata"]["name"] = f"{namespace}-cq"
    objects[2]["spec"]["clusterQueue"] = f"{namespace}-cq"
    try:
        eventually(lambda: all([ready_and_untainted(kube, n) for n in names]),
                   message="flavor nodes Ready")
        for obj in objects:
            kube.apply(obj, field_manager="tests", force=True)
        yield {"nodes": names, "toleration": toleration, "queue": objects[1]}
    finally:
        for obj in reversed(objects):
            meta = obj["metadata"]
            kube.delete(obj["apiVersion"], obj["kind"], name=meta["name"],
                        namespace=meta.get("namespace"))
        for name in names:
            kube.delete("v1", "Node", name=name)


def set_quota(kube: Kube, queue: dict[str, Any], cpu: str) -> None:
    raised = copy.deepcopy(queue)
    for resource in raised["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == "cpu":
            resource["nominalQuota"] = cpu
    kube.apply(raised, field_manager="tests", force=True)


def queued(name: str, *, replicas: int = 1) -> dict[str, Any]:
    """A RayCluster in :data:`QUEUE`: 2 CPUs for the head, 1 per worker, no autoscaling."""
    rc = raycluster(name, groups=[worker_group("cpu", replicas=replicas, min_replicas=replicas,
                                               max_replicas=replicas)], autoscaling=False)
    rc["metadata"]["labels"] = {QUEUE_LABEL: QUEUE}
    return rc


def start(start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str,
          files: dict[str, Any], app: str = "queued") -> Controller:
    git_repo.commit(files)
    return start_controller({"applications": [
        application(app, git_repo.url, namespace, self_heal=True)]})


def refresh(ctl: Controller, git_repo: GitRepo) -> None:
    """One more comparison pass (the push webhook of the commit already there)."""
    sha = git_repo.commit({"README": f"pass {next(_PASSES)}"}, "a pass")
    assert ctl.webhook(push_payload(git_repo, sha)).ok
    eventually(lambda: ctl.status("queued").get("revision") == sha, TIMEOUT, "compared")


def refreshed(ctl: Controller, git_repo: GitRepo) -> dict[str, Any]:
    """The app's status after one more comparison pass.

    The controller compares on watch events of the RayCluster and on its interval; Kueue's
    Workload is not watched, so a test that waits for Kueue's word asks for a pass.
    """
    refresh(ctl, git_repo)
    return ctl.status("queued")


def _told(history: list[dict[str, Any]]) -> str:
    return "; ".join(f"{h.get('trigger')} {h.get('subject')!r}: " + ", ".join(
        f"{r.get('name')} {r.get('action')} {r.get('message')}" for r in h.get("resources") or [])
        for h in history)


def ours(live: dict[str, Any]) -> list[str]:
    """When gitops-ray last wrote the object (its managedFields entries' times)."""
    return sorted(str(e.get("time")) for e in live["metadata"].get("managedFields") or []
                  if e.get("manager") == FIELD_MANAGER)


def worker_pod_spec(live: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = live["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    return spec


def on_flavor_nodes(kube: Kube, namespace: str, cluster: str, nodes: list[str]) -> bool:
    found = [p for p in pods(kube, namespace, cluster) if not p["metadata"].get(
        "deletionTimestamp")]
    return bool(found) and all(p.get("spec", {}).get("nodeName") in nodes
                               and p.get("status", {}).get("phase") == "Running" for p in found)


def test_a_queued_raycluster_waits_then_is_admitted_with_no_write_of_ours(
        kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    with flavor(kube, namespace, cpu="0") as pool:
        ctl = start(start_controller, git_repo, namespace, {"manifests/rc.yaml": queued("rc")})
        eventually(lambda: (ctl.live("rc") or {}).get("spec", {}).get("suspend") is True,
                   TIMEOUT, "Kueue suspended it at creation")
        wait(lambda: "insufficient quota" in refreshed(ctl, git_repo).get("healthMessage", ""),
             lambda: ctl.status("queued"), TIMEOUT, "Suspended with Kueue's reason")
        status = ctl.status("queued")
        assert status["health"] == "Suspended"
        assert status["healthMessage"].startswith(
            f"waiting for admission in LocalQueue {QUEUE} (Workload raycluster-rc-")
        assert status["sync"] == "Synced"
        written = ours(ctl.live("rc") or {})

        set_quota(kube, pool["queue"], "8")  # room for it now: Kueue admits it
        wait(lambda: on_flavor_nodes(kube, namespace, "rc", pool["nodes"]),
             lambda: (ctl.live("rc") or {}).get("status"), TIMEOUT,
             "its Pods on the flavor's nodes")
        live = ctl.live("rc") or {}
        assert live["spec"]["suspend"] is False
        assert worker_pod_spec(live)["nodeSelector"] == {FLAVOR_LABEL: namespace}
        assert pool["toleration"] in worker_pod_spec(live)["tolerations"]
        for _ in range(3):  # comparison passes (self-heal on) see Kueue's fields as theirs
            refresh(ctl, git_repo)
            assert ctl.status("queued")["sync"] == "Synced"
        eventually(lambda: ctl.status("queued").get("health") == "Healthy", TIMEOUT, "Healthy")
        assert ours(ctl.live("rc") or {}) == written  # not one write of ours since creation
        assert len(ctl.status("queued").get("history") or []) == 1


def test_a_git_edit_while_admitted_lands_beside_kueues_fields(
        kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    with flavor(kube, namespace, cpu="8") as pool:
        rc = queued("rc")
        ctl = start(start_controller, git_repo, namespace, {"manifests/rc.yaml": rc})
        wait(lambda: on_flavor_nodes(kube, namespace, "rc", pool["nodes"]),
             lambda: (ctl.live("rc") or {}).get("status"), TIMEOUT, "admitted and running")
        edited = copy.deepcopy(rc)
        edited["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = \
            "rayproject/ray:2.53.0"
        sha = git_repo.commit({"manifests/rc.yaml": edited}, "new worker image")
        assert ctl.webhook(push_payload(git_repo, sha)).ok
        eventually(lambda: ctl.status("queued").get("revision") == sha, TIMEOUT, "synced")

        def landed() -> bool:
            live = ctl.live("rc") or {}
            spec = worker_pod_spec(live)
            return (spec["containers"][0]["image"] == "rayproject/ray:2.53.0"
                    and spec.get("nodeSelector") == {FLAVOR_LABEL: namespace}
                    and live["spec"].get("suspend") is False)

        # Kueue sees new containers, so a new Workload: it may suspend, restore and admit
        # the cluster again; either way it ends admitted with its fields and git's image.
        wait(landed, lambda: ctl.live("rc"), TIMEOUT, "git's image beside Kueue's fields")
        wait(lambda: on_flavor_nodes(kube, namespace, "rc", pool["nodes"]),
             lambda: (ctl.live("rc") or {}).get("status"), TIMEOUT, "running again")
        refresh(ctl, git_repo)
        assert ctl.status("queued")["sync"] == "Synced"
        history = ctl.status("queued").get("history") or []
        assert len(history) == 2, _told(history)  # the first sync and the edit: no loop


def test_quota_full_keeps_the_second_waiting_until_the_first_is_pruned(
        kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    with flavor(kube, namespace, cpu="4") as pool:  # room for one (3 CPUs), not two
        ctl = start(start_controller, git_repo, namespace,
                    {"manifests/first.yaml": queued("first")})
        wait(lambda: on_flavor_nodes(kube, namespace, "first", pool["nodes"]),
             lambda: (ctl.live("first") or {}).get("status"), TIMEOUT, "first running")
        sha = git_repo.commit({"manifests/second.yaml": queued("second")}, "second cluster")
        assert ctl.webhook(push_payload(git_repo, sha)).ok
        wait(lambda: "insufficient unused quota" in refreshed(ctl, git_repo).get(
                 "healthMessage", ""), lambda: ctl.status("queued"), TIMEOUT,
             "second waits for quota")
        assert ctl.status("queued")["health"] == "Suspended"
        assert (ctl.live("second") or {})["spec"]["suspend"] is True

        sha = git_repo.commit({"manifests/first.yaml": None}, "drop the first cluster")
        assert ctl.webhook(push_payload(git_repo, sha)).ok
        eventually(lambda: ctl.live("first") is None, TIMEOUT, "first pruned")
        wait(lambda: on_flavor_nodes(kube, namespace, "second", pool["nodes"]),
             lambda: (ctl.live("second") or {}).get("status"), TIMEOUT,
             "second admitted once the first is gone")
        eventually(lambda: ctl.status("queued").get("health") == "Healthy", TIMEOUT,
                   "Healthy")


def test_kueue_refuses_autoscaling_unless_the_cluster_is_elastic(
        kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    """The session's Kueue has ElasticJobsViaWorkloadSlices on (the ``kueue`` fixture);
    still, only a cluster annotated ``kueue.x-k8s.io/elastic-job: "true"`` may autoscale."""
    with flavor(kube, namespace, cpu="8"):
        rc = queued("scaled")
        rc["spec"]["enableInTreeAutoscaling"] = True
        ctl = start(start_controller, git_repo, namespace, {"manifests/rc.yaml": rc})
        failed = eventually(lambda: [op for op in ctl.status("queued").get("history") or []
                                     if op.get("phase") == "Failed"], TIMEOUT, "sync failed")
        said = str(failed[0].get("message"))
        assert "a kueue managed job can use autoscaling only when the " \
               "ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic " \
               "job" in said, said
        assert ctl.live("scaled") is None

        rc["metadata"]["annotations"] = {ELASTIC_ANNOTATION: "true"}
        sha = git_repo.commit({"manifests/rc.yaml": rc}, "elastic")
        assert ctl.webhook(push_payload(git_repo, sha)).ok
        eventually(lambda: ctl.live("scaled") is not None, TIMEOUT, "accepted when elastic")


@pytest.mark.parametrize("kind", ["RayJob"])
def test_a_rayjob_from_git_goes_through_kueue(
        kind: str, kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    """Queued, then admitted: the operator makes its RayCluster with the flavor's fields.

    Past that the operator needs a Ray head's dashboard to submit the job (kwok Pods run
    no containers), so the test stops where the operator has taken it.
    """
    with flavor(kube, namespace, cpu="0") as pool:
        spec = queued("job")["spec"]
        job = {"apiVersion": "ray.io/v1", "kind": kind,
               "metadata": {"name": "job", "labels": {QUEUE_LABEL: QUEUE}},
               "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": spec,
                        "shutdownAfterJobFinishes": True}}
        ctl = start(start_controller, git_repo, namespace, {"manifests/job.yaml": job})
        wait(lambda: "waiting for admission" in refreshed(ctl, git_repo).get(
                 "healthMessage", ""), lambda: ctl.status("queued"), TIMEOUT,
             "Suspended in the queue")
        assert ctl.status("queued")["health"] == "Suspended"
        set_quota(kube, pool["queue"], "8")

        def child() -> dict[str, Any] | None:
            items, _ = kube.list(RC_API, "RayCluster", namespace)
            return next(iter(items), None)

        made = eventually(child, TIMEOUT, "the operator made the job's RayCluster")
        selector = worker_pod_spec(made).get("nodeSelector")
        assert selector == {FLAVOR_LABEL: namespace}, selector
        live = kube.get("ray.io/v1", kind, name="job", namespace=namespace) or {}
        assert not live["spec"].get("suspend")  # a RayJob's is omitted when false
        refresh(ctl, git_repo)
        assert ctl.status("queued")["sync"] == "Synced"


def test_the_autoscaler_kueue_and_git_share_an_elastic_raycluster(
        kueue: LocalControlPlane, start_controller: Callable[..., Controller],
        git_repo: GitRepo, kube: Kube, namespace: str, tmp_path: Path) -> None:
    """Kueue's ElasticJobsViaWorkloadSlices gate is on (the ``kueue`` fixture) and the
    cluster is annotated elastic, so Kueue lets it autoscale: Ray's provider code scales
    one group while git edits the other's image; every writer's fields survive."""
    with flavor(kube, namespace, cpu="16") as pool:
        rc = queued("elastic")
        rc["metadata"]["annotations"] = {ELASTIC_ANNOTATION: "true"}
        rc["spec"]["enableInTreeAutoscaling"] = True
        rc["spec"]["workerGroupSpecs"] = [
            worker_group("autoscaled", replicas=1, max_replicas=3),
            worker_group("edited", replicas=1)]
        ctl = start(start_controller, git_repo, namespace, {"manifests/rc.yaml": rc})
        wait(lambda: on_flavor_nodes(kube, namespace, "elastic", pool["nodes"]),
             lambda: (ctl.live("elastic") or {}).get("status"), TIMEOUT, "admitted, running")
        autoscaler = Autoscaler(kueue, kube, namespace, "elastic", tmp_path)
        autoscaler.run("scale", "autoscaled", "2")

        edited = copy.deepcopy(rc)
        edited["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = \
            "rayproject/ray:2.53.0"
        sha = git_repo.commit({"manifests/rc.yaml": edited}, "new image for edited")
        assert ctl.webhook(push_payload(git_repo, sha)).ok

        def landed() -> bool:
            live = ctl.live("elastic") or {}
            groups = {g["groupName"]: g for g in live["spec"]["workerGroupSpecs"]}
            image = groups["edited"]["template"]["spec"]["containers"][0]["image"]
            return (image == "rayproject/ray:2.53.0" and groups["autoscaled"]["replicas"] == 2
                    and all(g["template"]["spec"].get("nodeSelector") == {
                        FLAVOR_LABEL: namespace} for g in groups.values()))

        wait(landed, lambda: ctl.live("elastic"), TIMEOUT,
             "git's image, the autoscaler's replicas and Kueue's nodeSelector together")
        refresh(ctl, git_repo)
        assert ctl.status("queued")["sync"] == "Synced"
        history = ctl.status("queued").get("history") or []
        assert len(history) == 2, _told(history)  # the first sync and the edit: no loop
