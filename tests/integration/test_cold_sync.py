"""Cold sync near the API server's limit, on the real API server (issue 18, item 3).

What a sync costs is counted by the API server itself (``apiserver_request_total``, as
``bench/controller.py`` counts it): a new object costs its apply and nothing else (no
lookup, no read-back, no second dry run, no Event of its own). Parallel applies keep the
promises: a concurrent writer's value survives (409, re-read, retry), a failing wave
stops the sync, results come back in apply order, and the objects the comparison found
OutOfSync land first.
"""

from __future__ import annotations

import contextlib
import copy
import json
import ssl
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.reconcile.pipeline import Comparison, Pipeline
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.reconcile.status import proven_marks
from gitops_ray.render import application_from_flags
from gitops_ray.render.apps import Application
from gitops_ray.render.tools import RenderTools
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import SETTLED, Syncer
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import RecordStore, record_name
from gitops_ray.sync.request import SyncRequest
from gitops_ray.types import ResourceAction, ResourceKey
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env as SyncEnv
from tests.harness.pipeline import autoscaler_patch
from tests.harness.runtime import Controller, application
from tests.samples import raycluster, worker_group

CLUSTERS = 24


def api_requests(cp: LocalControlPlane) -> Counter[str]:
    """``apiserver_request_total`` of resource requests, by "VERB resource[ (dry run)]"."""
    request = urllib.request.Request(f"{cp.url}/metrics")
    request.add_header("Authorization", f"Bearer {cp.token}")
    context = ssl.create_default_context(cafile=str(cp.workdir / "ca.crt"))
    with urllib.request.urlopen(request, timeout=30, context=context) as resp:
        text = resp.read().decode()
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples if family.name == "apiserver_request" else ():
            labels = sample.labels
            if sample.name.endswith("_total") and labels.get("resource"):
                dry = " (dry run)" if labels.get("dry_run") else ""
                counts[f"{labels['verb']} {labels['resource']}{dry}"] += int(sample.value)
    return counts


def spent(before: Counter[str], after: Counter[str]) -> Counter[str]:
    return Counter({k: after[k] - before[k] for k in after if after[k] > before[k]})


@pytest.fixture(scope="module")
def quiet_plane() -> Iterator[LocalControlPlane]:
    """A control plane of its own: the API server counts every client's requests, and the
    shared one is busy deleting other tests' namespaces (every kind, listed and deleted)."""
    with LocalControlPlane() as cp:
        yield cp


def test_cold_sync_costs_at_most_two_requests_per_new_object(
        quiet_plane: LocalControlPlane, git_repo: GitRepo, tmp_path: Path) -> None:
    control_plane, kube, namespace = quiet_plane, Kube.connect(str(quiet_plane.kubeconfig)), "cold"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                field_manager="test")
    git_repo.commit({"rcs/all.yaml": [raycluster(f"rc-{i:02d}") for i in range(CLUSTERS)]})
    before = api_requests(control_plane)
    out = CliRunner().invoke(main, [
        "sync", "--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
        namespace, "--cache-dir", str(tmp_path / "cache"), "--repo", git_repo.url,
        "--path", "rcs", "--dest-namespace", namespace, "--name", "cold",
        "--sync-parallelism", "4"])
    cost = spent(before, api_requests(control_plane))
    assert out.exit_code == 0, out.output
    assert cost["APPLY rayclusters"] == CLUSTERS
    assert cost["GET rayclusters"] == 0  # no lookup, no read-back
    assert cost["APPLY rayclusters (dry run)"] == 0  # the apply response is the prediction
    assert cost["POST events"] == 1  # the app's, not one per object
    assert sum(cost.values()) <= 2 * CLUSTERS, dict(cost)

    status = CliRunner().invoke(main, ["status", "--kubeconfig", str(control_plane.kubeconfig),
                                       "--control-namespace", namespace, "-o", "json", "cold"])
    assert json.loads(status.stdout)[0]["sync"] == "Synced"  # the comparison after is right
    events = kube.list("v1", "Event", namespace)[0]
    assert [(e["reason"], e["involvedObject"]["name"]) for e in events] == [
        ("SyncSucceeded", record_name("cold"))]
    assert f"{CLUSTERS} created" in events[0]["message"]


