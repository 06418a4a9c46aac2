"""The opt-in Ray stack: Pods that run, and a real KubeRay operator acting on RayClusters.

The plain control plane has no scheduler and no kubelet, so a RayCluster never becomes
ready and nothing in a test can say whether gitops-ray's health matches the operator's.
This adds, on the same API server:

* **kube-scheduler** (upstream, ``hack/controlplane``) binding Pods to nodes;
* **kwok** (``hack/kwok``) keeping a few fake Nodes Ready and moving Pods bound to them to
  Running and Ready (no containers run: "running pods" are as real as the API says);
* fake Nodes whose capacities match the instance types in ``examples/shapes`` (CPU nodes,
  a T4 node selected by ``node.kubernetes.io/instance-type`` and a tainted 4xA10G node);
* the **KubeRay operator** (``hack/kuberay``), out of cluster, without leader election;
  :func:`enable_raycronjobs` restarts it with its alpha RayCronJob controller (and CRD).

The API server's admission gives every new Node the ``node.kubernetes.io/not-ready``
taint and only the node-lifecycle controller would take it off; we remove it ourselves
once kwok has reported the Node Ready, which is the same decision that controller makes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from gitops_ray.kube import Kube
from gitops_ray.kube.errors import Conflict, Invalid
from gitops_ray.types import Manifest
from localcluster.build import ensure_ray_stack

if TYPE_CHECKING:
    from localcluster.controlplane import LocalControlPlane

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
FIELD_MANAGER = "gitops-ray-localcluster"
GPU = "nvidia.com/gpu"
OPERATOR = "kuberay-operator"  # the operator's process name in LocalControlPlane.processes


def fake_node(name: str, instance_type: str, cpu: int, memory: str, *, gpus: int = 0,
              accelerator: str = "", gpu_taint: bool = True) -> Manifest:
    """A Node kwok manages (by annotation), sized like one cloud instance type."""
    capacity: dict[str, str] = {"cpu": str(cpu), "memory": memory, "pods": "110"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "node.kubernetes.io/instance-type": instance_type, "type": "kwok"}
    spec: dict[str, Any] = {}
    if gpus:
        capacity[GPU] = str(gpus)
        labels["gitops-ray.io/accelerator-type"] = accelerator
        if gpu_taint:
            spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {FAKE_NODE_ANNOTATION: "fake"}},
            "spec": spec,
            "status": {"capacity": capacity, "allocatable": capacity}}


FAKE_NODES: tuple[Manifest, ...] = (
    # 2CPU-8GB, 4CPU-16GB and 8CPU-32GB pods (several per node)
    fake_node("kwok-cpu-0", "m5.4xlarge", 16, "64Gi"),
    fake_node("kwok-cpu-1", "m5.4xlarge", 16, "64Gi"),
    # 8CPU-32GB-1xT4 selects this instance type; no taint, as on the shapes' example
    fake_node("kwok-t4-0", "g4dn.2xlarge", 8, "32Gi", gpus=1, accelerator="T4", gpu_taint=False),
    # 48CPU-192GB-4xA10G tolerates nvidia.com/gpu
    fake_node("kwok-a10g-0", "g5.12xlarge", 48, "192Gi", gpus=4, accelerator="A10G"),
)


def start_ray_stack(cp: LocalControlPlane, *, timeout: float = 120.0) -> None:
    """Start scheduler, kwok and operator on ``cp``; return once nodes and operator are ready."""
    tools = ensure_ray_stack()
    kube = Kube.connect(str(cp.kubeconfig))
    kubeconfig = f"--kubeconfig={cp.kubeconfig}"
    cp.spawn("kube-scheduler", [str(tools.scheduler), kubeconfig, "--leader-elect=false",
                                "--secure-port=0", "--v=0"])
    cp.spawn("kwok", [
        str(tools.kwok), kubeconfig, "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
        "--cidr=10.0.1.0/24", "--node-ip=10.0.1.1", "--server-address=",
        "--node-lease-duration-seconds=40"])
    for node in FAKE_NODES:
        kube.apply(node, field_manager=FIELD_MANAGER, force=True)
    deadline = time.monotonic() + timeout
    health = _start_operator(cp, str(tools.operator))
    names = [str(node["metadata"]["name"]) for node in FAKE_NODES]
    cp.wait_for("kwok", lambda: all([ready_and_untainted(kube, n) for n in names]), deadline,
                "fake nodes Ready and untainted")
    cp.wait_for(OPERATOR, lambda: cp.http_ok(f"http://127.0.0.1:{health}/readyz"), deadline,
                "operator /readyz")


def _start_operator(cp: LocalControlPlane, binary: str, *, gates: str = "") -> int:
    """Spawn the KubeRay operator (``gates``: its ``--feature-gates``); its health port."""
    health = cp.free_port()
    cp.spawn(OPERATOR, [
        binary, "--enable-leader-election=false", "--metrics-addr=0",
        f"--health-probe-bind-address=127.0.0.1:{health}", "--log-stdout-encoder=console",
        *([f"--feature-gates={gates}"] if gates else [])],
        env={"KUBECONFIG": str(cp.kubeconfig)})
    return health


def enable_raycronjobs(cp: LocalControlPlane, *, timeout: float = 120.0) -> None:
    """Install the RayCronJob CRD and restart the operator with its alpha controller on.

    Opt-in, like Kueue: the operator's ``RayCronJob`` feature gate is off by default, and
    with it on the operator will not start without the CRD. The other control planes,
    and a Ray stack that does not ask for it, keep the three CRDs KubeRay has always had.
    """
    from localcluster.crds import install_crds, ray_crds

    install_crds(cp.kubeconfig, [c for c in ray_crds(cron=True)
                                 if c["spec"]["names"]["kind"] == "RayCronJob"],
                 timeout=timeout)
    old = cp.processes.pop(OPERATOR)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(old.pid, signal.SIGTERM)
    old.wait(timeout)
    health = _start_operator(cp, str(ensure_ray_stack().operator), gates="RayCronJob=true")
    cp.wait_for(OPERATOR, lambda: cp.http_ok(f"http://127.0.0.1:{health}/readyz"),
                time.monotonic() + timeout, "operator /readyz (RayCronJob controller on)")


def ready_and_untainted(kube: Kube, name: str) -> bool:
    """Whether the Node is Ready, taking the not-ready taint off once it is."""
    node = kube.get("v1", "Node", name=name) or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    taints = (node.get("spec") or {}).get("taints") or []
    if not ready:
        return False
    if not any(t.get("key") == NOT_READY_TAINT for t in taints):
        return True
    keep = [t for t in taints if t.get("key") != NOT_READY_TAINT]
    with contextlib.suppress(Conflict, Invalid):  # changed meanwhile: decide again
        kube.patch("v1", "Node", name=name, namespace=None, patch=[
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": node["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/spec/taints", "value": keep}])
    return False  # confirmed on the next poll
