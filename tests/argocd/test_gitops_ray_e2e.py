"""gitops-ray end to end with the real Argo CD: argocd-server, its CLI and its controller.

The product runs in-process (fixture ``gitops_ray``: ``argocd.enabled``, Argo CD's
namespace ``argocd``) and reconciles Applications there that carry both opt-in
annotations; their source is a real git repository (``file://``) with RayClusters under
``manifests/``, their destination the test's namespace. Everything Argo CD shows comes
from what gitops-ray wrote into the Application (argocd-server serves the object as
stored), and every control goes through argocd-server, which writes ``.operation``.

What the ``argocd`` CLI needs of the status, read from ``cmd/argocd/commands/app.go``
(``waitOnApplicationStatus``, v3.2.11) and seen here: ``argocd app sync`` / ``rollback``
return once ``.operation`` is gone and ``status.operationState.finishedAt`` is set, and,
for a sync that is not a dry run, once ``status.reconciledAt`` is not before
``finishedAt``; the exit code follows ``operationState.phase`` (``Successful()``), and an
app-wide sync whose app is not Synced afterwards fails with "N resources require
pruning" if ``syncResult.resources`` say so. Before printing, the CLI asks argocd-server
for a refresh, which sets ``argocd.argoproj.io/refresh`` and waits until someone
removes it (Argo CD's controller does; here gitops-ray). argocd-server itself resolves
the sync's revision: a commit SHA as it is, anything else (``HEAD``) by asking the
repo-server, so these tests run ``argocd-repo-server`` too (``argocd_repo_server``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import MANAGED, SKIP_RECONCILE, app_name
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller
from tests.samples import raycluster

APP_API = "argoproj.io/v1alpha1"
RC_API = "ray.io/v1"
OURS = {MANAGED: "true", SKIP_RECONCILE: "true"}
MakeApp = Callable[[Manifest], Manifest]


def application(name: str, repo: GitRepo, destination: str, *, project: str = "default",
                automated: bool = False, annotations: dict[str, str] | None = None
                ) -> Manifest:
    spec: dict[str, Any] = {
        "project": project,
        "source": {"repoURL": repo.url, "targetRevision": "HEAD", "path": "manifests"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": destination}}
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True}}
    return {"apiVersion": APP_API, "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd",
                         "annotations": OURS if annotations is None else annotations},
            "spec": spec}


def manifests(namespace: str, **versions: str | None) -> dict[str, object]:
    """``manifests/NAME.yaml`` per RayCluster NAME at its Ray version (``None``: deleted)."""
    files: dict[str, object] = {}
    for name, version in versions.items():
        rc = raycluster(name, namespace)
        if version is not None:
            rc["spec"]["rayVersion"] = version
        files[f"manifests/{name}.yaml"] = rc if version is not None else None
    return files


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def app_json(argocd: ArgoCD, name: str) -> Manifest:
    got: Manifest = json.loads(argocd.cli("app", "get", name, "-o", "json").stdout)
    return got


def app_status(argocd: ArgoCD, name: str) -> Manifest:
    status: Manifest = app_json(argocd, name).get("status") or {}
    return status


def status_when(argocd: ArgoCD, name: str, check: Callable[[Manifest], bool],
                message: str) -> Manifest:
    def ready() -> Manifest | None:
        status = app_status(argocd, name)
        return status if check(status) else None
    found: Manifest = eventually(ready, message=message)
    return found


def compared(revision: str, sync: str) -> Callable[[Manifest], bool]:
    return lambda s: (s.get("sync") or {}).get("revision") == revision and \
        s["sync"].get("status") == sync


def ray_version(kube: Kube, namespace: str, name: str = "demo") -> str | None:
    live = kube.get(RC_API, "RayCluster", name=name, namespace=namespace)
    return str(live["spec"]["rayVersion"]) if live else None


def cli_ok(argocd: ArgoCD, *args: str) -> str:
    """Run the CLI; its stdout, or fail with what it printed."""
    done = argocd.cli(*args, check=False, timeout=180)
    assert done.returncode == 0, f"argocd {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def appproject(kube: Kube, argocd: ArgoCD) -> Iterator[Callable[[str, Manifest], None]]:
    made: list[str] = []

    def make(name: str, spec: Manifest) -> None:
        kube.create({"apiVersion": APP_API, "kind": "AppProject",
                     "metadata": {"name": name, "namespace": argocd.namespace}, "spec": spec},
                    field_manager="tests")
        made.append(name)

    yield make
    for name in made:
        kube.delete(APP_API, "AppProject", name=name, namespace=argocd.namespace)


# -- 1. argocd app get / list ------------------------------------------------------------

def test_get_and_list_show_what_gitops_ray_synced(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp) -> None:
    sha = git_repo.commit(manifests(namespace, demo="2.9.0"))
    name = app_name("e2e-get")
    make_app(application(name, git_repo, namespace, automated=True))

    status = status_when(argocd, name, lambda s: compared(sha, "Synced")(s)
                         and bool(s.get("history")), "gitops-ray synced and wrote the status")
    assert ray_version(kube, namespace) == "2.9.0"
    assert status["health"]["status"] == "Progressing"  # no KubeRay operator runs here
    [row] = status["resources"]
    assert {k: row[k] for k in ("group", "kind", "namespace", "name", "status")} == {
        "group": "ray.io", "kind": "RayCluster", "namespace": namespace, "name": "demo",
        "status": "Synced"}
    assert status["operationState"]["phase"] == "Succeeded"
    assert status["operationState"]["syncResult"]["revision"] == sha

    got = argocd.cli("app", "get", name).stdout
    assert f"Sync Status:        Synced to HEAD ({sha[:7]})" in got
    assert "Health Status:      Progressing" in got
    # The last operation's result for the resource is the MESSAGE column.
    assert ["ray.io", "RayCluster", namespace, "demo", "Synced", "Progressing",
            "created"] in rows(got)

    listed = rows(argocd.cli("app", "list").stdout)
    row_of = dict(zip(listed[0], next(r for r in listed if r[0] == f"argocd/{name}"),
                      strict=False))
    assert (row_of["STATUS"], row_of["HEALTH"], row_of["SYNCPOLICY"]) == (
        "Synced", "Progressing", "Auto-Prune")
    assert (row_of["REPO"], row_of["PATH"], row_of["TARGET"]) == (
        git_repo.url, "manifests", "HEAD")


# -- 2. argocd app sync ------------------------------------------------------------------

@pytest.mark.usefixtures("argocd_repo_server")
def test_argocd_app_sync_is_executed_by_gitops_ray(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp) -> None:
    first = git_repo.commit(manifests(namespace, demo="2.9.0", extra="2.9.0"))
    name = app_name("e2e-sync")
    make_app(application(name, git_repo, namespace))
    status_when(argocd, name, compared(first, "OutOfSync"), "OutOfSync before any sync")

    out = cli_ok(argocd, "app", "sync", name)
    assert "Phase:              Succeeded" in out
    assert f"Sync Revision:      {first}" in out
    assert "Message:            successfully synced (all tasks run)" in out
    assert ["ray.io", "RayCluster", namespace, "extra", "Synced", "Progressing",
            "created"] in rows(out)
    assert (ray_version(kube, namespace), ray_version(kube, namespace, "extra")) == (
        "2.9.0", "2.9.0")

    second = git_repo.commit(manifests(namespace, demo="2.10.0", extra=None))
    out = cli_ok(argocd, "app", "sync", name, "--dry-run")
    assert f"Sync Revision:      {second}" in out and "Phase:              Succeeded" in out
    assert (ray_version(kube, namespace), ray_version(kube, namespace, "extra")) == (
        "2.9.0", "2.9.0")

    out = cli_ok(argocd, "app", "sync", name, "--resource", "ray.io:RayCluster:demo")
    assert "Phase:              Succeeded" in out
    assert ray_version(kube, namespace) == "2.10.0"
    assert ray_version(kube, namespace, "extra") == "2.9.0"  # not selected, not pruned
    assert [h["revision"] for h in app_status(argocd, name)["history"]] == [first]

    out = cli_ok(argocd, "app", "sync", name, "--prune")
    assert "Phase:              Succeeded" in out
    eventually(lambda: ray_version(kube, namespace, "extra") is None,  # deletion is async
               message="the RayCluster no longer in git pruned")
    status = status_when(argocd, name, lambda s: s["sync"]["status"] == "Synced",
                         "Synced once the pruned RayCluster is gone")
    assert [h["revision"] for h in status["history"]] == [first, second]
    assert [r["name"] for r in status["resources"]] == ["demo"]


# -- 3. argocd app history / rollback ----------------------------------------------------

@pytest.mark.usefixtures("argocd_repo_server")
def test_history_lists_the_deployments_and_rollback_brings_the_old_revision_back(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp) -> None:
    first = git_repo.commit(manifests(namespace, demo="2.9.0"))
    name = app_name("e2e-rollback")
    make_app(application(name, git_repo, namespace))
    status_when(argocd, name, compared(first, "OutOfSync"), "OutOfSync before any sync")
    cli_ok(argocd, "app", "sync", name)
    second = git_repo.commit(manifests(namespace, demo="2.10.0"))
    cli_ok(argocd, "app", "sync", name)
    assert ray_version(kube, namespace) == "2.10.0"

    assert cli_ok(argocd, "app", "history", name, "-o", "id").split() == ["0", "1"]
    listed = rows(cli_ok(argocd, "app", "history", name))
    assert listed[0] == ["SOURCE", git_repo.url]
    assert [(r[0], r[-2:]) for r in listed[2:]] == [
        ("0", ["HEAD", f"({first[:7]})"]), ("1", ["HEAD", f"({second[:7]})"])]

    out = cli_ok(argocd, "app", "rollback", name, "0")
    assert "Phase:              Succeeded" in out and f"Sync Revision:      {first}" in out
    assert ray_version(kube, namespace) == "2.9.0"
    status = app_status(argocd, name)
    assert [(h["id"], h["revision"]) for h in status["history"]] == [
        (0, first), (1, second), (2, first)]
    assert status["sync"]["status"] == "OutOfSync"  # HEAD is still the second commit
    assert cli_ok(argocd, "app", "history", name, "-o", "id").split() == ["0", "1", "2"]


# -- 4. an AppProject that forbids the destination -----------------------------------------

@pytest.mark.usefixtures("argocd_repo_server")
def test_a_project_that_forbids_the_destination_blocks_the_app(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp,
        appproject: Callable[[str, Manifest], None]) -> None:
    git_repo.commit(manifests(namespace, demo="2.9.0"))
    project, name = app_name("restricted"), app_name("e2e-blocked")
    appproject(project, {"sourceRepos": ["*"], "destinations": [
        {"server": "https://kubernetes.default.svc", "namespace": "elsewhere"}]})
    make_app(application(name, git_repo, namespace, project=project, automated=True))
    message = (f"application destination server 'https://kubernetes.default.svc' and "
               f"namespace '{namespace}' do not match any of the allowed destinations in "
               f"project '{project}'")

    status = status_when(argocd, name, lambda s: bool(s.get("conditions")),
                         "a condition on the blocked Application")
    assert [(c["type"], c["message"]) for c in status["conditions"]] == [
        ("InvalidSpecError", message)]
    got = cli_ok(argocd, "app", "get", name)
    assert ["CONDITION", "MESSAGE", "LAST", "TRANSITION"] in rows(got)
    assert any(line.startswith("InvalidSpecError") and message in line
               for line in got.splitlines())

    # argocd-server does not check destinations on a sync: it sets `.operation`, and
    # gitops-ray fails the operation with the condition's message.
    refused = argocd.cli("app", "sync", name, check=False, timeout=180)
    assert refused.returncode == 1
    assert "Operation has completed with phase: Failed" in refused.stderr
    assert "Phase:              Failed" in refused.stdout
    assert f"Message:            InvalidSpecError: {message}" in refused.stdout
    assert ray_version(kube, namespace) is None


# -- 5. Argo CD's own application controller next to gitops-ray ---------------------------

CONTROLLER = "argocd-application-controller"
SKIPPING = "Skipping Application reconcile"


def controller_lines(argocd: ArgoCD, name: str) -> list[str]:
    """The controller's log lines about Application ``name`` (``application=NAME`` field)."""
    text = (argocd.workdir / f"{CONTROLLER}.log").read_text(errors="replace")
    return [line for line in text.splitlines() if f"application={name} " in line
            or line.endswith(f"application={name}")]


