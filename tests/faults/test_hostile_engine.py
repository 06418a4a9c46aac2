"""Diff, health and sync against hostile committers, in the real controller process.

One controller serves five apps from one real git repo (an app-of-apps directory the
admin owns: the Applications and argocd-cm are theirs, each app's path its team's):

* ``trap``: a ConfigMap whose annotation is 200 KB of spaces between two letters. The
  admin's Lua health check for ConfigMaps trims that annotation, an innocent pattern
  (``^%s*(.-)%s*$``) that backtracks for minutes inside one ``string.match`` call, where
  no instruction hook fires. In-process this froze the controller; now its check is
  Unknown, "ran longer than 1s", and the worker that ran it is gone;
* ``good``: a ConfigMap the same check passes: it keeps syncing new commits meanwhile;
* ``vault``: a manually synced Secret whose live token (another writer's) differs from
  git's, with an ignore rule that copies the live token into an annotation: the web page's
  diff shows masks, never the token;
* ``a`` owns ConfigMap ``shared``; ``b`` (``FailOnSharedResource=true``, the admin's
  choice) puts one of that name in its path: b's sync fails, reason ``SharedResource``,
  the object stays a's.

Then the token is searched for in the page, every ConfigMap and Event of the namespace
and the whole log, and the controller is alive, ready and under the chart's memory limit.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import requests

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from gitops_ray.sync.tracking import claimed_by
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController
from tests.harness.runtime import application
from tests.harness.settings import NO_LEADER_ELECTION, controller_settings
from tests.integration.test_argocd_cm import argocd_cm, open_project

TOKEN = "live-token-0d2f7c91"
LIVE_B64 = base64.b64encode(TOKEN.encode()).decode()
LEAK = ".x) | .metadata.annotations.leak = (.data.token | @base64d) | (."
TRIM = ('local note = (obj.metadata.annotations or {}).note or "" '
        'local trimmed = note:match("^%s*(.-)%s*$") '
        'return {status = "Healthy", message = "note: " .. string.sub(trimmed, 1, 20)}')
MEMORY_LIMIT_MIB = 512  # the chart's limit


def configmap(name: str, value: str, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"value": value}}


def secret(namespace: str, token_b64: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "vault", "namespace": namespace}, "data": {"token": token_b64}}


def app(name: str, url: str, namespace: str, **spec: Any) -> dict[str, Any]:
    doc = application(name, url, namespace, path=name)
    doc["spec"].update(spec)
    return doc


def repo_files(url: str, namespace: str) -> dict[str, object]:
    manual = app("vault", url, namespace, ignoreDifferences=[
        {"kind": "Secret", "jqPathExpressions": [LEAK]}])
    del manual["spec"]["syncPolicy"]
    return {
        "apps/trap.yaml": app("trap", url, namespace),
        "apps/good.yaml": app("good", url, namespace),
        "apps/vault.yaml": manual, "apps/a.yaml": app("a", url, namespace),
        "trap/cm.yaml": configmap("trap", "1", note="x" + " " * 200_000 + "x"),
        "good/cm.yaml": configmap("good", "1", note="  fine  "),
        "vault/secret.yaml": secret(namespace, base64.b64encode(b"from-git").decode()),
        "a/cm.yaml": configmap("shared", "a"),
    }


def b_files(url: str, namespace: str) -> dict[str, object]:
    """App b, committed once a owns ``shared`` (else whichever syncs first creates it)."""
    b = app("b", url, namespace)
    b["spec"]["syncPolicy"]["syncOptions"] = ["FailOnSharedResource=true"]
    return {"apps/b.yaml": b, "b/cm.yaml": configmap("shared", "b"),
            "b/own.yaml": configmap("b-own", "b")}


def health_of(store: RecordStore, app_name: str, key: str) -> dict[str, Any]:
    rows = store.load(app_name).status.get("resources") or []
    return next((dict(r.get("health") or {}) for r in rows if r.get("key") == key), {})


def start(controller_process: StartController, control_plane: LocalControlPlane,
          git_repo: GitRepo, namespace: str, argocd: str) -> ControllerProcess:
    return controller_process("engine", controller_settings(
        control_plane.kubeconfig, namespace, interval="1s", leaderElection=NO_LEADER_ELECTION,
        argocd={"enabled": True, "namespace": argocd},
        appSources=[{"repo": git_repo.url, "revision": "main", "path": "apps"}]))


def test_hostile_checks_rules_and_shared_objects_fail_their_app_only(
        controller_process: StartController, control_plane: LocalControlPlane,
        git_repo: GitRepo, kube: Kube, namespace: str, argocd_crds: None,
        extra_namespace: Callable[[str], str]) -> None:
    argocd = extra_namespace("argocd")
    open_project(kube, argocd)
    kube.create(argocd_cm(argocd, **{"resource.customizations.health.ConfigMap": TRIM}),
                field_manager="admin")
    kube.create(secret(namespace, LIVE_B64), field_manager="operator")
    git_repo.commit(repo_files(git_repo.url, namespace), message="bootstrap")
    store = RecordStore(kube, namespace)
    controller = start(controller_process, control_plane, git_repo, namespace, argocd)

    hung = eventually(lambda: health_of(store, "trap", f"ConfigMap:{namespace}/trap")
                      .get("message", "").startswith("health check stopped: it ran longer"),
                      message="the trap's check ends at its deadline", timeout=180)
    assert hung
    assert health_of(store, "trap", f"ConfigMap:{namespace}/trap")["status"] == "Unknown"
    eventually(lambda: health_of(store, "good", f"ConfigMap:{namespace}/good")
               == {"status": "Healthy", "message": "note: fine"}, message="good is checked")
    sha = git_repo.commit({"good/cm.yaml": configmap("good", "2", note="  fine  ")})
    eventually(lambda: store.load("good").status.get("revision") == sha and
               ((kube.get("v1", "ConfigMap", name="good", namespace=namespace) or {})
                .get("data") or {}).get("value") == "2", message="good syncs a new commit")

    eventually(lambda: claimed_by(kube.get("v1", "ConfigMap", name="shared",
                                           namespace=namespace)) == "a", message="a's")
    git_repo.commit(b_files(git_repo.url, namespace))
    refused = eventually(lambda: (store.load("b").status.get("operation") or {})
                         .get("reason") == "SharedResource", message="b's sync is refused")
    assert refused
    operation = store.load("b").status["operation"]
    assert "Shared resource found: ConfigMap/shared is part of applications b and a" in \
        operation["message"]
    shared = kube.get("v1", "ConfigMap", name="shared", namespace=namespace)
    assert shared is not None and claimed_by(shared) == "a" and shared["data"] == {"value": "a"}
    assert kube.get("v1", "ConfigMap", name="b-own", namespace=namespace) is None

    page = eventually(lambda: _page(controller, "vault"), message="vault's page has a diff")
    assert "token: ++++" in page
    texts = [page, controller.text(),
             json.dumps(kube.list("v1", "ConfigMap", namespace)[0]),
             json.dumps(kube.list("v1", "Event", namespace)[0])]
    for text in texts:
        assert TOKEN not in text and LIVE_B64 not in text
    assert controller.alive() and controller.ready()
    assert controller.peak_rss_mib() < MEMORY_LIMIT_MIB / 2


def _page(controller: ControllerProcess, name: str) -> str:
    response = requests.get(f"http://127.0.0.1:{controller.metrics_port}/apps/{name}",
                            timeout=10)
    return response.text if response.ok and "token:" in response.text else ""