class Env(SyncEnv):
    """test_sync's pipeline and store, with syncers of a given parallelism."""

    def parallel(self, parallelism: int) -> Reconciler:
        return Reconciler(self.pipeline, Syncer(self.kube, self.store, parallelism=parallelism,
                                                app_events=True))


@pytest.fixture
def env(kube: Kube, namespace: str, tmp_path: Path, helm_bin: Path) -> Env:
    return Env(kube, namespace, tmp_path, helm_bin)


def test_autoscaler_writes_between_parallel_applies_are_kept(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    names = [f"race-{i}" for i in range(6)]
    rcs = [raycluster(n, groups=[worker_group("cpu", replicas=1)]) for n in names]
    git_repo.commit({"manifests/rcs.yaml": rcs})
    app = env.app(git_repo, "race")
    assert env.parallel(4).sync(app).result.ok
    edited = copy.deepcopy(rcs)
    for rc in edited:
        rc["spec"]["rayVersion"] = "2.53.0"
    git_repo.commit({"manifests/rcs.yaml": edited})
    before = env.pipeline.compare(app)
    stale = {ResourceKey.of(o): o for o in (env.live(n) for n in names)}
    for i, name in enumerate(names):  # the autoscaler writes after our read
        autoscaler_patch(control_plane, env.namespace, name, [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3 + i}])

    request = SyncRequest(app, before.manifests(), before.revision, live=stale)
    result = Syncer(env.kube, env.store, parallelism=4).sync(request,
                                                             env.pipeline.rules(app))
    assert result.ok, result.message
    assert [r.action for r in result.resources] == [ResourceAction.CONFIGURED] * len(names)
    for i, name in enumerate(names):
        live = env.live(name)
        assert live["spec"]["rayVersion"] == "2.53.0"
        assert live["spec"]["workerGroupSpecs"][0]["replicas"] == 3 + i


def _cm(name: str, wave: int, value: object = "v") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name,
                         "annotations": {"argocd.argoproj.io/sync-wave": str(wave)}},
            "data": {"k": value}}


def test_parallel_sync_stops_at_the_first_wave_that_fails(env: Env, git_repo: GitRepo) -> None:
    first = [_cm(f"a-{i}", 0) for i in range(6)] + [_cm("a-bad", 0, value=["not", "text"])]
    git_repo.commit({"manifests/cms.yaml": [*first, _cm("later", 1)]})
    outcome = env.parallel(4).sync(env.app(git_repo, "waves"))

    assert not outcome.result.ok
    assert outcome.result.reason == Reason.APPLY_FAILED
    assert "a-bad" in outcome.result.message
    assert env.kube.get("v1", "ConfigMap", name="later", namespace=env.namespace) is None
    names = [r.key.name for r in outcome.result.resources]
    assert names == sorted(names)  # apply order, whatever order they landed in
    failed = [r for r in outcome.result.resources if r.action == ResourceAction.FAILED]
    assert [r.key.name for r in failed] == ["a-bad"]
    reasons = {(e["reason"], e["involvedObject"]["name"])
               for e in env.kube.list("v1", "Event", env.namespace)[0]}
    assert ("SyncFailed", record_name("waves")) in reasons  # the app's Event
    assert ("SyncFailed", "a-bad") in reasons  # and the object's own


def _synced_then_bumped(env: Env, git_repo: GitRepo, name: str, rcs: list[dict]
                        ) -> Application:
    """App ``name`` of ``rcs`` synced, then a commit bumping rc-3's rayVersion (not synced)."""
    git_repo.commit({"manifests/rcs.yaml": rcs})
    app = env.app(git_repo, name)
    assert env.parallel(1).sync(app).result.ok
    edited = copy.deepcopy(rcs)
    edited[3]["spec"]["rayVersion"] = "2.53.0"
    git_repo.commit({"manifests/rcs.yaml": edited}, "bump rc-3")
    return app


