"""The fault suite's harness: the real controller as a separate process, run as a user.

Why a process and not an in-process :class:`Runtime`: the faults this suite reproduces
(memory blow-ups, SIGSTOP/SIGKILL, a stale leader, what shows in ``ps``) only exist for a
real process. Each :class:`ControllerProcess` gets its own ports, cache directory, log
file (JSON lines) and, optionally, a kubeconfig holding a ServiceAccount's token, so a
test can run the controller with exactly the RBAC the chart renders.

Waits are on conditions (:func:`tests.waiting.eventually`), never
sleeps; memory is read from ``/proc/<pid>/status`` (``VmRSS`` now, ``VmHWM`` the peak).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.controlplane import free_port

SECRET = "faults-s3cret"


def proc_status_kib(pid: int, field: str) -> int:
    """``VmRSS``/``VmHWM`` (KiB) of a live process from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class ControllerProcess:
    """``python -m gitops_ray run --config=...`` with its own ports, identity and log."""

    def __init__(self, identity: str, settings: dict[str, Any], workdir: Path, *,
                 env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.identity = identity
        self.metrics_port, self.health_port, self.webhook_port = (free_port() for _ in "abc")
        self.config = workdir / f"{identity}.yaml"
        self.config.write_text(yaml.safe_dump(settings))
        self.log = workdir / f"{identity}.log"
        self.webhook_url = f"http://127.0.0.1:{self.webhook_port}/webhook"
        argv = [sys.executable, "-m", "gitops_ray", "run", f"--config={self.config}",
                f"--leader-election-identity={identity}",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-addr=127.0.0.1:{self.health_port}",
                f"--webhook-addr=127.0.0.1:{self.webhook_port}",
                f"--webhook-advertise-url={self.webhook_url}",
                f"--cache-dir={workdir / identity / 'repos'}", "--log-format=json", *args]
        full_env = {**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": SECRET, **(env or {})}
        full_env.pop("KUBECONFIG", None)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         env=full_env)

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


@pytest.fixture
def controller_process(tmp_path: Path) -> Iterator[StartController]:
    """``start(identity, settings, env=..., args=...)``; every process is killed after."""
    started: list[ControllerProcess] = []

    def start(identity: str, settings: dict[str, Any], **kwargs: Any) -> ControllerProcess:
        started.append(ControllerProcess(identity, settings, tmp_path, **kwargs))
        return started[-1]

    yield start
    for p in started:
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
