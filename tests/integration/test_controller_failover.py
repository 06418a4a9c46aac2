"""Two real controller processes: one leader writes, a follower forwards webhooks to it,
and a SIGKILLed leader is replaced within the lease duration by the follower, which
finishes the job. SIGTERM releases the lease."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gitops_ray.kube import Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from localcluster.controlplane import free_port
from tests.conftest import GitRepo
from tests.integration.test_controller import application
from tests.samples import raycluster
from tests.waiting import eventually

SECRET = "failover-s3cret"
PORT_ATTEMPTS = 3
LISTENERS = 3  # metrics, health and webhook: each logs http_listening


class Process:
    """``python -m gitops_ray run`` with its own ports and identity.

    Its ports are chosen before it starts (the webhook URL it advertises names one), so
    another process may take one in between: a start that fails on "Address already in
    use" is tried again with new ports (a busy machine did that once).
    """

    def __init__(self, identity: str, config: Path, workdir: Path) -> None:
        self.identity = identity
        self.log = workdir / f"{identity}.log"
        for _ in range(PORT_ATTEMPTS):
            self._spawn(config, workdir)
            eventually(lambda: self.proc.poll() is not None or self._listening(),
                       timeout=120, message=f"{identity} listening or exited")
            if self.proc.poll() is None or "Address already in use" not in self._output():
                return

    def _output(self) -> str:
        return self.log.read_text(errors="replace")

    def _listening(self) -> bool:
        return self._output().count('"http_listening"') >= LISTENERS

    def _spawn(self, config: Path, workdir: Path) -> None:
        identity = self.identity
        self.metrics_port, self.health_port, self.webhook_port = (free_port() for _ in "abc")
        webhook_url = f"http://127.0.0.1:{self.webhook_port}/webhook"
        args = [sys.executable, "-m", "gitops_ray", "run", f"--config={config}",
                f"--leader-election-identity={identity}",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-addr=127.0.0.1:{self.health_port}",
                f"--webhook-addr=127.0.0.1:{self.webhook_port}",
                f"--webhook-advertise-url={webhook_url}",
                f"--cache-dir={workdir / identity}", "--log-format=json"]
        env = {**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": SECRET}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)

    def metrics(self) -> str:
        return requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text

    def ready(self) -> bool:
        with contextlib.suppress(requests.RequestException):
            url = f"http://127.0.0.1:{self.health_port}/readyz"
            return requests.get(url, timeout=5).ok
        return False

    def webhook(self, repo: GitRepo, sha: str) -> requests.Response:
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"clone_url": repo.url,
                                          "default_branch": "main"}}).encode()
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        return requests.post(f"http://127.0.0.1:{self.webhook_port}/webhook", data=body,
                             timeout=10, headers={"X-GitHub-Event": "push",
                                                  "X-Hub-Signature-256": f"sha256={digest}"})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[[str, Path], Process]]:
    started: list[Process] = []

    def start(identity: str, config: Path) -> Process:
        started.append(Process(identity, config, tmp_path))
        return started[-1]

    yield start
    for p in started:
        p.stop()
        print(f"--- {p.identity} log (tail) ---\n" + p.log.read_text()[-4000:])


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
        tmp_path: Path, helm_bin: Path, processes: Callable[[str, Path], Process]) -> None:
    rc = raycluster("ha")
    git_repo.commit({"manifests/rc.yaml": rc})
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({
        "kubeconfig": str(control_plane.kubeconfig), "controlNamespace": namespace,
        "helm": str(helm_bin), "interval": "2s", "jitter": "0", "debounce": "100ms",
        "applications": [application("ha", git_repo.url, namespace)],
        "leaderElection": {"enabled": True, "leaseDuration": "3s", "renewDeadline": "2s",
                           "retryPeriod": "500ms"}}))

    first = processes("ctl-a", config)
    eventually(lambda: lease_holder(kube, namespace) == "ctl-a", message="a leads")
    second = processes("ctl-b", config)
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


def _metrics_with(process: Process, line: str) -> str:
    metrics = process.metrics()
    return metrics if line in metrics else ""


def _revision(kube: Kube, namespace: str) -> str:
    op = RecordStore(kube, namespace).load("ha").status.get("operation") or {}
    return str(op.get("revision", ""))


def _version(rc: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(rc)
    out["spec"]["rayVersion"] = version
    return out