def test_changed_objects_land_first_then_the_rest_is_reasserted(
        env: Env, git_repo: GitRepo) -> None:
    app = _synced_then_bumped(env, git_repo, "order",
                              [raycluster(f"rc-{i}") for i in range(5)])

    heard: list[tuple[str, ResourceAction]] = []

    class Progress:
        def planned(self, count: int) -> None:
            pass

        def done(self, key: ResourceKey, action: ResourceAction) -> None:
            heard.append((key.name, action))

    outcome = env.parallel(4).sync(app, progress=Progress())  # a batch of its own first
    assert outcome.result.ok, outcome.result.message
    assert heard[0] == ("rc-3", ResourceAction.CONFIGURED)  # told as soon as it landed
    assert sorted(heard[1:]) == [(f"rc-{i}", ResourceAction.UNCHANGED) for i in (0, 1, 2, 4)]
    assert outcome.after is not None and outcome.after.diff.status == "Synced"
    assert env.live("rc-3")["spec"]["rayVersion"] == "2.53.0"
    events = {(e["reason"], e["involvedObject"]["name"])
              for e in env.kube.list("v1", "Event", env.namespace)[0]}
    assert ("ResourceConfigured", "rc-3") in events  # on the object a user describes
    assert not any(name.startswith("rc-") and name != "rc-3" for _, name in events)


@contextlib.contextmanager
def counting(kube: Kube) -> Iterator[Counter[tuple[str, str]]]:
    """Requests ``kube`` sends inside the block, by (verb, resource); dry runs included."""
    counts: Counter[tuple[str, str]] = Counter()

    def hook(verb: str, resource: str, _status: object, _seconds: object) -> None:
        counts[(verb, resource)] += 1

    kube.hooks.append(hook)
    try:
        yield counts
    finally:
        kube.hooks.remove(hook)


def test_a_commit_writes_what_changed_and_what_others_wrote_not_what_we_left_settled(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    """An object whose live resourceVersion is the one our apply of the same content left
    is not re-applied (it would come back unchanged): a commit costs one write for the
    changed object, one for an object the autoscaler wrote since, and no read-back. The
    record is written once, the inventory with the status, and not read."""
    app = _synced_then_bumped(env, git_repo, "settled", [
        raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(5)])
    autoscaler_patch(control_plane, env.namespace, "rc-1", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}])
    before = env.pipeline.compare(app)
    assert before.out_of_sync == {ResourceKey("ray.io", "RayCluster", env.namespace, "rc-3")}
    assert {k.name for k in before.settled} == {"rc-0", "rc-2", "rc-4"}

    with counting(env.kube) as sent:
        outcome = env.parallel(4).sync(app, before=before)
    assert outcome.result.ok, outcome.result.message
    actions = {r.key.name: (r.action, r.message) for r in outcome.result.resources}
    assert actions["rc-3"][0] == ResourceAction.CONFIGURED
    assert actions["rc-1"] == (ResourceAction.UNCHANGED, "")  # re-asserted: someone wrote
    assert {actions[f"rc-{i}"] for i in (0, 2, 4)} == {(ResourceAction.UNCHANGED, SETTLED)}
    assert sent[("apply", "rayclusters")] == 2  # rc-3 and rc-1, no dry run
    assert sent[("get", "rayclusters")] == sent[("list", "rayclusters")] == 0
    assert sent[("update", "configmaps")] == 1 and sent[("get", "configmaps")] == 0
    assert outcome.after is not None and outcome.after.diff.status == "Synced"
    assert [e.name for e in env.store.read("settled").inventory] == [
        f"rc-{i}" for i in range(5)]
    assert env.live("rc-1")["spec"]["workerGroupSpecs"][0]["replicas"] == 4  # kept
    assert env.live("rc-3")["spec"]["rayVersion"] == "2.53.0"

    with counting(env.kube) as sent:  # now all five are as we left them
        again = env.parallel(4).sync(app)
    assert again.result.ok and sent[("apply", "rayclusters")] == 0
    assert {r.message for r in again.result.resources} == {SETTLED}


def _synced_then_edited(env: Env, git_repo: GitRepo, name: str, *, count: int,
                        edited: str) -> tuple[Application, list[dict]]:
    """App ``name`` of ``count`` RayClusters, synced; then ``edited``'s rayVersion by hand."""
    rcs = [raycluster(f"rc-{i}") for i in range(count)]
    git_repo.commit({"manifests/rcs.yaml": rcs})
    app = env.app(git_repo, name)
    assert env.parallel(4).sync(app).result.ok
    env.kube.patch("ray.io/v1", "RayCluster", name=edited, namespace=env.namespace,
                   patch=[{"op": "replace", "path": "/spec/rayVersion", "value": "2.0.0"}],
                   field_manager="kubectl-edit")
    return app, rcs


