"""Sync against the real API server: the autoscaler's fields survive, git edits land,
concurrent writers are not clobbered, and nothing is pruned by accident."""

from __future__ import annotations

import copy
from pathlib import Path

from gitops_ray.kube import Kube
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore
from gitops_ray.sync.request import SyncRequest
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env, autoscaler_patch, groups_by_name
from tests.samples import raycluster, worker_group


def test_git_edits_land_and_autoscaler_values_survive(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    rc = raycluster("ray", groups=[worker_group("cpu", replicas=1),
                                   worker_group("gpu", replicas=0)])
    git_repo.commit({"manifests/rc.yaml": rc})
    app = env.app(git_repo)
    first = env.reconciler.sync(app)
    assert first.result.ok, first.result.message
    assert first.after.diff.status == "Synced"

    autoscaler_patch(control_plane, env.namespace, "ray", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 5},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
         "value": {"workersToDelete": ["ray-cpu-abc"]}}])
    assert env.pipeline.compare(app).diff.status == "Synced"  # autoscaler is not drift

    edited = copy.deepcopy(rc)
    edited["spec"]["workerGroupSpecs"] = [worker_group("cpu", replicas=1, cpu="2"),
                                          worker_group("big", replicas=2, cpu="4")]
    git_repo.commit({"manifests/rc.yaml": edited}, "edit cpu template, add big, drop gpu")
    second = env.reconciler.sync(app)
    assert second.result.ok, second.result.message

    groups = groups_by_name(env.live("ray"))
    assert list(groups) == ["cpu", "big"]
    cpu = groups["cpu"]
    assert cpu["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    assert cpu["replicas"] == 5
    assert cpu["scaleStrategy"] == {"workersToDelete": ["ray-cpu-abc"]}
    assert groups["big"]["replicas"] == 2
    assert second.after.diff.status == "Synced"


def test_builtin_rules_off_shows_autoscaler_drift(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("ray")})
    app = env.app(git_repo)
    assert env.reconciler.sync(app).result.ok
    autoscaler_patch(control_plane, env.namespace, "ray", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}])
    strict = Pipeline(env.kube, env.pipeline.source, env.store, builtin_rules=False)
    assert strict.compare(app).diff.status == "OutOfSync"
    assert env.pipeline.compare(app).diff.status == "Synced"


def test_autoscaler_write_between_read_and_write_is_kept(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    rc = raycluster("race", groups=[worker_group("cpu", replicas=1)])
    git_repo.commit({"manifests/rc.yaml": rc})
    app = env.app(git_repo, name="race")
    assert env.reconciler.sync(app).result.ok
    edited = copy.deepcopy(rc)
    edited["spec"]["rayVersion"] = "2.53.0"
    git_repo.commit({"manifests/rc.yaml": edited})
    before = env.pipeline.compare(app)

    def stale_then_autoscale(obj: dict) -> dict | None:
        stale = env.kube.get("ray.io/v1", obj["kind"], name=obj["metadata"]["name"],
                             namespace=env.namespace)
        autoscaler_patch(control_plane, env.namespace, "race", [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 9}])
        return stale

    syncer = Syncer(env.kube, env.store, live_lookup=stale_then_autoscale)
    result = syncer.sync(SyncRequest(app, before.manifests(), before.revision),
                         env.pipeline.rules(app))
    assert result.ok, result.message
    live = env.live("race")
    assert live["spec"]["rayVersion"] == "2.53.0"
    assert live["spec"]["workerGroupSpecs"][0]["replicas"] == 9


def test_an_object_created_after_it_was_seen_absent_is_not_overwritten(
        env: Env, git_repo: GitRepo) -> None:
    """A believed-absent object is applied with a version no object has: if someone
    created it since (a stale cache, another writer), the apply is refused, the sync
    reads it and keeps its values at ignored paths instead of writing git's."""
    rc = raycluster("late", groups=[worker_group("cpu", replicas=1)])
    git_repo.commit({"manifests/rc.yaml": rc})
    app = env.app(git_repo, name="late")
    before = env.pipeline.compare(app)
    assert before.diff.status == "OutOfSync"  # nothing live yet
    theirs = copy.deepcopy(rc)
    theirs["metadata"]["namespace"] = env.namespace
    theirs["spec"]["workerGroupSpecs"][0]["replicas"] = 9

    def absent_then_created(obj: dict) -> dict | None:
        if env.live("late") is None:
            env.kube.create(theirs, field_manager="someone")
        return None  # what a cache that has not heard of it yet says

    refused = env.kube.stats[("apply", 409)]
    syncer = Syncer(env.kube, env.store, live_lookup=absent_then_created)
    result = syncer.sync(SyncRequest(app, before.manifests(), before.revision),
                         env.pipeline.rules(app))
    assert result.ok, result.message
    assert env.live("late")["spec"]["workerGroupSpecs"][0]["replicas"] == 9
    assert env.kube.stats[("apply", 409)] == refused + 1  # refused once, then applied

def _cm(name: str, **annotations: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": annotations or None},
            "data": {"k": "v"}}


