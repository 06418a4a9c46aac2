"""Argo CD sync options, each from where a user writes it to what happens in the cluster.

The options come in through the seam users have: ``spec.syncPolicy.syncOptions`` of the
Application or the resource annotation ``argocd.argoproj.io/sync-options``; the effect is
read back from the real API server (objects, finalizers, owner references), or, for
``ApplyOutOfSyncOnly``, from the writes the API server received.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.apps import SyncPolicy
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.prune import PRUNE_CONFIRM_UNSUPPORTED
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env

OPTIONS = "argocd.argoproj.io/sync-options"
HOLD = "test.gitops-ray.io/hold"


def config_map(name: str, *options: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if options:
        meta["annotations"] = {OPTIONS: ",".join(options)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def edit_by_hand(kube: Kube, namespace: str, name: str, data: dict[str, str]) -> None:
    kube.patch("v1", "ConfigMap", name=name, namespace=namespace, patch={"data": data},
               content_type="application/merge-patch+json", field_manager="kubectl-edit")


def data_of(env: Env, name: str) -> dict[str, str]:
    live = env.live(name, "ConfigMap", "v1")
    assert live is not None, name
    return dict(live.get("data") or {})


def test_replace_true_replaces_instead_of_merging(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("replaced", "Replace=true"),
                                          config_map("applied")]})
    app = env.app(git_repo, name="replace")
    assert env.reconciler.sync(app).result.ok
    for name in ("replaced", "applied"):
        edit_by_hand(env.kube, env.namespace, name, {"extra": "by hand"})

    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    assert data_of(env, "replaced") == {"k": "v"}  # PUT: the object is git's, exactly
    assert data_of(env, "applied") == {"k": "v", "extra": "by hand"}  # SSA keeps others'

    git_repo.commit({"wide/b.yaml": [config_map("app-wide")]}, "app-level option")
    wide = env.app(git_repo, name="replace-wide", path="wide",
                   sync_options=("Replace=true",))
    assert env.reconciler.sync(wide).result.ok
    edit_by_hand(env.kube, env.namespace, "app-wide", {"extra": "by hand"})
    assert env.reconciler.sync(wide).result.ok
    assert data_of(env, "app-wide") == {"k": "v"}


def test_apply_out_of_sync_only_writes_only_what_drifted(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("steady"), config_map("drifting")]})

    def applies_during_sync(**policy: Any) -> list[str]:
        app = env.app(git_repo, name="oos", **policy)
        assert env.reconciler.sync(app).result.ok
        edit_by_hand(env.kube, env.namespace, "drifting", {"k": "edited"})
        # In sync, but edited and put back by hand: its value is someone else's now, so
        # applying it is not a no-op (else it is settled: not re-applied).
        edit_by_hand(env.kube, env.namespace, "steady", {"k": "edited"})
        edit_by_hand(env.kube, env.namespace, "steady", {"k": "v"})
        watched = Kube.connect(str(control_plane.kubeconfig))
        seen: list[str] = []
        watched.hooks.append(lambda verb, res, code, s: seen.append(res)
                             if verb == "apply" else None)
        outcome = Reconciler(env.pipeline, Syncer(watched, env.store)).sync(app)
        assert outcome.result.ok, outcome.result.message
        assert data_of(env, "drifting") == {"k": "v"}
        return seen

    assert applies_during_sync() == ["configmaps", "configmaps"]  # a full sync: both
    assert applies_during_sync(sync_options=("ApplyOutOfSyncOnly=true",)) == ["configmaps"]


def test_create_namespace_true_creates_the_destination(env: Env, git_repo: GitRepo,
                                                       kube: Kube) -> None:
    target = f"{env.namespace}-made"
    git_repo.commit({"manifests/a.yaml": [config_map("inside")]})
    app = env.app(git_repo, name="mkns")
    app = replace(app, destination=replace(app.destination, namespace=target))
    try:
        without = env.reconciler.sync(app)
        assert not without.result.ok  # the namespace does not exist and nobody creates it
        assert kube.get("v1", "Namespace", name=target) is None

        creating = replace(app, sync_policy=SyncPolicy(sync_options=("CreateNamespace=true",)))
        outcome = env.reconciler.sync(creating)
        assert outcome.result.ok, outcome.result.message
        assert kube.get("v1", "Namespace", name=target) is not None
        assert kube.get("v1", "ConfigMap", name="inside", namespace=target) is not None

        git_repo.commit({"manifests/a.yaml": [config_map("inside"), config_map("next")]})
        asked: list[str] = []
        env.kube.hooks.append(lambda verb, resource, *_: asked.append(f"{verb} {resource}"))
        again = env.reconciler.sync(creating)  # "inside" is live there: not asked again
        assert again.result.ok and "get namespaces" not in asked, asked
        assert kube.get("v1", "ConfigMap", name="next", namespace=target) is not None
    finally:
        with contextlib.suppress(Exception):
            kube.delete("v1", "Namespace", name=target)


@pytest.mark.parametrize("policy", ["foreground", "background", "orphan"])
def test_prune_propagation_policy(env: Env, git_repo: GitRepo, kube: Kube,
                                  policy: str) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("parent"), config_map("keeper")]})
    app = env.app(git_repo, name=f"pp-{policy}",
                  sync_options=(f"PrunePropagationPolicy={policy}",))
    assert env.reconciler.sync(app).result.ok
    child = _dependent_of(kube, env.namespace, "parent")

    git_repo.commit({"manifests/a.yaml": [config_map("keeper")]}, "drop the parent")
    outcome = env.reconciler.sync(app, prune=True)
    assert outcome.result.ok, outcome.result.message
    action = {str(r.key): r.action for r in outcome.result.resources}[
        f"ConfigMap:{env.namespace}/parent"]
    # Foreground: the owner waits for its dependent, so the deletion is still under way;
    # orphan: it waits for the collector to drop the owner references (usually quick).
    assert action in {"foreground": {"deleting"}, "background": {"pruned"},
                      "orphan": {"pruned", "deleting"}}[policy]
    try:
        _expect_propagation(kube, env.namespace, policy, child)
    finally:
        _release(kube, env.namespace, child)
    eventually(lambda: _get(kube, env.namespace, "parent") is None, message="parent gone")


def _dependent_of(kube: Kube, namespace: str, owner: str) -> str:
    """A ConfigMap owned by ``owner`` that blocks its owner's foreground deletion."""
    parent = _get(kube, namespace, owner)
    assert parent is not None
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner,
           "uid": parent["metadata"]["uid"], "blockOwnerDeletion": True}
    kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": f"{owner}-child", "namespace": namespace,
                              "finalizers": [HOLD], "ownerReferences": [ref]}},
                field_manager="test")
    return f"{owner}-child"