def test_a_selective_sync_reads_none_of_the_objects_it_did_not_write(
        env: Env, git_repo: GitRepo) -> None:
    """Self-heal of one drifted object: the comparison after it keeps the others' verdict
    from the comparison before (no read), as a refresh from the watch cache would."""
    app, rcs = _synced_then_edited(env, git_repo, "heal", count=5, edited="rc-2")
    before = env.pipeline.compare(app)
    drifted = frozenset({ResourceKey("ray.io", "RayCluster", env.namespace, "rc-2")})
    assert before.out_of_sync == drifted

    with counting(env.kube) as sent:
        outcome = env.parallel(4).sync(app, only=drifted, before=before)
    assert outcome.result.ok, outcome.result.message
    assert [r.key for r in outcome.result.resources] == list(drifted)
    assert sent[("apply", "rayclusters")] == 1
    assert sent[("get", "rayclusters")] == sent[("list", "rayclusters")] == 0
    assert outcome.after is not None and outcome.after.diff.status == "Synced"
    assert env.live("rc-2")["spec"]["rayVersion"] == rcs[2]["spec"]["rayVersion"]


def _secret(name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": {"token": value}}


def test_a_new_owner_trusts_the_applied_marks_not_a_dry_run_per_object(
        env: Env, git_repo: GitRepo, kube: Kube, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane) -> None:
    """A replica that takes an app over (or restarts) has no memory of it: the record's
    applied marks tell it which live objects are exactly what our apply of the same
    content left, so it compares those without a dry run and does not re-apply them.
    An object someone else wrote since, and a Secret (never marked), cost a dry run."""
    rcs = [raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(4)]
    git_repo.commit({"manifests/rcs.yaml": [*rcs, _secret("creds", "s3cr3t-value")]})
    app = env.app(git_repo, "marks")
    assert env.parallel(4).sync(app).result.ok
    record = env.store.read("marks")
    assert sorted(record.applied) == [str(ResourceKey("ray.io", "RayCluster", env.namespace,
                                                      f"rc-{i}")) for i in range(4)]
    assert "s3cr3t" not in json.dumps(record.applied)  # and no Secret is marked
    autoscaler_patch(control_plane, env.namespace, "rc-1", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}])

    other = Kube.connect(str(control_plane.kubeconfig))  # the new owner, its own counts
    store = RecordStore(other, env.namespace)
    owner = Reconciler(Pipeline(other, GitSource(tmp_path / "other"), store,
                                tools=RenderTools(helm_bin=str(helm_bin))),
                       Syncer(other, store, parallelism=4))
    with counting(other) as sent:
        before = owner.pipeline.compare(app)
    assert before.diff.status == "Synced"
    assert sent[("apply", "rayclusters")] == 1  # rc-1's dry run: the autoscaler wrote it
    assert sent[("apply", "secrets")] == 1  # never marked
    # the Secret's dry run was a no-op: settled in memory, but its mark is never recorded
    assert {k.name for k in before.settled} == {"rc-0", "rc-2", "rc-3", "creds"}
    assert {k.name for k in before.proven} == {"creds"} and not proven_marks(before)

    with counting(other) as sent:
        outcome = owner.sync(app, before=before)
    assert outcome.result.ok, outcome.result.message
    assert sent[("apply", "rayclusters")] == 1  # rc-1 re-asserted, the others left alone
    assert env.live("rc-1")["spec"]["workerGroupSpecs"][0]["replicas"] == 3