def test_prune_deletes_only_what_this_app_owns(env: Env, git_repo: GitRepo,
                                               tmp_path: Path) -> None:
    keep = _cm("keep", **{"argocd.argoproj.io/sync-options": "Prune=false"})
    git_repo.commit({"manifests/a.yaml": [_cm("gone"), keep, _cm("stays")]})
    app = env.app(git_repo, name="owner")
    assert env.reconciler.sync(app).result.ok

    other_repo = GitRepo(tmp_path / "other")
    other_repo.commit({"manifests/b.yaml": [_cm("other-app")]})
    assert env.reconciler.sync(env.app(other_repo, name="other")).result.ok
    env.kube.create({**_cm("unmanaged"), "metadata": {"name": "unmanaged",
                                                      "namespace": env.namespace}},
                    field_manager="someone")

    git_repo.commit({"manifests/a.yaml": [_cm("stays")]}, "remove gone and keep")
    outcome = env.reconciler.sync(app, prune=True)
    assert outcome.result.ok, outcome.result.message
    actions = {str(r.key): r.action for r in outcome.result.resources}
    # Foreground deletion finishes when the garbage collector says so: either is honest.
    assert actions[f"ConfigMap:{env.namespace}/gone"] in ("pruned", "deleting")
    assert actions[f"ConfigMap:{env.namespace}/keep"] == "prune-skipped"
    eventually(lambda: env.live("gone", "ConfigMap", "v1") is None, message="gone deleted")
    for name in ("keep", "stays", "other-app", "unmanaged"):
        assert env.live(name, "ConfigMap", "v1") is not None, name
    # Prune=false keeps the object OutOfSync, as in Argo CD.
    assert outcome.after.diff.status == "OutOfSync"


def test_empty_render_is_never_pruned(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("precious")]})
    app = env.app(git_repo, name="empty")
    assert env.reconciler.sync(app).result.ok
    git_repo.commit({"manifests/a.yaml": None, "manifests/README.md": "nothing here"})
    outcome = env.reconciler.sync(app, prune=True)
    assert not outcome.result.ok
    assert "render is empty" in outcome.result.message
    assert env.live("precious", "ConfigMap", "v1") is not None
    allowed = env.app(git_repo, name="empty", allow_empty=True)
    assert env.reconciler.sync(allowed, prune=True).result.ok
    eventually(lambda: env.live("precious", "ConfigMap", "v1") is None, message="pruned")


HOLD = "gitops-ray.io/test-hold"


def hold(kube: Kube, namespace: str, name: str, finalizers: list[str]) -> None:
    """Set the ConfigMap's finalizers, as the controller that owns a finalizer would."""
    kube.patch("v1", "ConfigMap", name=name, namespace=namespace,
               patch={"metadata": {"finalizers": finalizers}},
               content_type="application/merge-patch+json", field_manager="tests")


def test_prune_reports_deleting_until_the_object_is_gone(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [_cm("held"), _cm("stays")]})
    app = env.app(git_repo, name="held")
    assert env.reconciler.sync(app).result.ok
    hold(env.kube, env.namespace, "held", [HOLD])
    git_repo.commit({"manifests/a.yaml": [_cm("stays")]}, "remove held")
    key = f"ConfigMap:{env.namespace}/held"

    for attempt in ("first prune", "prune again while it is deleting"):
        outcome = env.reconciler.sync(app, prune=True)
        assert outcome.result.ok, (attempt, outcome.result.message)
        assert {str(r.key): r.action for r in outcome.result.resources}[key] == "deleting"
        assert [str(k) for k in outcome.result.deleting] == [key]
        assert env.live("held", "ConfigMap", "v1")["metadata"]["deletionTimestamp"]
        assert outcome.after is not None and outcome.after.diff.status == "OutOfSync"
        assert {str(r.key): r.reason for r in outcome.after.diff.resources}[key] == "deleting"
        record = env.store.load("held")
        assert record.status["sync"] == "OutOfSync"
        assert "held" in [e.name for e in record.inventory]  # still tracked

    finalizers = env.live("held", "ConfigMap", "v1")["metadata"]["finalizers"]
    hold(env.kube, env.namespace, "held", [f for f in finalizers if f != HOLD])
    eventually(lambda: env.live("held", "ConfigMap", "v1") is None, message="held deleted")
    assert env.pipeline.compare(app).diff.status == "Synced"
    final = env.reconciler.sync(app, prune=True)
    assert final.result.ok and final.result.resources  # "stays": unchanged
    assert key not in {str(r.key) for r in final.result.resources}
    assert [e.name for e in env.store.load("held").inventory] == ["stays"]


def test_invalid_raycluster_applies_nothing_and_other_apps_sync(
        env: Env, git_repo: GitRepo, tmp_path: Path) -> None:
    bad = raycluster("bad", groups=[worker_group("a", min_replicas=3, max_replicas=1)])
    git_repo.commit({"manifests/a.yaml": [_cm("before-bad"), bad]})
    outcome = env.reconciler.sync(env.app(git_repo, name="bad-app"))
    assert not outcome.result.ok
    assert "minReplicas (3) is greater than maxReplicas (1)" in outcome.result.message
    assert env.live("before-bad", "ConfigMap", "v1") is None
    assert env.live("bad") is None

    good_repo = GitRepo(tmp_path / "good")
    good_repo.commit({"manifests/rc.yaml": raycluster("good")})
    assert env.reconciler.sync(env.app(good_repo, name="good-app")).result.ok
    assert env.live("good") is not None


def test_status_is_persisted(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("st")})
    app = env.app(git_repo, name="st")
    outcome = env.reconciler.sync(app)
    record = RecordStore(env.kube, env.namespace).load("st")
    assert record.status["sync"] == "Synced"
    assert record.status["revision"] == outcome.before.revision
    assert record.status["history"][0]["phase"] == "Succeeded"
    assert [e.name for e in record.inventory] == ["st"]
    events, _ = env.kube.list("v1", "Event", env.namespace)
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
    assert not any(name == "st" for name, _ in reasons)  # created: no Event of its own
