"""The harness is a real Kubernetes API server with KubeRay's CRD semantics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from gitops_ray.kube import Conflict, Kube
from localcluster import LocalControlPlane
from localcluster.seed import ensure_seed
from tests.samples import raycluster, worker_group


def test_version_is_real(kube: Kube) -> None:
    version = kube.call("GET", "/version")
    assert version["gitVersion"] == "v1.36.3"
    assert version["major"] == "1" and version["minor"] == "36"


def test_crd_defaults_and_pruning(kube: Kube, namespace: str) -> None:
    rc = raycluster("defaults", namespace, groups=[worker_group("cpu", replicas=None)])
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["bogusField"] = 1
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["notAPodField"] = "x"
    live = kube.create(rc, field_manager="tests")
    group = live["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
    assert group["numOfHosts"] == 1
    container = group["template"]["spec"]["containers"][0]
    assert "bogusField" not in container
    assert "notAPodField" not in group["template"]["spec"]
    assert container["ports"][0]["protocol"] == "TCP"


def _managers(obj: dict) -> dict[str, str]:
    return {m["manager"]: m["operation"] for m in obj["metadata"]["managedFields"]}


def _autoscaler_patch(cp: LocalControlPlane, namespace: str, name: str, ops: list) -> dict:
    """Patch exactly like the Ray autoscaler: python-requests, JSON Patch by list index."""
    url = f"{cp.url}/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{name}"
    resp = requests.patch(url, json=ops, timeout=10, verify=str(cp.workdir / "ca.crt"),
                          headers={"Authorization": f"Bearer {cp.token}",
                                   "Content-Type": "application/json-patch+json"})
    resp.raise_for_status()
    return dict(resp.json())


def test_ssa_managed_fields_and_autoscaler_ownership(
        kube: Kube, control_plane: LocalControlPlane, namespace: str) -> None:
    live = kube.apply(raycluster("owned", namespace), field_manager="gitops-ray")
    assert _managers(live) == {"gitops-ray": "Apply"}
    patched = _autoscaler_patch(control_plane, namespace, "owned", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}])
    managers = _managers(patched)
    assert managers["python-requests"] == "Update"
    # workerGroupSpecs is atomic: the autoscaler's patch takes the whole list from us.
    ours = next(m for m in patched["metadata"]["managedFields"] if m["manager"] == "gitops-ray")
    assert "f:workerGroupSpecs" not in ours["fieldsV1"]["f:spec"]
    assert patched["spec"]["workerGroupSpecs"][0]["replicas"] == 4


def test_stale_resource_version_conflicts(kube: Kube, namespace: str) -> None:
    live = kube.apply(raycluster("stale", namespace), field_manager="gitops-ray")
    kube.patch("ray.io/v1", "RayCluster", name="stale", namespace=namespace,
               patch=[{"op": "replace", "path": "/spec/rayVersion", "value": "2.53.0"}])
    live["spec"]["rayVersion"] = "2.54.0"
    with pytest.raises(Conflict):
        kube.replace(live, field_manager="tests")


def test_status_subresource_keeps_generation(kube: Kube, namespace: str) -> None:
    live = kube.apply(raycluster("status", namespace), field_manager="gitops-ray")
    generation = live["metadata"]["generation"]
    live["status"] = {"state": "ready", "observedGeneration": generation}
    updated = kube.replace(live, field_manager="kuberay-operator", subresource="status")
    assert updated["status"]["state"] == "ready"
    assert updated["metadata"]["generation"] == generation
    # ... and a spec write through the main resource cannot touch status.
    spec_write = kube.apply(raycluster("status", namespace), field_manager="gitops-ray")
    assert spec_write["status"]["state"] == "ready"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _wait_dead(pids: list[int], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def test_failing_test_leaves_no_processes(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(f"""
        from localcluster import LocalControlPlane

        def test_fails():
            with LocalControlPlane() as cp:
                open({str(pid_file)!r}, "w").write(" ".join(map(str, cp.pids)))
                assert False, "deliberate failure"
    """))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path / "test_inner.py")], capture_output=True, text=True,
                            cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stdout
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 3
    assert _wait_dead(pids) == []


def test_killed_parent_leaves_no_processes(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = textwrap.dedent(f"""
        import time
        from localcluster import LocalControlPlane
        cp = LocalControlPlane()
        cp.start()
        open({str(pid_file)!r}, "w").write(" ".join(map(str, cp.pids)))
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = [int(p) for p in pid_file.read_text().split()]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait_dead(pids) == []


def test_a_seeded_plane_keeps_its_writes_to_itself(kube: Kube) -> None:
    """Planes start from copies of one seed (localcluster.seed): a write lands in one only."""
    seed = ensure_seed()
    before = _files(seed)
    with LocalControlPlane() as cp:
        other = Kube.connect(str(cp.kubeconfig))
        crd = other.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                        name="rayclusters.ray.io")
        assert crd is not None
        name = f"only-here-{time.time_ns()}"
        other.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name, "namespace": "default"}},
                    field_manager="tests", force=True)
        assert other.get("v1", "ConfigMap", name=name, namespace="default") is not None
    assert kube.get("v1", "ConfigMap", name=name, namespace="default") is None
    assert _files(seed) == before


def _files(root: Path) -> list[tuple[Path, int, int]]:
    """Each file under ``root`` with its size and mtime: what a write would change."""
    return sorted((p.relative_to(root), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())
