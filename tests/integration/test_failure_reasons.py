"""Each sync step's failure is a recorded operation with that step's reason (issue 14 §3).

Through the real :class:`Reconciler` (as ``gitops-ray sync`` and the controller run it),
with failures the API server produces itself: a ServiceAccount's Role that lacks a verb,
a render that is empty, an invalid RayCluster. And the one exception to the contract: a
client whose lease is gone still aborts the sync with :class:`LeaseExpired` and records
nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube, LeaseExpired
from gitops_ray.kube.fence import WriteFence
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.tools import RenderTools
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore, record_name
from localcluster import LocalControlPlane
from tests.faults.test_readiness import grant
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.harness.process import service_account_kubeconfig
from tests.integration.test_sync import _cm
from tests.samples import raycluster, worker_group

NAMESPACED = [{"apiGroups": ["", "ray.io"], "resources": ["configmaps", "events",
                                                           "rayclusters"], "verbs": ["*"]}]


def as_account(env: Env, control_plane: LocalControlPlane, tmp: Path,
               rules: list[dict[str, Any]], helm: Path) -> Env:
    """``env`` again, but every request made as a ServiceAccount with exactly ``rules``."""
    env.kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "limited", "namespace": env.namespace}},
                    field_manager="tests")
    grant(env.kube, "Role", "limited", env.namespace, "limited", rules)
    config = service_account_kubeconfig(env.kube, control_plane, namespace=env.namespace,
                                        name="limited", path=tmp / "limited.kubeconfig")
    return Env(Kube.connect(str(config)), env.namespace, tmp / "limited", helm)


def operation(env: Env, app: str) -> dict[str, Any]:
    return dict(RecordStore(env.kube, env.namespace).load(app).status["operation"])


def test_a_namespace_that_cannot_be_created_is_namespace_failed(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane, tmp_path: Path,
        helm_bin: Path) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("in-missing-ns")]})
    limited = as_account(env, control_plane, tmp_path, NAMESPACED, helm_bin)
    app = limited.app(git_repo, name="ns-app", sync_options=("CreateNamespace=true",))
    app = replace(app, destination=replace(app.destination, namespace=f"{env.namespace}-x"))
    before = env.pipeline.compare(app)  # the Role cannot read there: compare as admin
    outcome = limited.reconciler.sync(app, before=before)
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "NamespaceFailed")
    assert "forbidden" in outcome.result.message and outcome.unrecorded is None
    recorded = operation(env, "ns-app")
    assert (recorded["phase"], recorded["reason"]) == ("Failed", "NamespaceFailed")
    assert env.kube.get("v1", "Namespace", name=f"{env.namespace}-x") is None


def test_an_object_that_cannot_be_read_or_written_is_apply_failed(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane, tmp_path: Path,
        helm_bin: Path) -> None:
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "not-allowed", "namespace": env.namespace}}
    git_repo.commit({"manifests/a.yaml": [raycluster("rc"), account]})
    limited = as_account(env, control_plane, tmp_path, NAMESPACED, helm_bin)
    app = limited.app(git_repo, name="apply-app")
    outcome = limited.reconciler.sync(app, before=env.pipeline.compare(app))
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "ApplyFailed")
    failed = [r for r in outcome.result.resources if r.action == "failed"]
    assert [r.key.name for r in failed] == ["not-allowed"]
    assert operation(env, "apply-app")["reason"] == "ApplyFailed"


def test_validation_and_empty_render_refusals_carry_their_reasons(
        env: Env, git_repo: GitRepo) -> None:
    bad = raycluster("bad", groups=[worker_group("a", min_replicas=3, max_replicas=1)])
    git_repo.commit({"manifests/a.yaml": [bad]})
    invalid = env.reconciler.sync(env.app(git_repo, name="invalid-app"))
    assert invalid.result.reason == "ValidationFailed"
    assert operation(env, "invalid-app")["reason"] == "ValidationFailed"

    git_repo.commit({"manifests/a.yaml": None, "manifests/README.md": "nothing"})
    empty = env.reconciler.sync(env.app(git_repo, name="empty-app"), prune=True)
    assert empty.result.reason == "EmptyRender"
    assert operation(env, "empty-app")["reason"] == "EmptyRender"


def test_a_comparison_after_the_sync_that_fails_is_compare_failed(
        env: Env, git_repo: GitRepo, tmp_path: Path, helm_bin: Path) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("compared")})
    app = env.app(git_repo, name="compare-app")
    before = env.pipeline.compare(app)
    shutil.rmtree(git_repo.bare)  # the repo is gone by the time the sync compares again
    other = Env(env.kube, env.namespace, tmp_path / "other", helm_bin)  # no render cached
    outcome = other.reconciler.sync(app, before=before)
    assert (outcome.result.phase, outcome.result.reason) == ("Failed", "CompareFailed")
    assert outcome.after is None and env.live("compared") is not None  # it was applied
    status = RecordStore(env.kube, env.namespace).load("compare-app").status
    assert (status["operation"]["reason"], status["sync"]) == ("CompareFailed", "Unknown")
    assert status["error"].startswith("source: ")


def test_a_lost_lease_aborts_the_sync_and_records_nothing(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane, tmp_path: Path,
        helm_bin: Path) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("fenced")})
    kube = Kube.connect(str(control_plane.kubeconfig))
    kube.fence = WriteFence()  # never granted: every write is refused
    store = RecordStore(kube, env.namespace)
    pipeline = Pipeline(kube, GitSource(tmp_path / "fenced"), store,
                        tools=RenderTools(helm_bin=str(helm_bin)))
    reconciler = Reconciler(pipeline, Syncer(kube, store))
    with pytest.raises(LeaseExpired, match="write refused"):
        reconciler.sync(env.app(git_repo, name="fenced-app"), prune=True)
    assert env.kube.get("v1", "ConfigMap", name=record_name("fenced-app"),
                        namespace=env.namespace) is None
    assert env.live("fenced") is None