def test_a_successor_prepares_an_app_leaving_only_gits_changes_to_the_owner(
        env: Env, git_repo: GitRepo, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane) -> None:
    """Standby (the replica that would take the app over, runtime.shards): rendered, every
    verdict the applied marks allow worked out (no write): an object the autoscaler wrote
    since costs a dry run here; one the new commit changed, and a Secret (never marked),
    are left to the owner, which dry-runs them anyway. The takeover's comparison then
    dry-runs only those and reaches the verdicts a fresh comparison does."""
    rcs = [raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(4)]
    secret = _secret("creds", "s3cr3t-value")  # never marked: left to the owner
    git_repo.commit({"manifests/rcs.yaml": [*rcs, secret]})
    app = env.app(git_repo, "standby")
    assert env.parallel(4).sync(app).result.ok
    autoscaler_patch(control_plane, env.namespace, "rc-1", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}])
    rcs[2]["spec"]["rayVersion"] = "2.53.0"
    sha = git_repo.commit({"manifests/rcs.yaml": [*rcs, secret]})

    other = Kube.connect(str(control_plane.kubeconfig))  # the successor, its own counts
    successor = Pipeline(other, GitSource(tmp_path / "successor"),
                         RecordStore(other, env.namespace),
                         tools=RenderTools(helm_bin=str(helm_bin)))
    versions = [env.live(f"rc-{i}")["metadata"]["resourceVersion"] for i in range(4)]
    with counting(other) as sent:
        assert successor.prepare_standby(app, revision=sha) == (3, 2)
    assert sent[("apply", "rayclusters")] == 1  # rc-1's dry run: the autoscaler wrote it
    assert not sent[("apply", "secrets")]
    assert not sent[("get", "secrets")]  # left to the owner before any read
    assert sent[("get", "rayclusters")] == 3  # not rc-2, which the commit changed
    assert {verb for verb, _ in sent} <= {"apply", "discovery", "get", "list"}
    assert [env.live(f"rc-{i}")["metadata"]["resourceVersion"] for i in range(4)] == versions

    with counting(other) as sent:
        taken = successor.compare(app, revision=sha)
    assert sent[("apply", "rayclusters")] == 1  # rc-2's, git changed it
    assert sent[("apply", "secrets")] == 1
    fresh = env.pipeline.compare(app, revision=sha)
    assert (taken.diff.status, taken.out_of_sync) == (fresh.diff.status, fresh.out_of_sync)
    assert {k.name for k in taken.out_of_sync} == {"rc-2"}
    # rc-0 and rc-3 by their marks, the Secret by its no-op dry run (never marked)
    assert {k.name for k in taken.settled} == {"rc-0", "rc-3", "creds"}


def test_the_successor_of_a_silent_owner_leaves_nothing_to_the_takeover(
        env: Env, git_repo: GitRepo, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane) -> None:
    """Once the owner has gone silent (runtime.shards), nobody else is dry-running or
    creating its objects: a thorough standby pass works out the verdicts of git's changes
    and of unmarked objects too, still writing nothing, and the takeover's comparison
    sends no dry run at all and reaches the verdicts a fresh comparison does."""
    rcs = [raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(3)]
    secret = _secret("creds", "s3cr3t-value")
    git_repo.commit({"manifests/rcs.yaml": [*rcs, secret]})
    app = env.app(git_repo, "silent")
    assert env.parallel(3).sync(app).result.ok
    rcs[2]["spec"]["rayVersion"] = "2.53.0"
    sha = git_repo.commit({"manifests/rcs.yaml": [*rcs, secret]})

    other = Kube.connect(str(control_plane.kubeconfig))  # the successor, its own counts
    successor = _successor(other, env.namespace, tmp_path, helm_bin, None)
    versions = [env.live(f"rc-{i}")["metadata"]["resourceVersion"] for i in range(3)]
    with counting(other) as sent:
        assert successor.prepare_standby(app, revision=sha, thorough=True) == (4, 0)
    assert sent[("apply", "rayclusters")] == 1  # rc-2's dry run: git changed it
    assert sent[("apply", "secrets")] == 1  # never marked
    assert [env.live(f"rc-{i}")["metadata"]["resourceVersion"] for i in range(3)] == versions

    with counting(other) as sent:
        taken = successor.compare(app, revision=sha)
    assert not sent[("apply", "rayclusters")] and not sent[("apply", "secrets")]
    fresh = env.pipeline.compare(app, revision=sha)
    assert (taken.diff.status, taken.out_of_sync) == (fresh.diff.status, fresh.out_of_sync)
    assert {k.name for k in taken.out_of_sync} == {"rc-2"}


