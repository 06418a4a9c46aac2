"""A RayJob and a RayService from git, as far as the real KubeRay operator takes them on kwok.

Both kinds hand most of their life to the Ray head: the operator (v1.6.2) creates the
child RayCluster itself, but then asks the head's dashboard (port 8265) for the Ray job's
status or to deploy and watch the Serve applications. kwok Pods run no containers, so
that dashboard never answers and each kind stops at a known place:

* RayJob (``K8sJobMode``, the default): ``Initializing`` while its cluster's Pods are not
  all running, then ``Running`` with no ``jobStatus`` for good. The operator has created
  the submitter ``Job`` (nothing runs it: this stack has no Job controller, and its Pod
  would need a head anyway) and retries ``GetJobInfo`` against the dashboard, logging
  "Failed to get job info". The one later state reachable without a head is the
  operator's own ``activeDeadlineSeconds`` check: ``Failed`` / ``DeadlineExceeded``.
* RayService: ``Ready=False`` (``Initializing``) with its pending cluster, and so for good
  once that cluster is up: the next step reads the Serve applications' statuses from the
  dashboard (before it would deploy ``serveConfigV2`` there), fails with "failed to get
  Serve application statuses from the dashboard" and the operator writes no new status
  (not even the pending cluster's ``rayClusterStatus``). The one later state reachable
  without a head is the ``ray.io/initializing-timeout`` annotation: ``Ready=False`` /
  ``InitializingTimeout``, and only while the head is not ready (with a ready head the
  failing Serve step returns before the operator gets to the timeout check).

Healthy (the Ray job SUCCEEDED, Serve endpoints up) needs a real head and is covered only
by fixtures. At each state reached here, gitops-ray's verdict and message are checked
against the operator's own status, and the stop is proven by waiting for the operator to
have tried the dashboard (its log), never by sleeping.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.e2e.raycluster import POOL_LABEL, conditions, node_pool, pods, wait
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, application
from tests.samples import pod_template, worker_group

APP = "ray"
TIMEOUT = 120.0
RUNNING = "RayJob is Running, Ray job status not reported yet"
"""What gitops-ray says of ``Running`` without a ``jobStatus`` (not "the Ray job runs")."""


def cluster_spec(pool: str | None = None, *, head_waits: bool = False) -> dict[str, Any]:
    """A small RayClusterSpec; with ``pool`` its worker (and head) waits for that node pool."""
    worker = worker_group("cpu", replicas=1)
    head = pod_template(cpu="1", name="ray-head")
    if pool is not None:
        for template in [worker["template"]] + ([head] if head_waits else []):
            template["spec"]["nodeSelector"] = {POOL_LABEL: pool}
    return {"rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {}, "template": head},
            "workerGroupSpecs": [worker]}


def rayjob(name: str, pool: str | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": RC_API, "kind": "RayJob", "metadata": {"name": name},
            "spec": {"entrypoint": "python -c 'import ray; ray.init()'",
                     "rayClusterSpec": cluster_spec(pool), **spec}}


def rayservice(name: str, pool: str | None = None, *, head_waits: bool = False,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": RC_API, "kind": "RayService", "metadata": meta,
            "spec": {"serveConfigV2": "applications:\n- name: echo\n  import_path: echo:app\n",
                     "rayClusterConfig": cluster_spec(pool, head_waits=head_waits)}}


def start(start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str,
          obj: dict[str, Any]) -> Controller:
    git_repo.commit({f"manifests/{obj['kind'].lower()}.yaml": obj})
    return start_controller({"applications": [application(APP, git_repo.url, namespace)]})


def health(ctl: Controller) -> tuple[str, str]:
    status = ctl.status(APP)
    return str(status.get("health", "")), str(status.get("healthMessage", ""))


def live(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return dict((kube.get(RC_API, kind, name=name, namespace=namespace) or {}).get("status")
                or {})


def child_ready(kube: Kube, namespace: str, cluster: str) -> bool:
    """What the operator says of a child RayCluster: provisioned and head ready."""
    status = live(kube, namespace, "RayCluster", cluster) if cluster else {}
    return (conditions(status).get("RayClusterProvisioned") == "True"
            and conditions(status).get("HeadPodReady") == "True")


def worker_unscheduled(kube: Kube, namespace: str, cluster: str) -> bool:
    """The cluster has a worker Pod, and none of its workers is bound to a node."""
    workers = [p for p in pods(kube, namespace, cluster)
               if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"]
    return bool(workers) and not any(p["spec"].get("nodeName") for p in workers)


def record(kube: Kube, namespace: str, kind: str, name: str, label: str) -> None:
    """Save the live object as ``$GITOPS_RAY_RECORD/<kind>-<label>.yaml`` when that is set.

    How the ``kuberay-1.6.1-*`` fixtures in ``tests/testdata/health/ray.io`` were taken.
    """
    target = os.environ.get("GITOPS_RAY_RECORD")
    if target:
        obj = kube.get(RC_API, kind, name=name, namespace=namespace)
        path = Path(target) / f"{kind}-{label}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))


def operator_logged(cp: LocalControlPlane, *parts: str) -> bool:
    """Whether one line of the operator's log holds all ``parts``."""
    log = (cp.workdir / "kuberay-operator.log").read_text(errors="replace")
    return any(all(p in line for p in parts) for line in log.splitlines())