def test_argo_cds_controller_leaves_the_annotated_app_to_gitops_ray(
        argocd_controller: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: MakeApp) -> None:
    argocd = argocd_controller
    sha = git_repo.commit(manifests(namespace, demo="2.9.0"))
    ours, theirs = app_name("e2e-ours"), app_name("e2e-theirs")
    make_app(application(ours, git_repo, namespace))
    make_app(application(theirs, git_repo, namespace, annotations={}))

    # Argo CD's controller handles the ordinary app (no repo-server: a ComparisonError).
    theirs_status = status_when(argocd, theirs, lambda s: bool(s.get("reconciledAt")),
                                "Argo CD's controller reconciled the un-annotated app")
    assert "ComparisonError" in [c["type"] for c in theirs_status.get("conditions", [])]
    status_when(argocd, ours, compared(sha, "OutOfSync"), "gitops-ray compared ours")
    eventually(lambda: any(SKIPPING in line for line in controller_lines(argocd, ours)),
               message="Argo CD's controller skipped the annotated app")
    skipped = sum(SKIPPING in line for line in controller_lines(argocd, ours))

    # A sync through argocd-server: .operation is set, gitops-ray runs it, Argo CD skips it.
    out = cli_ok(argocd, "app", "sync", ours, "--revision", sha)
    assert "Phase:              Succeeded" in out
    assert ray_version(kube, namespace) == "2.9.0"
    eventually(lambda: sum(SKIPPING in line for line in controller_lines(argocd, ours))
               > skipped, message="Argo CD's controller skipped the update setting .operation")

    status = app_status(argocd, ours)
    assert status["sync"]["status"] == "Synced" and not status.get("conditions")
    state = status["operationState"]
    assert (state["phase"], state["message"]) == (
        "Succeeded", "successfully synced (all tasks run)")
    assert [(r["kind"], r["name"], r["message"]) for r in state["syncResult"]["resources"]] \
        == [("RayCluster", "demo", "created")]
    assert [r["name"] for r in status["resources"]] == ["demo"]
    assert [line for line in controller_lines(argocd, ours) if SKIPPING not in line] == []
    assert any("Reconciliation completed" in line for line in controller_lines(argocd, theirs))
