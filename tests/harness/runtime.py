"""The controller in-process: a real :class:`Runtime` (threads, real sockets) in the test.

The test namespace doubles as the control namespace; the fixture ``start_controller``
(``tests/conftest.py``) hands out :class:`Controllers`, which starts as many as a test
asks for and shuts them all down after it.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import requests
import yaml

from gitops_ray.kube import Kube
from gitops_ray.runtime.runner import Runtime
from gitops_ray.settings import load_settings
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness.git import GitRepo
from tests.harness.waiting import eventually

SECRET = "webhook-s3cret"
RC_API = "ray.io/v1"


def application(name: str, repo_url: str, namespace: str, path: str = "manifests", *,
                self_heal: bool = False, revision: str = "HEAD") -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": repo_url, "targetRevision": revision, "path": path},
                     "destination": {"server": "https://kubernetes.default.svc",
                                     "namespace": namespace},
                     "syncPolicy": {"automated": {"prune": True, "selfHeal": self_heal}}}}


class Controller:
    """A running in-process controller and helpers to talk to it."""

    def __init__(self, runtime: Runtime, kube: Kube, namespace: str) -> None:
        self.runtime, self.kube, self.namespace = runtime, kube, namespace
        self.url = f"http://127.0.0.1:{runtime.http.ports[0]}"

    def metrics(self) -> str:
        return requests.get(f"{self.url}/metrics", timeout=10).text

    def metrics_with(self, line: str) -> str:
        """The exposition if it contains ``line`` yet, else ``""`` (for :func:`eventually`)."""
        metrics = self.metrics()
        return metrics if line in metrics else ""

    def webhook(self, payload: dict[str, Any], secret: str | None = SECRET) -> requests.Response:
        body = json.dumps(payload).encode()
        headers = {"X-GitHub-Event": "push", "Content-Type": "application/json"}
        if secret is not None:
            digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Hub-Signature-256"] = f"sha256={digest}"
        return requests.post(f"{self.url}/webhook", data=body, headers=headers, timeout=10)

    def status(self, app: str) -> dict[str, Any]:
        return RecordStore(self.kube, self.namespace).load(app).status

    def live(self, name: str) -> dict[str, Any] | None:
        return self.kube.get(RC_API, "RayCluster", name=name, namespace=self.namespace)


def _answers_ready(url: str) -> bool:
    """``/readyz`` says ready; a connection error is "not yet" (a busy machine once reset
    the very first connection to a server that had just started listening)."""
    try:
        return requests.get(f"{url}/readyz", timeout=5).ok
    except requests.ConnectionError:
        return False


class Controllers:
    """``start(settings, **flags)``: a controller on the test cluster, ready; ``shutdown()``
    stops every one started."""

    def __init__(self, control_plane: LocalControlPlane, kube: Kube, namespace: str,
                 tmp_path: Path, helm_bin: Path) -> None:
        self.control_plane, self.kube, self.namespace = control_plane, kube, namespace
        self.tmp_path, self.helm_bin = tmp_path, helm_bin
        self.running: list[Runtime] = []

    def __call__(self, settings: dict[str, Any], **flags: Any) -> Controller:
        tmp_path, namespace = self.tmp_path, self.namespace
        config = tmp_path / f"settings-{len(self.running)}.yaml"
        config.write_text(yaml.safe_dump(settings))
        base = {"kubeconfig": str(self.control_plane.kubeconfig),
                "controlNamespace": namespace,
                "cacheDir": str(tmp_path / f"cache-{len(self.running)}"),
                "helm": str(self.helm_bin),
                "listen.metrics": "127.0.0.1:0", "listen.health": "127.0.0.1:0",
                "listen.webhook": "127.0.0.1:0", "leaderElection.enabled": False,
                "interval": "1h", "jitter": "0", "debounce": "100ms"}
        loaded = load_settings(config, env={"GITOPS_RAY_WEBHOOK_SECRET": SECRET},
                               flags={**base, **flags})
        runtime = Runtime(loaded)
        self.running.append(runtime)
        runtime.start()
        controller = Controller(runtime, self.kube, namespace)
        eventually(lambda: _answers_ready(controller.url), message="readyz")
        return controller

    def shutdown(self) -> None:
        for runtime in self.running:
            runtime.shutdown()


def push_payload(repo: GitRepo, sha: str) -> dict[str, Any]:
    return {"ref": "refs/heads/main", "after": sha,
            "repository": {"clone_url": repo.url, "default_branch": "main"}}


def with_version(rc: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(rc)
    out["spec"]["rayVersion"] = version
    return out


def ray_version(controller: Controller, name: str) -> str | None:
    live = controller.live(name)
    return live["spec"]["rayVersion"] if live else None


def metric_value(metrics: str, series: str) -> float:
    """The value of the first sample of ``series`` in an exposition (0 when absent)."""
    for line in metrics.splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
