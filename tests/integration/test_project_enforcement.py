"""AppProject rules against the real API server (issue 16): what a project forbids is
refused with Argo CD's message, nothing is applied, and prune leaves forbidden kinds alone.

The AppProjects are objects of Argo CD's own CRD (v3.2.11, the ``argocd_crds`` fixture),
read through :class:`KubeProjects` from the test's namespace, which plays Argo CD's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.reconcile.project import KubeProjects, ProjectsFrom
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.tools import RenderTools
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore
from gitops_ray.types import AppCondition, ConditionType, SyncStatus
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.integration.test_sync import _cm
from tests.samples import raycluster

IN_CLUSTER = "https://kubernetes.default.svc"
OPEN = {"sourceRepos": ["*"], "destinations": [{"server": IN_CLUSTER, "namespace": "*"}]}


@pytest.fixture(scope="module")
def appproject_crd(argocd_crds: None) -> None:
    """Argo CD's own AppProject CRD (installed once per session)."""


class Enforced(Env):
    """:class:`Env` whose pipeline enforces the AppProjects of the test's namespace."""

    def __init__(self, kube: Kube, namespace: str, tmp: Path, helm: Path) -> None:
        super().__init__(kube, namespace, tmp, helm)
        self.pipeline = Pipeline(kube, GitSource(tmp / "cache"), self.store,
                                 tools=RenderTools(helm_bin=str(helm)),
                                 projects=KubeProjects(kube, namespace))
        self.syncer = Syncer(kube, self.store)
        self.reconciler = Reconciler(self.pipeline, self.syncer)

    def project(self, name: str = "default", **spec: Any) -> None:
        self.kube.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                         "metadata": {"name": name, "namespace": self.namespace},
                         "spec": spec}, field_manager="tests", force=True)


@pytest.fixture
def env(appproject_crd: None, kube: Kube, namespace: str, tmp_path: Path,
        helm_bin: Path) -> Enforced:
    return Enforced(kube, namespace, tmp_path, helm_bin)


def operation(env: Env, app: str) -> dict[str, Any]:
    return dict(RecordStore(env.kube, env.namespace).load(app).status["operation"])


def test_a_forbidden_destination_is_a_condition_and_nothing_is_applied(
        env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a"), raycluster("rc")]})
    env.project(sourceRepos=["*"], destinations=[{"server": IN_CLUSTER, "namespace": "prod-*"}])
    app = env.app(git_repo)
    message = (f"application destination server '{IN_CLUSTER}' and namespace "
               f"'{env.namespace}' do not match any of the allowed destinations in project "
               "'default'")
    before = env.pipeline.compare(app)
    assert before.conditions == (AppCondition(ConditionType.INVALID_SPEC, message),)
    assert before.diff.status == SyncStatus.UNKNOWN and before.desired == []
    outcome = env.reconciler.sync(app, prune=True)
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "ProjectForbidden")
    assert outcome.result.message == f"InvalidSpecError: {message}"
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None
    assert env.live("rc") is None
    recorded = operation(env, "ray")
    assert (recorded["phase"], recorded["reason"]) == ("Failed", "ProjectForbidden")


