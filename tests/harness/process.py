"""The real controller as a separate process, optionally run as a ServiceAccount.

Why a process and not an in-process :class:`Runtime`: some faults (memory blow-ups,
SIGSTOP/SIGKILL, a stale leader, what shows in ``ps``) and every failover between
replicas only exist for real processes. Each :class:`ControllerProcess` gets its own
ports, cache directory, log file (JSON lines) and, optionally, a kubeconfig holding a
ServiceAccount's token (:func:`service_account_kubeconfig`), so a test can run the
controller with exactly the RBAC the chart renders.

Its ports are chosen before it starts (the webhook URL it advertises names one), so
another process may take one in between: a start that fails on "Address already in use"
is tried again with new ports (a busy machine did that once). Waits are on conditions
(:func:`tests.harness.eventually`), never sleeps; memory is read from
``/proc/<pid>/status`` (``VmRSS`` now, ``VmHWM`` the peak).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.controlplane import free_port
from tests.harness.git import GitRepo
from tests.harness.waiting import eventually

SECRET = "faults-s3cret"
PORT_ATTEMPTS = 3
LISTENERS = 3  # metrics, health and webhook: each logs http_listening


def proc_status_kib(pid: int, field: str) -> int:
    """``VmRSS``/``VmHWM`` (KiB) of a live process from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class ControllerProcess:
    """``python -m gitops_ray run --config=...`` with its own ports, identity and log.

    ``settings`` is a settings document (written to ``<workdir>/<identity>.yaml``) or the
    path of one (replicas of one deployment share it). It returns once the process
    listens or has exited.
    """

    def __init__(self, identity: str, settings: dict[str, Any] | Path, workdir: Path, *,
                 env: dict[str, str] | None = None, args: tuple[str, ...] = (),
                 secret: str = SECRET) -> None:
        self.identity, self.secret = identity, secret
        if isinstance(settings, Path):
            self.config = settings
        else:
            self.config = workdir / f"{identity}.yaml"
            self.config.write_text(yaml.safe_dump(settings))
        self.log = workdir / f"{identity}.log"
        for _ in range(PORT_ATTEMPTS):
            self._spawn(workdir, env or {}, args)
            eventually(lambda: not self.alive() or self._listening(),
                       timeout=120, message=f"{identity} listening or exited")
            if self.alive() or "Address already in use" not in self.text():
                return

    def _spawn(self, workdir: Path, env: dict[str, str], args: tuple[str, ...]) -> None:
        self.metrics_port, self.health_port, self.webhook_port = (free_port() for _ in "abc")
        self.webhook_url = f"http://127.0.0.1:{self.webhook_port}/webhook"
        argv = [sys.executable, "-m", "gitops_ray", "run", f"--config={self.config}",
                f"--leader-election-identity={self.identity}",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-addr=127.0.0.1:{self.health_port}",
                f"--webhook-addr=127.0.0.1:{self.webhook_port}",
                f"--webhook-advertise-url={self.webhook_url}",
                f"--cache-dir={workdir / self.identity / 'repos'}", "--log-format=json", *args]
        full_env = {**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": self.secret, **env}
        full_env.pop("KUBECONFIG", None)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         env=full_env)

    def _listening(self) -> bool:
        return self.text().count('"http_listening"') >= LISTENERS

    # -- observing -------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mib(self) -> float:
        return proc_status_kib(self.pid, "VmRSS") / 1024

    def peak_rss_mib(self) -> float:
        return proc_status_kib(self.pid, "VmHWM") / 1024

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines so far (other lines, e.g. a traceback, are kept as text)."""
        out: list[dict[str, Any]] = []
        for line in self.text().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                doc = {"event": "(not json)", "text": line}
            out.append(doc if isinstance(doc, dict) else {"event": "(not json)", "text": line})
        return out

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("event") == name]

    def readyz(self) -> int:
        """The HTTP status of ``/readyz`` (0 when it does not answer)."""
        with contextlib.suppress(requests.RequestException):
            url = f"http://127.0.0.1:{self.health_port}/readyz"
            return requests.get(url, timeout=5).status_code
        return 0

    def ready(self) -> bool:
        return self.readyz() == 200

    def metrics(self) -> str:
        return requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text

    # -- acting ----------------------------------------------------------------------

    def webhook(self, repo: GitRepo, sha: str) -> requests.Response:
        """A GitHub push of ``sha`` to ``repo``'s main, signed with the process's secret."""
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"clone_url": repo.url,
                                          "default_branch": "main"}}).encode()
        digest = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        return requests.post(self.webhook_url, data=body, timeout=10,
                             headers={"X-GitHub-Event": "push",
                                      "X-Hub-Signature-256": f"sha256={digest}"})

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def terminate(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)


StartController = Callable[..., ControllerProcess]


class ControllerProcesses:
    """``start(identity, settings, env=..., args=...)``; ``stop()`` kills every one started
    and prints the tail of its log (shown when the test failed)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[ControllerProcess] = []

    def __call__(self, identity: str, settings: dict[str, Any] | Path,
                 **kwargs: Any) -> ControllerProcess:
        self.started.append(ControllerProcess(identity, settings, self.workdir, **kwargs))
        return self.started[-1]

    def stop(self) -> None:
        for p in self.started:
            p.stop()
            print(f"--- {p.identity} log (tail) ---\n" + p.text()[-6000:])


def service_account_kubeconfig(kube: Kube, control_plane: LocalControlPlane, *,
                               namespace: str, name: str, path: Path,
                               seconds: int = 3600) -> Path:
    """A kubeconfig that authenticates with a fresh token of ServiceAccount ``name``."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": seconds}}
    path_ = kube.resource("v1", "ServiceAccount").path(namespace, name, "token")
    token = kube.call("POST", path_, body=request, content_type="application/json")
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
           "clusters": [{"name": "local", "cluster": {
               "server": control_plane.url,
               "certificate-authority": str(control_plane.workdir / "ca.crt")}}],
           "users": [{"name": name, "user": {"token": token["status"]["token"]}}],
           "contexts": [{"name": "sa", "context": {"cluster": "local", "user": name}}]}
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path
