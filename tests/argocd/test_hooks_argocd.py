"""``argocd app sync`` of a handed-over app with resource hooks, run by gitops-ray.

argocd-server writes ``.operation``; gitops-ray runs the PreSync Job first, the app's
RayCluster after it, then a PostSync ConfigMap (``generateName``, ``HookSucceeded``), and
records each hook in ``status.operationState.syncResult.resources`` with ``hookType`` and
``hookPhase``, which is where the CLI's HOOK column comes from (``getResourceStates`` in
argo-cd's ``cmd/argocd/commands/app.go``: a hook row's STATUS is its ``hookPhase``, its
HEALTH the result code). No Job controller or KubeRay operator runs in this tier: the
test writes the Job's completion as the Job controller would, and the RayCluster's
readiness as KubeRay would (the PostSync phase starts once the Sync phase is Healthy).
"""

from __future__ import annotations

import pytest

from gitops_ray.kube import Kube
from localcluster.argocd import ArgoCD
from tests.argocd.applications import app_name
from tests.argocd.test_gitops_ray_e2e import MakeApp, application, compared, rows, status_when
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller
from tests.integration.test_hooks import HOOK, POLICY, config_map, finish, job
from tests.integration.test_sync_waves import report as report_rc
from tests.samples import raycluster


@pytest.mark.usefixtures("argocd_repo_server")
def test_argocd_app_sync_runs_the_hooks_and_shows_them(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp) -> None:
    report = config_map("report-", **{HOOK: "PostSync", POLICY: "HookSucceeded"})
    report["metadata"]["generateName"] = report["metadata"].pop("name")
    migrate = job("migrate", "PreSync")
    for hook in (report, migrate):
        hook["metadata"]["namespace"] = namespace
    sha = git_repo.commit({"manifests/app.yaml": [raycluster("demo", namespace), migrate,
                                                  report]})
    name = app_name("hooks")
    make_app(application(name, git_repo, namespace))
    status_when(argocd, name, compared(sha, "OutOfSync"), "OutOfSync before any sync")

    sync = argocd.cli_process("app", "sync", name, "--timeout", "300")
    eventually(lambda: kube.get("batch/v1", "Job", name="migrate", namespace=namespace),
               timeout=120, message="the PreSync Job created")
    assert kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace) is None
    finish(kube, namespace, "migrate")
    eventually(lambda: kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace),
               timeout=120, message="the RayCluster applied once PreSync ended")
    report_rc(kube, namespace, "demo", "ready")  # PostSync waits for the Sync phase's health
    out, err = sync.communicate(timeout=300)
    assert sync.returncode == 0, f"{out}\n{err}"
    assert "Phase:              Succeeded" in out
    assert kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace) is not None
    got = rows(out)
    assert ["batch", "Job", namespace, "migrate", "Succeeded", "Synced", "PreSync"] in \
        [r[:7] for r in got]
    # the core group's GROUP cell is empty, so the row starts at KIND
    post = [r for r in got if r[:2] == ["ConfigMap", namespace] and r[2].startswith("report-")]
    assert [r[3:6] for r in post] == [["Succeeded", "Synced", "PostSync"]]

    shown = rows(argocd.cli("app", "get", name).stdout)
    assert ["batch", "Job", namespace, "migrate", "Succeeded", "Synced", "PreSync"] in \
        [r[:7] for r in shown]
    status = status_when(argocd, name, lambda s: s["sync"]["status"] == "Synced",
                         "Synced: the hooks are not resources of the app")
    assert [r["kind"] for r in status["resources"]] == ["RayCluster"]
    eventually(lambda: not [c for c in kube.list("v1", "ConfigMap", namespace)[0]
                            if c["metadata"]["name"].startswith("report-")],
               message="the PostSync ConfigMap deleted (HookSucceeded)")