def _expect_propagation(kube: Kube, namespace: str, policy: str, child: str) -> None:
    if policy == "foreground":  # the owner waits, marked, until its dependent is gone
        parent = _get(kube, namespace, "parent")
        assert parent is not None
        assert "foregroundDeletion" in parent["metadata"].get("finalizers", [])
        eventually(lambda: _deleting(kube, namespace, child), message="dependent deleted")
    elif policy == "background":  # the owner goes at once, the collector follows
        assert _get(kube, namespace, "parent") is None
        eventually(lambda: _deleting(kube, namespace, child), message="dependent deleted")
    else:  # orphan: the dependent stays and loses its owner reference
        eventually(lambda: not (_get(kube, namespace, child) or {}).get(
            "metadata", {}).get("ownerReferences"), message="owner reference removed")
        assert not _deleting(kube, namespace, child)


def _get(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.get("v1", "ConfigMap", name=name, namespace=namespace)


def _deleting(kube: Kube, namespace: str, name: str) -> bool:
    return bool((_get(kube, namespace, name) or {}).get("metadata", {}).get(
        "deletionTimestamp"))


def _release(kube: Kube, namespace: str, name: str) -> None:
    with contextlib.suppress(Exception):
        kube.patch("v1", "ConfigMap", name=name, namespace=namespace,
                   patch={"metadata": {"finalizers": None}},
                   content_type="application/merge-patch+json", field_manager="test")


def test_prune_confirm_is_unsupported_kept_and_said_so(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("precious", "Prune=confirm"),
                                          config_map("plain")]})
    app = env.app(git_repo, name="confirm")
    assert env.reconciler.sync(app).result.ok

    git_repo.commit({"manifests/a.yaml": [config_map("plain")]}, "drop precious")
    outcome = env.reconciler.sync(app, prune=True)
    assert outcome.result.ok, outcome.result.message
    assert env.live("precious", "ConfigMap", "v1") is not None
    result = {str(r.key): r for r in outcome.result.resources}[
        f"ConfigMap:{env.namespace}/precious"]
    assert (result.action, result.message) == ("prune-skipped", PRUNE_CONFIRM_UNSUPPORTED)
    operation = env.store.load("confirm").status["operation"]
    assert "Prune=confirm is not supported" in operation["message"]
    assert outcome.after is not None and outcome.after.diff.status == "OutOfSync"
