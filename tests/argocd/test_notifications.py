"""Argo CD's real notifications controller fires its stock triggers on what gitops-ray writes.

``argocd-notifications`` of the same build runs out of cluster with the stock catalog
(``notifications_catalog/install.yaml``: triggers and templates unchanged); each stock
template gets a ``webhook.receiver`` body naming the template and the operation's
revision, and the one service, ``service.webhook.receiver``, points at an HTTP receiver
on 127.0.0.1 in this test. The Application subscribes ``on-sync-succeeded``,
``on-sync-failed``, ``on-health-degraded`` and ``on-deployed`` to it. Everything the
triggers read (``status.operationState``, ``status.health`` with its
``lastTransitionTime``) is what gitops-ray wrote; syncs are requested through
``.operation``, as argocd-server does, and there is no KubeRay operator: the test plays
it, writing the RayCluster's ``status``.

Each stock trigger fires once per revision (``oncePer:
app.status.operationState.syncResult.revision``), remembered in an annotation the
controller writes on the Application: a status writer that dropped it would be seen here
as a second delivery. The last deliveries (of a third commit) are the barrier: every
update of the Application before them has been evaluated once they arrive.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD, stock_notifications
from tests.argocd.applications import APPLICATION, app_name
from tests.argocd.test_gitops_ray_e2e import OURS, application, manifests
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller

TRIGGERS = ("on-sync-succeeded", "on-sync-failed", "on-health-degraded", "on-deployed")
MERGE_PATCH = "application/merge-patch+json"
BODY = ('{"app": "{{.app.metadata.name}}", '
        '"revision": "{{.app.status.operationState.syncResult.revision}}"}')


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every request's path and JSON body."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        lock = self.lock = threading.Lock()
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                with lock:
                    got.append((self.path.strip("/"), json.loads(self.rfile.read(size))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def seen(self, app: str) -> list[tuple[str, str]]:
        """(template, revision) of each delivery about ``app``, in arrival order."""
        with self.lock:
            return [(t, b["revision"]) for t, b in self.got if b.get("app") == app]


def notifications_config(url: str) -> dict[str, str]:
    """The stock catalog; its templates with a webhook body for the service ``receiver``."""
    data = stock_notifications()
    for key, value in list(data.items()):
        if key.startswith("template."):
            template = yaml.safe_load(value)
            template["webhook"] = {"receiver": {"method": "POST", "body": BODY,
                                                "path": key.removeprefix("template.")}}
            data[key] = yaml.safe_dump(template)
    data["service.webhook.receiver"] = yaml.safe_dump({"url": url})
    return data


@pytest.fixture
def receiver(argocd: ArgoCD) -> Iterator[Receiver]:
    got = Receiver()
    argocd.start_notifications_controller(notifications_config(got.url))
    yield got
    argocd.stop_component("argocd-notifications")
    got.server.shutdown()


def sync(kube: Kube, argocd: ArgoCD, name: str, revision: str) -> None:
    """Request a sync as argocd-server does: write ``.operation``."""
    eventually(lambda: not (kube.get(*APPLICATION, name=name, namespace=argocd.namespace)
                            or {}).get("operation"), message="no operation pending")
    kube.patch(*APPLICATION, name=name, namespace=argocd.namespace, content_type=MERGE_PATCH,
               patch={"operation": {"sync": {"revision": revision},
                                    "initiatedBy": {"username": "test"}}})


def report(kube: Kube, namespace: str, state: str) -> None:
    """Write the RayCluster's status as the KubeRay operator would."""
    live = kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace)
    assert live is not None
    live["status"] = {"state": state, "observedGeneration": live["metadata"]["generation"]}
    kube.replace(live, field_manager="kuberay-operator", subresource="status")


def bad_config_map(namespace: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "Not_A_Valid_Name", "namespace": namespace}}


def test_stock_triggers_fire_once_per_event(
        receiver: Receiver, argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: Any) -> None:
    sha1 = git_repo.commit(manifests(namespace, demo="2.9.0"))
    name = app_name("notify")
    subscriptions = {f"notifications.argoproj.io/subscribe.{t}.receiver": "" for t in TRIGGERS}
    make_app(application(name, git_repo, namespace, annotations={**OURS, **subscriptions}))

    def arrived(*wanted: tuple[str, str]) -> bool:
        return all(w in receiver.seen(name) for w in wanted)

    sync(kube, argocd, name, sha1)
    eventually(lambda: arrived(("app-sync-succeeded", sha1)), timeout=120,
               message="on-sync-succeeded for the first commit")
    report(kube, namespace, "ready")
    eventually(lambda: arrived(("app-deployed", sha1)), timeout=120,
               message="on-deployed once the app is Healthy")
    report(kube, namespace, "failed")
    eventually(lambda: arrived(("app-health-degraded", sha1)), timeout=120,
               message="on-health-degraded")

    sha2 = git_repo.commit({"manifests/bad.yaml": bad_config_map(namespace)})
    sync(kube, argocd, name, sha2)
    eventually(lambda: arrived(("app-sync-failed", sha2), ("app-health-degraded", sha2)),
               timeout=120, message="on-sync-failed (and still degraded) for the bad commit")
    report(kube, namespace, "ready")
    sha3 = git_repo.commit({"manifests/bad.yaml": None})
    sync(kube, argocd, name, sha3)
    eventually(lambda: arrived(("app-sync-succeeded", sha3), ("app-deployed", sha3)),
               timeout=120, message="the third commit's deliveries (the barrier)")

    assert sorted(receiver.seen(name)) == sorted([
        ("app-sync-succeeded", sha1), ("app-deployed", sha1), ("app-health-degraded", sha1),
        ("app-sync-failed", sha2), ("app-health-degraded", sha2),
        ("app-sync-succeeded", sha3), ("app-deployed", sha3)])