@pytest.mark.parametrize("watched", [False, True], ids=["reads", "watch-cache"])
def test_verdicts_proven_by_dry_runs_before_the_owners_marks_are_settled_and_then_marked(
        env: Env, git_repo: GitRepo, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane, watched: bool) -> None:
    """Another replica compared the app while its owner was syncing it: after the objects
    landed but before the owner's record held their marks (a cold sync writes them
    last), so its verdicts came from dry runs. Each dry run answered with live itself,
    so they count as settled at once, and as proven (marks to record). Once the marks
    are there, the same live versions are settled by them, no dry run and nothing left to
    record: taking the app over, it re-applies none. With and without the controller's
    watch cache (its versions are a separate path)."""
    rcs = [raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(3)]
    git_repo.commit({"manifests/rcs.yaml": rcs})
    app = env.app(git_repo, "window")
    assert env.parallel(3).sync(app).result.ok
    name = record_name("window")
    cm = env.kube.get("v1", "ConfigMap", name=name, namespace=env.namespace)
    marks = cm["data"].pop("applied")
    cm = env.kube.replace(cm, field_manager="test")  # as it was before the owner's write

    other = Kube.connect(str(control_plane.kubeconfig))
    with contextlib.ExitStack() as stack:
        cache = LiveCache(other, on_event=lambda t, o: None) if watched else None
        if cache is not None:
            stack.callback(cache.stop)
        successor = _successor(other, env.namespace, tmp_path, helm_bin, cache)
        with counting(other) as sent:
            early = successor.compare(app)
        assert sent[("apply", "rayclusters")] == 3  # no marks: a dry run each
        assert early.diff.status == "Synced"
        assert early.settled == early.proven == {o.key for o in early.desired}
        assert set(proven_marks(early).values()) <= set(json.loads(marks).values())

        cm["data"]["applied"] = marks
        written = env.kube.replace(cm, field_manager="test")  # the owner's record write
        if cache is not None:
            eventually(lambda: (cache.get("v1", "ConfigMap", env.namespace, name) or {}).get(
                "metadata", {}).get("resourceVersion") ==
                written["metadata"]["resourceVersion"], message="the record in the cache")
        _settled_without_a_dry_run(env, app, other, successor)


def test_a_refresh_records_the_marks_its_dry_runs_proved(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, tmp_path: Path, helm_bin: Path, control_plane: LocalControlPlane
) -> None:
    """A sync cut short before its record write (its shard Lease lost) leaves the objects
    as our apply leaves them but no applied marks. The owner's next refresh dry-runs each
    one, each dry run answers with live itself, and the refresh records their marks as a
    sync would have, syncing nothing: the replica that takes the app over later compares
    it without a single dry run and re-applies nothing (issue 18's failover tail)."""
    env = Env(kube, namespace, tmp_path, helm_bin)
    git_repo.commit({"manifests/rcs.yaml": [raycluster(f"rc-{i}") for i in range(3)]})
    app = env.app(git_repo, "cut")
    assert env.parallel(3).sync(app).result.ok
    cm = kube.get("v1", "ConfigMap", name=record_name("cut"), namespace=namespace)
    marks = json.loads(cm["data"].pop("applied"))
    kube.replace(cm, field_manager="test")  # as the cut-short sync left it
    operation = env.store.load("cut").status["operation"]

    ctl = start_controller({"applications": [application("cut", git_repo.url, namespace)]})
    eventually(lambda: env.store.read("cut").applied == marks, message="marks recorded")
    assert ctl.status("cut")["operation"] == operation  # recorded by a refresh, not a sync
    assert ctl.status("cut")["sync"] == "Synced"

    other = Kube.connect(str(control_plane.kubeconfig))  # the successor's counts
    successor = _successor(other, namespace, tmp_path, helm_bin, None)
    with counting(other) as sent:
        taken = successor.compare(app)
        outcome = Reconciler(successor, Syncer(other, successor.store)).sync(app, before=taken)
    assert outcome.result.ok, outcome.result.message
    assert not sent[("apply", "rayclusters")]  # no dry run, nothing re-applied
    assert taken.settled == {o.key for o in taken.desired} and not taken.proven