def test_a_project_that_does_not_exist(env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a")]})
    outcome = env.reconciler.sync(env.app(git_repo))  # no AppProject "default" here
    assert outcome.result.reason == "ProjectForbidden"
    assert outcome.result.message == ("InvalidSpecError: Application referencing project "
                                      "default which does not exist")
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None


def test_a_forbidden_kind_fails_the_sync_with_argo_cds_message(
        env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a"), raycluster("rc")]})
    env.project(**OPEN, namespaceResourceBlacklist=[{"group": "ray.io", "kind": "RayCluster"}])
    app = env.app(git_repo)
    before = env.pipeline.compare(app)
    why = "resource ray.io:RayCluster is not permitted in project default"
    statuses = {r.key.kind: (r.status, r.reason) for r in before.diff.resources}
    assert statuses["RayCluster"] == (SyncStatus.UNKNOWN, why)
    assert statuses["ConfigMap"] == (SyncStatus.OUT_OF_SYNC, "missing")
    outcome = env.reconciler.sync(app, before=before)
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "ProjectForbidden")
    assert outcome.result.message == f"one or more synchronization tasks are not valid: {why}"
    assert [(str(r.key), r.action, r.message) for r in outcome.result.resources] == [
        (f"ray.io/RayCluster:{env.namespace}/rc", "failed", why)]
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None
    assert env.live("rc") is None


def test_a_whitelist_of_some_namespaced_kinds(env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a"), raycluster("rc")]})
    env.project(**OPEN, namespaceResourceWhitelist=[{"group": "", "kind": "ConfigMap"}])
    outcome = env.reconciler.sync(env.app(git_repo))
    assert outcome.result.reason == "ProjectForbidden"
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None


def test_prune_never_deletes_a_kind_the_project_forbids(env: Enforced,
                                                       git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a"), _cm("b"), raycluster("rc")]})
    env.project(**OPEN)
    app = env.app(git_repo)
    assert env.reconciler.sync(app).result.ok
    git_repo.commit({"manifests/a.yaml": [_cm("a")]})  # b and rc leave git
    env.project(**OPEN, namespaceResourceBlacklist=[{"group": "ray.io", "kind": "RayCluster"}])
    before = env.pipeline.compare(app)
    assert {r.key.name: r.reason for r in before.diff.resources} == {
        "a": "", "b": "extraneous"}  # Argo CD does not see a live object it forbids
    outcome = env.reconciler.sync(app, prune=True, before=before)
    assert outcome.result.ok, outcome.result.message
    actions = {r.key.name: (r.action, r.message) for r in outcome.result.resources}
    assert actions["b"][0] in ("pruned", "deleting")  # Foreground: maybe not gone yet
    assert actions["rc"] == ("prune-skipped", "not pruned: resource ray.io:RayCluster is not "
                                              "permitted in project default")
    assert env.live("rc") is not None
    eventually(lambda: env.kube.get("v1", "ConfigMap", name="b", namespace=env.namespace)
               is None, message="b pruned")


def test_a_permitted_app_syncs_as_before(env: Enforced, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a"), raycluster("rc")]})
    env.project(sourceRepos=[git_repo.url.rsplit("/", 1)[0] + "/*"],
                destinations=[{"name": "in-cluster", "namespace": env.namespace}])
    app = env.app(git_repo)
    assert env.pipeline.compare(app).conditions == ()
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    assert outcome.after is not None and outcome.after.diff.status == SyncStatus.SYNCED
    assert env.live("rc") is not None


def test_the_cli_enforces_projects_with_argocd_namespace(
        env: Enforced, git_repo: GitRepo, control_plane: LocalControlPlane,
        tmp_path: Path, helm_bin: Path) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("a")]})
    env.project(sourceRepos=["https://example.com/*"], destinations=OPEN["destinations"])
    args = ["--repo", git_repo.url, "--path", "manifests", "--dest-namespace", env.namespace,
            "--name", "cli"]
    cli = Cli(control_plane, env.namespace, tmp_path / "cache", helm_bin)
    forbidden = f"application repo {git_repo.url} is not permitted in project 'default'"
    diff = cli("diff", *args, "--argocd-namespace", env.namespace)
    assert diff.exit_code == 2 and forbidden in diff.stderr
    sync = cli("sync", *args, "--argocd-namespace", env.namespace)
    assert sync.exit_code == 2 and forbidden in sync.stdout and "ProjectForbidden" in sync.stdout
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is None
    free = cli("sync", *args)  # without the flag: no project rules
    assert free.exit_code == 0, free.output
    assert env.kube.get("v1", "ConfigMap", name="a", namespace=env.namespace) is not None


def test_without_the_crd_there_are_no_projects(kube: Kube, namespace: str) -> None:
    """A kind the server does not serve (as AppProject without Argo CD's CRDs): no project."""
    projects = ProjectsFrom(lambda ns, name: kube.get("argoproj.io/v1alpha1", "NoSuchKind",
                                                      name=name, namespace=ns), namespace)
    assert projects.get("default") is None
