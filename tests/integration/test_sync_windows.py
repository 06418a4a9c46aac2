"""AppProject sync windows against the real API server (issue 39): a closed window holds
auto-sync back with a condition, a requested operation waits, a manual sync is refused
unless the window has ``manualSync``, and the app syncs once the window ends.

Argo CD's own Application and AppProject CRDs (``argocd_crds``), the controller in-process
with ``argocd.enabled`` (the test namespace plays Argo CD's), a real git repository. A
deny window with schedule ``* * * * *`` and a long duration is active at any time; it is
made to end by changing its duration to ``1s`` (no clock, no sleep).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.integration.test_argocd_apps import (
    OPEN,
    RC_API,
    Start,
    appproject,
    deploy,
    request,
    status_when,
)
from tests.integration.test_project_enforcement import Enforced
from tests.integration.test_sync import _cm

ALWAYS = {"kind": "deny", "schedule": "* * * * *", "duration": "24h", "applications": ["*"]}


def windowed(*windows: dict[str, Any]) -> dict[str, Any]:
    return {**OPEN, "syncWindows": list(windows)}


def held(message: str) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "SyncWindowClosed" and message in c["message"]
                   for c in conditions)
    return check


def rc(kube: Kube, namespace: str) -> dict[str, Any] | None:
    return kube.get(RC_API, "RayCluster", name="demo", namespace=namespace)


@pytest.mark.usefixtures("argocd_crds")
def test_a_deny_window_holds_auto_sync_back_until_it_ends(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    deploy(kube, namespace, git_repo, start_controller, "gpu", project=windowed(ALWAYS))
    obj = status_when(kube, namespace, "gpu", held("sync blocked by active deny window 0 "
                                                   "(schedule '* * * * *', duration 24h)"),
                      "auto-sync held back with a condition")
    assert obj["status"]["sync"]["status"] == "OutOfSync"
    assert rc(kube, namespace) is None

    appproject(kube, namespace, "default", windowed({**ALWAYS, "duration": "1s"}))
    eventually(lambda: rc(kube, namespace), message="synced once the window ended")
    status_when(kube, namespace, "gpu",
                lambda o: o["status"]["sync"]["status"] == "Synced"
                and not o["status"].get("conditions"), "the condition is gone")


@pytest.mark.usefixtures("argocd_crds")
def test_a_requested_operation_waits_unless_the_window_allows_manual_syncs(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    deploy(kube, namespace, git_repo, start_controller, "manual", automated=False,
           project=windowed(ALWAYS))
    request(kube, namespace, "manual", {"sync": {}, "initiatedBy": {"username": "alice"}})
    obj = status_when(kube, namespace, "manual", held("the requested operation waits"),
                      "the operation held back")
    assert obj.get("operation"), "the operation stays requested, as with Argo CD"
    assert rc(kube, namespace) is None

    appproject(kube, namespace, "default", windowed({**ALWAYS, "manualSync": True}))
    eventually(lambda: rc(kube, namespace), message="run once the window allows manual syncs")
    status_when(kube, namespace, "manual",
                lambda o: "operation" not in o
                and (o["status"].get("operationState") or {}).get("phase") == "Succeeded",
                "the operation finished")


@pytest.fixture
def env(argocd_crds: None, kube: Kube, namespace: str, tmp_path: Path,
        helm_bin: Path) -> Enforced:
    return Enforced(kube, namespace, tmp_path, helm_bin)


def test_gitops_ray_sync_is_refused_by_a_closed_window_unless_manual_sync(
        env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a")]})
    app = env.app(git_repo)
    env.project(**windowed(ALWAYS))
    outcome = env.reconciler.sync(app)
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "SyncWindowClosed")
    assert outcome.result.message.startswith(
        "cannot sync: blocked by sync window (sync blocked by active deny window 0")
    assert outcome.record is None and env.store.load(app.name).status == {}
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None
    assert env.reconciler.sync(app, dry_run=True).result.ok  # a dry run writes nothing

    inactive_allow = {"kind": "allow", "schedule": "0 0 30 2 *", "duration": "1m",
                      "namespaces": ["nowhere"]}  # matches no app: no effect
    env.project(**windowed({**ALWAYS, "manualSync": True}, inactive_allow))
    assert env.reconciler.sync(app).result.ok
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is not None


def test_outside_the_allow_windows_only_manual_sync_windows_pass(
        env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a")]})
    app = env.app(git_repo)
    never = {"kind": "allow", "schedule": "0 0 1 1 *", "duration": "1s", "applications": ["*"]}
    env.project(**windowed(never))
    result = env.reconciler.sync(app).result
    assert result.reason == "SyncWindowClosed"
    assert "sync blocked outside the allow windows: allow window 0" in result.message
    env.project(**windowed({**never, "manualSync": True}))
    assert env.reconciler.sync(app).result.ok
