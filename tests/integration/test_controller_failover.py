"""Two real controller processes: one leader writes, a follower forwards webhooks to it,
and a SIGKILLed leader is replaced within the lease duration by the follower, which
finishes the job. SIGTERM releases the lease."""

from __future__ import annotations

import copy
import signal
import time
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.kube import Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController
from tests.harness.runtime import application
from tests.harness.settings import FAST_LEASE, controller_settings
from tests.samples import raycluster


def lease_holder(kube: Kube, namespace: str) -> str:
    lease = kube.get(LEASE_API, "Lease", name="gitops-ray", namespace=namespace) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def rc_version(kube: Kube, namespace: str) -> str:
    live = kube.get("ray.io/v1", "RayCluster", name="ha", namespace=namespace) or {"spec": {}}
    return str(live["spec"].get("rayVersion", ""))


def last_sync_by(kube: Kube, namespace: str) -> str:
    op = RecordStore(kube, namespace).load("ha").status.get("operation") or {}
    return str(op.get("controller", ""))


def test_one_leader_writes_and_a_killed_leader_is_replaced(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, helm_bin: Path, controller_process: StartController) -> None:
    rc = raycluster("ha")
    git_repo.commit({"manifests/rc.yaml": rc})
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(controller_settings(
        control_plane.kubeconfig, namespace, interval="2s", helm=str(helm_bin),
        applications=[application("ha", git_repo.url, namespace)],
        leaderElection=FAST_LEASE)))

    first = controller_process("ctl-a", config)
    eventually(lambda: lease_holder(kube, namespace) == "ctl-a", message="a leads")
    second = controller_process("ctl-b", config)
    eventually(second.ready, message="b ready")
    eventually(lambda: rc_version(kube, namespace) == "2.52.0", message="first sync")
    eventually(lambda: last_sync_by(kube, namespace) == "ctl-a", message="recorded by a")

    # A webhook that reaches the follower is forwarded to the leader, which applies it.
    sha = git_repo.commit({"manifests/rc.yaml": _version(rc, "2.53.0")})
    response = second.webhook(git_repo, sha)
    assert response.status_code == 202 and response.json()["forwardedTo"] == "ctl-a"
    eventually(lambda: rc_version(kube, namespace) == "2.53.0", message="forwarded")
    # The operation is recorded first and stamped with the controller's identity after.
    eventually(lambda: (_revision(kube, namespace), last_sync_by(kube, namespace))
               == (sha, "ctl-a"), message="recorded by a")
    follower_metrics = eventually(lambda: _metrics_with(second, 'gitops_ray_app_info{app="ha"'),
                                  message="the follower compares")
    assert "gitops_ray_leader 0.0" in follower_metrics
    assert "gitops_ray_sync_total{" not in follower_metrics  # the follower never synced

    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(30)
    killed_at = time.monotonic()
    git_repo.commit({"manifests/rc.yaml": _version(rc, "2.54.0")})
    eventually(lambda: lease_holder(kube, namespace) == "ctl-b", message="b takes over")
    takeover = time.monotonic() - killed_at
    eventually(lambda: rc_version(kube, namespace) == "2.54.0", message="b finishes the job")
    eventually(lambda: last_sync_by(kube, namespace) == "ctl-b", message="recorded by b")
    print(f"takeover after {takeover:.1f}s (lease duration 3s, retry 0.5s)")

    second.proc.send_signal(signal.SIGTERM)
    assert second.proc.wait(60) == 0
    assert lease_holder(kube, namespace) == ""  # released on SIGTERM


def _metrics_with(process: ControllerProcess, line: str) -> str:
    metrics = process.metrics()
    return metrics if line in metrics else ""


def _revision(kube: Kube, namespace: str) -> str:
    op = RecordStore(kube, namespace).load("ha").status.get("operation") or {}
    return str(op.get("revision", ""))


def _version(rc: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(rc)
    out["spec"]["rayVersion"] = version
    return out