def test_rayjob_runs_until_the_operator_needs_the_dashboard(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, control_plane: LocalControlPlane) -> None:
    ctl = start(start_controller, git_repo, namespace, rayjob("train", pool=namespace))

    def job() -> dict[str, Any]:
        return live(kube, namespace, "RayJob", "train")

    # 1. The operator created the cluster; its worker has no node yet, so the job waits.
    wait(lambda: health(ctl) == ("Progressing", "RayJob is Initializing"),
         lambda: (health(ctl), job()), TIMEOUT, "Progressing while Initializing")
    assert job()["jobDeploymentStatus"] == "Initializing"
    cluster = str(job().get("rayClusterName", ""))
    # The worker is what has no node. (Not "the child is not ready": KubeRay can set the
    # sticky RayClusterProvisioned from an informer cache that has not seen the worker pod
    # yet, which a loaded machine showed once.)
    eventually(lambda: worker_unscheduled(kube, namespace, cluster), TIMEOUT,
               "the child's worker Pod created and waiting for a node")
    assert "jobStatus" not in job()
    record(kube, namespace, "RayJob", "train", "initializing")

    with node_pool(kube, namespace):
        # 2. Cluster up: the operator moves to Running and asks the dashboard for the job.
        wait(lambda: child_ready(kube, namespace, cluster) and job().get("jobId") and
             operator_logged(control_plane, "Failed to get job info", str(job()["jobId"])),
             lambda: (health(ctl), job()), TIMEOUT, "operator asked the dashboard")
        # Where it stops: no dashboard answers, so no jobStatus ever; Running is the
        # operator's word for "cluster up, submitter created", not "the Ray job runs".
        assert job()["jobDeploymentStatus"] == "Running"
        assert "jobStatus" not in job() and not job().get("rayJobInfo")
        record(kube, namespace, "RayJob", "train", "running-no-job-status")
        eventually(lambda: health(ctl) == ("Progressing", RUNNING), TIMEOUT,
                   "Progressing while Running")
        assert kube.get("batch/v1", "Job", name="train", namespace=namespace), "submitter"


def test_rayjob_past_its_deadline_is_degraded_with_the_operators_reason(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    # A deadline is checked by the operator itself, no dashboard needed. The worker never
    # gets a node, so the job is still Initializing when the deadline passes.
    ctl = start(start_controller, git_repo, namespace,
                rayjob("late", pool=namespace, activeDeadlineSeconds=3))

    def job() -> dict[str, Any]:
        return live(kube, namespace, "RayJob", "late")

    wait(lambda: health(ctl)[0] == "Degraded", lambda: (health(ctl), job()), TIMEOUT,
         "Degraded after the deadline")
    assert job()["jobDeploymentStatus"] == "Failed"
    assert job()["reason"] == "DeadlineExceeded"
    record(kube, namespace, "RayJob", "late", "deadline-exceeded")
    assert health(ctl)[1] == f"RayJob is Failed: {job()['message']}"
    assert health(ctl)[1].startswith("RayJob is Failed: The RayJob has passed the "
                                     "activeDeadlineSeconds. StartTime: ")
    assert health(ctl)[1].endswith("ActiveDeadlineSeconds: 3")


def test_rayservice_initializes_until_the_operator_needs_the_dashboard(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, control_plane: LocalControlPlane) -> None:
    ctl = start(start_controller, git_repo, namespace, rayservice("serve", pool=namespace))
    initializing = ("Progressing",
                    "Waiting for the RayService to be ready: Initializing: "
                    "RayService is initializing")

    def service() -> dict[str, Any]:
        return live(kube, namespace, "RayService", "serve")

    def pending_cluster() -> str:
        return str(service().get("pendingServiceStatus", {}).get("rayClusterName", ""))

    # 1. Pending cluster created, its worker without a node: Initializing.
    wait(lambda: health(ctl) == initializing and pending_cluster(),
         lambda: (health(ctl), service()), TIMEOUT, "Progressing while Initializing")
    ready = conditions(service())
    assert ready.get("Ready") == "False"
    assert not child_ready(kube, namespace, pending_cluster())
    record(kube, namespace, "RayService", "serve", "initializing")

    with node_pool(kube, namespace):
        # 2. The cluster is up and the operator turns to Serve, which needs the dashboard.
        cluster = pending_cluster()
        wait(lambda: child_ready(kube, namespace, cluster) and operator_logged(
            control_plane, "failed to get Serve application statuses from the dashboard",
            namespace),
             lambda: (health(ctl), service()), TIMEOUT, "operator asked the dashboard")
        # Where it stops: no Serve status ever comes back, so the operator keeps Ready
        # False/Initializing (and no active cluster, no endpoints): still Progressing.
        status = service()
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]
                if c["type"] == "Ready"] == [("Ready", "False", "Initializing")]
        assert not status.get("numServeEndpoints")
        assert not status.get("activeServiceStatus", {}).get("rayClusterName")
        assert health(ctl) == initializing
        record(kube, namespace, "RayService", "serve", "initializing-cluster-ready")


def test_rayservice_past_its_initializing_timeout_is_degraded(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    # The operator checks the timeout only when it computes a new status, which it never
    # does once the head is ready (the Serve step fails first, see above): so the head
    # here never gets a node, and the operator skips Serve for as long as it waits.
    ctl = start(start_controller, git_repo, namespace,
                rayservice("slow", pool=namespace, head_waits=True,
                           annotations={"ray.io/initializing-timeout": "3s"}))

    def service() -> dict[str, Any]:
        return live(kube, namespace, "RayService", "slow")

    wait(lambda: health(ctl)[0] == "Degraded", lambda: (health(ctl), service()), TIMEOUT,
         "Degraded after the initializing timeout")
    ready = next(c for c in service()["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InitializingTimeout")
    record(kube, namespace, "RayService", "slow", "initializing-timeout")
    assert health(ctl)[1] == f"RayService is not serving: InitializingTimeout: {ready['message']}"
    assert ready["message"].startswith("RayService failed to become ready within the "
                                       "configured timeout of 3s.")