def test_a_refresh_that_changed_nothing_hands_back_the_same_comparison(
        env: Env, git_repo: GitRepo, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane) -> None:
    """With the watch cache's count of events heard, a pass over an app nothing happened
    to returns its last comparison as is, with no request; an autoscaler's write, a
    Warning Event about a RayCluster, and a pass inside a sync's fresh block each make a
    new one, and the new one shows what changed."""
    rcs = [raycluster(f"rc-{i}", groups=[worker_group("cpu", replicas=1)]) for i in range(3)]
    git_repo.commit({"manifests/rcs.yaml": rcs})
    app = env.app(git_repo, "quiet")
    assert env.parallel(3).sync(app).result.ok
    other = Kube.connect(str(control_plane.kubeconfig))
    cache = LiveCache(other, on_event=lambda t, o: None)
    try:
        pipeline = _successor(other, env.namespace, tmp_path, helm_bin, cache)
        last = eventually(lambda: _same_twice(pipeline, app), message="a pass reused")
        with counting(other) as sent:
            assert pipeline.compare(app) is last
        assert not sent
        assert {k.name for k in last.settled} == {"rc-0", "rc-1", "rc-2"}

        autoscaler_patch(control_plane, env.namespace, "rc-1", [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}])
        scaled = eventually(lambda: _new_comparison(pipeline, app, last), message="rescaled")
        assert scaled.diff.status == "Synced"  # replicas are the autoscaler's
        assert {k.name for k in scaled.settled} == {"rc-0", "rc-2"}  # not as we left it

        last = eventually(lambda: _same_twice(pipeline, app), message="reused again")
        other.create({"apiVersion": "v1", "kind": "Event", "type": "Warning",
                      "metadata": {"name": "rc-0.oom", "namespace": env.namespace},
                      "involvedObject": {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                         "name": "rc-0", "namespace": env.namespace},
                      "reason": "InvalidRayClusterSpec", "message": "maxReplicas < minReplicas"},
                     field_manager="test")  # as the operator rejects a spec
        warned = eventually(lambda: _new_comparison(pipeline, app, last), message="warned")
        rejected = warned.resource_health[ResourceKey("ray.io", "RayCluster", env.namespace,
                                                      "rc-0")]
        assert rejected.status == "Degraded" and "maxReplicas" in rejected.message

        with cache.fresh(), counting(other) as sent:
            fresh = pipeline.compare(app)
        assert fresh is not warned and sent[("get", "rayclusters")] == 3
    finally:
        cache.stop()


def _same_twice(pipeline: Pipeline, app: Application) -> Comparison | None:
    first = pipeline.compare(app)
    return first if pipeline.compare(app) is first else None


def _new_comparison(pipeline: Pipeline, app: Application, last: Comparison
                    ) -> Comparison | None:
    comparison = pipeline.compare(app)
    return comparison if comparison is not last else None


def _successor(kube: Kube, namespace: str, tmp_path: Path, helm_bin: Path,
               cache: LiveCache | None) -> Pipeline:
    tools = RenderTools(helm_bin=str(helm_bin))
    if cache is None:
        return Pipeline(kube, GitSource(tmp_path / "successor"), RecordStore(kube, namespace),
                        tools=tools)
    return Pipeline(kube, GitSource(tmp_path / "successor"),
                    RecordStore(kube, namespace, lookup=cache.get), tools=tools,
                    live=cache.get, live_version=cache.version, events=cache.ray,
                    generation=cache.generation)


def _settled_without_a_dry_run(env: Env, app: Application, other: Kube,
                               successor: Pipeline) -> None:
    with counting(other) as sent:
        later = successor.compare(app)
    assert not sent[("apply", "rayclusters")]
    assert {k.name for k in later.settled} == {"rc-0", "rc-1", "rc-2"}
    assert not later.proven  # the record has their marks now
    with counting(other) as sent:
        outcome = Reconciler(successor, Syncer(other, successor.store)).sync(app, before=later)
    assert outcome.result.ok, outcome.result.message
    assert not sent[("apply", "rayclusters")]  # nothing re-applied


def test_a_damaged_applied_mark_costs_a_dry_run_not_a_wrong_verdict(
        env: Env, git_repo: GitRepo, kube: Kube, tmp_path: Path, helm_bin: Path,
        control_plane: LocalControlPlane) -> None:
    app, _ = _synced_then_edited(env, git_repo, "damaged", count=2, edited="rc-0")
    name = record_name("damaged")
    cm = env.kube.get("v1", "ConfigMap", name=name, namespace=env.namespace)
    marks = json.loads(cm["data"]["applied"])
    key0 = str(ResourceKey("ray.io", "RayCluster", env.namespace, "rc-0"))
    live_rv = env.live("rc-0")["metadata"]["resourceVersion"]
    marks[key0] = f"{live_rv}/{marks[key0].split('/')[1][::-1]}"  # right version, wrong digest
    for data in (json.dumps(marks), "not json", "[1, 2]"):
        cm["data"]["applied"] = data
        cm = env.kube.replace(cm, field_manager="test")
        fresh = Pipeline(kube, GitSource(tmp_path / "fresh"), RecordStore(kube, env.namespace),
                         tools=RenderTools(helm_bin=str(helm_bin)))
        comparison = fresh.compare(app)
        assert comparison.out_of_sync == {ResourceKey("ray.io", "RayCluster", env.namespace,
                                                      "rc-0")}, data
        assert not comparison.settled & comparison.out_of_sync


def _reads(kube: Kube) -> Counter[str]:
    """GETs and LISTs sent so far, whatever they answered (200 or 404)."""
    reads: Counter[str] = Counter()
    for (verb, _), n in kube.stats.items():
        if verb in ("get", "list"):
            reads[verb] += n
    return reads


def test_a_comparison_lists_an_apps_objects_once_and_falls_back_to_gets_past_the_bound(
        control_plane: LocalControlPlane, namespace: str, git_repo: GitRepo, tmp_path: Path,
        helm_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kube = Kube.connect(str(control_plane.kubeconfig))  # its own request counts
    store = RecordStore(kube, namespace)
    pipeline = Pipeline(kube, GitSource(tmp_path / "cache"), store,
                        tools=RenderTools(helm_bin=str(helm_bin)))
    git_repo.commit({"manifests/cms.yaml": [_cm(f"mine-{i}", 0) for i in range(3)]})
    app = application_from_flags(name="lists", repo_url=git_repo.url, path="manifests",
                                 dest_namespace=namespace)
    assert Reconciler(pipeline, Syncer(kube, store)).sync(app).result.ok

    before = _reads(kube)
    comparison = pipeline.compare(app)
    assert comparison.diff.status == "Synced"
    assert set(comparison.live) == {o.key for o in comparison.desired}
    assert _reads(kube)["list"] - before["list"] == 1
    assert _reads(kube)["get"] - before["get"] <= 2  # the app's record, not its objects

    for i in range(10):  # someone else's ConfigMaps in the same namespace
        kube.create({**_cm(f"theirs-{i}", 0), "metadata": {"name": f"theirs-{i}",
                                                            "namespace": namespace}},
                    field_manager="someone")
    monkeypatch.setattr("gitops_ray.reconcile.live.LIST_BOUND", 4)  # 4 x 3 < 13 listed
    before = _reads(kube)
    comparison = pipeline.compare(app)
    assert comparison.diff.status == "Synced"
    assert comparison.live == {}  # past the bound: nothing kept from the LIST ...
    assert _reads(kube)["get"] - before["get"] >= 3  # ... and one GET per object instead


def test_pods_coming_and_going_cost_health_not_a_dry_run(
        control_plane: LocalControlPlane, namespace: str, git_repo: GitRepo, tmp_path: Path,
        helm_bin: Path) -> None:
    """A RayCluster's diff is reused while git's object and the live one are the same;
    its Pods (what a scaling autoscaler changes all day) only make health be assessed
    again, with the Pods read, and send no dry run."""
    kube = Kube.connect(str(control_plane.kubeconfig))  # its own request counts
    requests: Counter[tuple[str, str]] = Counter()
    kube.hooks.append(lambda verb, resource, _status, _seconds: requests.update(
        [(verb, resource)]))
    store = RecordStore(kube, namespace)
    pipeline = Pipeline(kube, GitSource(tmp_path / "cache"), store,
                        tools=RenderTools(helm_bin=str(helm_bin)))
    git_repo.commit({"rcs/rc.yaml": [raycluster("rc-pods")]})
    app = application_from_flags(name="pods", repo_url=git_repo.url, path="rcs",
                                 dest_namespace=namespace)
    assert Reconciler(pipeline, Syncer(kube, store)).sync(app).result.ok
    pipeline.compare(app)  # remembers the diff of the live object as it is now

    def dry_runs_and_pod_lists() -> tuple[int, int]:
        return requests[("apply", "rayclusters")], requests[("list", "pods")]

    applies, pod_lists = dry_runs_and_pod_lists()
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "rc-pods-head", "namespace": namespace,
        "labels": {"ray.io/cluster": "rc-pods", "ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}},
        field_manager="test")
    comparison = pipeline.compare(app)
    assert comparison.diff.status == "Synced"
    assert dry_runs_and_pod_lists() == (applies, pod_lists + 1)  # Pods read, no dry run
