"""The controller end to end: real API server, real git, real webhooks and watches.

Each test runs a :class:`Runtime` in-process (threads, real sockets) against the test
namespace, which doubles as the control namespace. Waits use deadlines on conditions,
never sleeps followed by assertions about time.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from gitops_ray.kube import Kube
from gitops_ray.reconcile.autosync import Backoff
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import (
    RC_API,
    SECRET,
    Controller,
    application,
    metric_value,
    push_payload,
    ray_version,
    with_version,
)
from tests.samples import raycluster


def test_webhook_push_is_applied_and_forgeries_are_rejected(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    rc = raycluster("hooked")
    git_repo.commit({"apps/hooked.yaml": application("hooked", git_repo.url, namespace),
                     "manifests/rc.yaml": rc})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    assert ctl.runtime.kube.kept_connections == ctl.runtime.settings.connections
    eventually(lambda: ray_version(ctl, "hooked") == "2.52.0", message="first sync")

    sha = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")})
    forged = ctl.webhook(push_payload(git_repo, sha), secret="guess")
    unsigned = ctl.webhook(push_payload(git_repo, sha), secret=None)
    assert (forged.status_code, unsigned.status_code) == (401, 401)
    assert SECRET not in forged.text

    accepted = ctl.webhook(push_payload(git_repo, sha))
    assert accepted.status_code == 202
    assert accepted.json()["refreshed"] == ["hooked"]
    eventually(lambda: ray_version(ctl, "hooked") == "2.53.0", message="webhook sync")
    eventually(lambda: ctl.status("hooked").get("revision") == sha, message="status")

    # The sync is counted after its status is written: wait for the counter, not the status.
    synced = 'gitops_ray_sync_total{app="hooked",phase="Succeeded",trigger="auto-sync"} 2.0'
    metrics = eventually(lambda: ctl.metrics_with(synced), message="second sync counted")
    assert 'gitops_ray_webhook_requests_total{provider="github",result="rejected"} 2.0' in metrics
    assert 'gitops_ray_webhook_requests_total{provider="github",result="accepted"} 1.0' in metrics
    assert 'gitops_ray_app_info{app="hooked",health_status=' in metrics
    assert 'gitops_ray_k8s_requests_total{code="200",verb="apply"}' in metrics


def test_two_pushes_in_quick_succession_both_land_with_polling_off(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    """A second push while the first one's refresh runs is applied too (no poll to rescue it)."""
    rc = raycluster("twice")
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application("twice", git_repo.url, namespace)]},
                           interval="0")
    eventually(lambda: ray_version(ctl, "twice") == "2.52.0", message="first sync")

    first = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")})
    assert ctl.webhook(push_payload(git_repo, first)).status_code == 202
    second = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.54.0")})
    assert ctl.webhook(push_payload(git_repo, second)).status_code == 202
    eventually(lambda: ray_version(ctl, "twice") == "2.54.0", message="second push applied")
    eventually(lambda: ctl.status("twice").get("revision") == second, message="status")


def test_a_push_during_the_sync_of_the_previous_one_is_applied_after_it(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    rc = raycluster("during")
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application("during", git_repo.url, namespace)]},
                           interval="0")
    eventually(lambda: ray_version(ctl, "during") == "2.52.0", message="first sync")

    first = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")})
    assert ctl.webhook(push_payload(git_repo, first)).status_code == 202
    # The first push's sync has applied: its refresh is still recording it (status, events).
    eventually(lambda: ray_version(ctl, "during") == "2.53.0", message="first push applied")
    second = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.54.0")})
    assert ctl.webhook(push_payload(git_repo, second)).status_code == 202
    eventually(lambda: ray_version(ctl, "during") == "2.54.0", message="second push applied")
    eventually(lambda: ctl.status("during").get("revision") == second, message="status")


class StalledGitServer:
    """An HTTP git host that holds every connection while ``hold`` is set, until ``release``.

    Not held, a connection is closed at once (git fails fast). Held, git waits for an
    answer: the refresh that asked occupies its worker for as long as the test wants.
    """

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/org/stalled.git"
        self.hold, self.release = threading.Event(), threading.Event()
        self.held = 0
        threading.Thread(target=self._serve, name="stalled-git", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            if self.hold.is_set():
                self.held += 1
                threading.Thread(target=self._wait_and_close, args=(conn,), daemon=True).start()
            else:
                conn.close()

    def _wait_and_close(self, conn: socket.socket) -> None:
        self.release.wait(60)
        conn.close()

    def close(self) -> None:
        self.release.set()
        self._server.close()


@pytest.fixture
def stalled_git() -> Iterator[StalledGitServer]:
    server = StalledGitServer()
    yield server
    server.close()


def test_a_push_merged_into_a_waiting_watch_refresh_is_applied(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, stalled_git: StalledGitServer) -> None:
    """The bug behind "two pushes 0.7 s apart": the first push's sync causes watch events,
    so a refresh of the app (reason ``due``, which accepts any cached revision) is waiting
    when the second push arrives, and the queue merges the push into it. That refresh must
    still resolve the pushed commit. Made deterministic with one worker held by another
    app's slow git server, and a manual edit for the watch event."""
    rc = raycluster("merged")
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [
        application("merged", git_repo.url, namespace),
        application("slow", stalled_git.url, namespace)]}, interval="0", workers="1")
    eventually(lambda: ray_version(ctl, "merged") == "2.52.0", message="first sync")
    eventually(lambda: not ctl.runtime.queue.busy(), message="startup refreshes done")

    stalled_git.hold.set()
    slow = {"ref": "refs/heads/main", "after": "f" * 40,
            "repository": {"clone_url": stalled_git.url, "default_branch": "main"}}
    assert ctl.webhook(slow).status_code == 202
    eventually(lambda: stalled_git.held, message="the only worker waits for the slow host")
    manual_edit(kube, namespace, "merged", "2.52.1")  # a watch event: a "due" refresh waits
    eventually(lambda: "merged" in ctl.runtime.queue.busy(), message="watch refresh queued")
    sha = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")})
    assert ctl.webhook(push_payload(git_repo, sha)).json()["refreshed"] == ["merged"]
    stalled_git.release.set()
    eventually(lambda: ray_version(ctl, "merged") == "2.53.0", message="pushed commit applied")
    eventually(lambda: ctl.status("merged").get("revision") == sha, message="status")


def test_polling_applies_a_commit_without_a_webhook(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    rc = raycluster("polled")
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application("polled", git_repo.url, namespace)]},
                           interval="1s")
    eventually(lambda: ray_version(ctl, "polled") == "2.52.0", message="first sync")
    sha = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")})
    eventually(lambda: ray_version(ctl, "polled") == "2.53.0", message="polled sync")
    eventually(lambda: ctl.status("polled").get("revision") == sha, message="status")


def manual_edit(kube: Kube, namespace: str, name: str, version: str) -> None:
    kube.patch(RC_API, "RayCluster", name=name,
               namespace=namespace, patch={"spec": {"rayVersion": version}},
               content_type="application/merge-patch+json", field_manager="kubectl-edit")


def test_manual_edit_is_healed_through_the_watch(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("healed")})
    ctl = start_controller({"applications": [
        application("healed", git_repo.url, namespace, self_heal=True)]})  # polls hourly
    eventually(lambda: ray_version(ctl, "healed") == "2.52.0", message="first sync")
    sent: Counter[tuple[str, str]] = Counter()
    ctl.runtime.kube.hooks.append(lambda verb, resource, *_: sent.update([(verb, resource)]))

    manual_edit(kube, namespace, "healed", "2.0.0")
    eventually(lambda: ray_version(ctl, "healed") == "2.52.0", message="self-heal")
    history = eventually(lambda: [op for op in ctl.status("healed").get("history", [])
                                  if op.get("trigger") == "self-heal"], message="history")
    assert history[0]["selfHealAttempts"] == 1
    assert {r["key"] for r in history[0]["resources"]} == {
        f"ray.io/RayCluster:{namespace}/healed"}
    eventually(lambda: ctl.metrics_with("gitops_ray_drift_corrections_total{"),
               message="drift correction counted")  # counted after the history is written
    # What the heal wrote was known: the comparison read it, the apply answered with it.
    assert sent[("apply", "rayclusters")] >= 1 and sent[("get", "rayclusters")] == 0


def test_self_heal_backs_off_when_something_keeps_reverting(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    backoff = Backoff(0.5, 2.0, 4.0)
    git_repo.commit({"manifests/rc.yaml": raycluster("tug")})
    ctl = start_controller(
        {"applications": [application("tug", git_repo.url, namespace, self_heal=True)],
         "selfHeal": {"backoff": {"initial": backoff.initial, "factor": backoff.factor,
                                  "cap": backoff.cap}}})
    eventually(lambda: ray_version(ctl, "tug") == "2.52.0", message="first sync")

    def heals() -> list[dict[str, Any]]:
        ops = ctl.status("tug").get("history", [])
        return [op for op in reversed(ops) if op.get("trigger") == "self-heal"]

    def fight() -> bool:  # another controller that reverts us whenever it can
        if ray_version(ctl, "tug") != "9.9.9":
            manual_edit(kube, namespace, "tug", "9.9.9")
        return len(heals()) >= 4

    eventually(fight, timeout=120, message="four self-heals")
    ops = heals()
    attempts = [op["selfHealAttempts"] for op in ops]
    assert attempts == list(range(attempts[0], attempts[0] + len(ops)))
    for before, after in itertools.pairwise(ops):
        # The policy never started a heal before the backoff after the previous one.
        waited = after["startedAt"] - before["finishedAt"]
        assert waited >= backoff.delay(before["selfHealAttempts"])


def test_unreachable_repo_does_not_stop_the_others_and_recovers(
        start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str,
        tmp_path: Path) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("good")})
    missing = tmp_path / "later"
    missing_url = (missing / "remote.git").as_uri()
    ctl = start_controller({"applications": [
        application("broken", missing_url, namespace),
        application("good", git_repo.url, namespace)]}, interval="1s", workers="2")
    eventually(lambda: ray_version(ctl, "good") == "2.52.0", message="good app synced")
    error = eventually(lambda: ctl.status("broken").get("error"), message="error recorded")
    assert error.startswith("source:")
    assert 'gitops_ray_source_fetch_errors_total{app="broken"}' in ctl.metrics()

    later = GitRepo(missing)
    later.commit({"manifests/rc.yaml": raycluster("recovered")})
    eventually(lambda: ray_version(ctl, "recovered") == "2.52.0", message="recovery")
    eventually(lambda: ctl.status("broken").get("error") == "", message="error cleared")


def test_events_a_full_outbox_drops_are_counted_in_the_metric(
        start_controller: Callable[..., Controller], namespace: str) -> None:
    """The runtime's outbox (kube/outbox.py) reports each Event it drops in
    ``gitops_ray_events_dropped_total``: here its thread is held and the queue filled."""
    ctl = start_controller({"applications": []})
    outbox = ctl.runtime.kube.outbox
    assert outbox is not None
    held, taken = threading.Event(), threading.Event()
    outbox.put(lambda: (taken.set(), held.wait(60)), "gate")
    assert taken.wait(60)
    try:
        while outbox.put(lambda: None, "filler"):
            pass
    finally:
        held.set()
    eventually(lambda: ctl.metrics_with("gitops_ray_events_dropped_total 1.0"),
               message="the dropped Event counted")
    assert outbox.flush(60)


def test_noop_refresh_makes_no_request_and_metrics_move(
        start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("probed")})
    ctl = start_controller({"applications": [application("probed", git_repo.url, namespace)]})
    eventually(lambda: ctl.status("probed").get("sync") == "Synced", message="sync")
    assert requests.get(f"{ctl.url}/healthz", timeout=5).status_code == 200
    series = 'gitops_ray_reconcile_total{app="probed",result="success"}'
    assert "gitops_ray_leader 1.0" in ctl.metrics()  # leader election off: this one leads
    # The heap was settled at start-up (gitops_ray.heap): the imports are out of the
    # collector's walks, the gauge says how many objects that is.
    frozen = eventually(lambda: metric_value(ctl.metrics(), "gitops_ray_heap_frozen_objects"),
                        message="heap settled")
    assert frozen > 10_000

    def refresh() -> None:
        """One refresh of ours, and nothing else in flight or due when it is over."""
        before = metric_value(ctl.metrics(), series)
        ctl.runtime.queue.submit("probed", "test")
        eventually(lambda: metric_value(ctl.metrics(), series) > before and idle(),
                   message="reconcile counter")

    def idle() -> bool:  # the counter can also move for a watch-triggered refresh
        return not ctl.runtime.queue.busy() and ctl.runtime.scheduler.pending("probed") is None

    refresh()  # warms the dry-run cache for the object as it is now
    assert ctl.runtime.kube.outbox is not None
    assert ctl.runtime.kube.outbox.flush(60)  # the first sync's Event is posted by now
    requests_seen: list[tuple[str, str]] = []
    ctl.runtime.kube.hooks.append(lambda verb, res, code, s: requests_seen.append((verb, res)))
    refresh()
    # Not a single request: objects and the app's record come from the watch cache, the
    # dry run is cached by resourceVersion, and an unchanged status is not rewritten.
    assert requests_seen == []


def test_a_commit_writes_the_changed_object_only_and_reads_nothing_back(
        start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str) -> None:
    """Through the watch cache: the objects our last sync left as they are (same content,
    same resourceVersion) are not re-applied on the next commit, and the comparison after
    the sync reads none of them (the issue-18 commit -> applied path)."""
    rcs = [raycluster(f"few-{i}") for i in range(4)]
    git_repo.commit({"manifests/rcs.yaml": rcs})
    ctl = start_controller({"applications": [application("few", git_repo.url, namespace)]},
                           interval="0")
    eventually(lambda: ctl.status("few").get("sync") == "Synced", message="first sync")
    eventually(lambda: not ctl.runtime.queue.busy()
               and ctl.runtime.scheduler.pending("few") is None, message="idle")
    assert ctl.runtime.kube.outbox is not None
    assert ctl.runtime.kube.outbox.flush(60)  # the first sync's Event is not counted below
    sent: list[tuple[str, str]] = []
    posters: list[str] = []  # the threads that sent Events

    def hook(verb: str, resource: str, code: int, seconds: float) -> None:
        sent.append((verb, resource))
        if resource == "events":
            posters.append(threading.current_thread().name)
    ctl.runtime.kube.hooks.append(hook)

    sha = git_repo.commit({"manifests/rcs.yaml": [*rcs[:2], with_version(rcs[2], "2.53.0"),
                                                  rcs[3]]})
    assert ctl.webhook(push_payload(git_repo, sha)).status_code == 202
    eventually(lambda: ctl.status("few").get("revision") == sha
               and ctl.status("few").get("sync") == "Synced", message="commit synced")
    operation = ctl.status("few")["operation"]
    assert {(r["name"], r["action"]) for r in operation["resources"]} == {
        ("few-0", "unchanged"), ("few-1", "unchanged"), ("few-2", "configured"),
        ("few-3", "unchanged")}
    # few-2's dry run (the comparison) and its write; no lookup before it, no read-back.
    assert [v for v, r in sent if r == "rayclusters"] == ["apply", "apply"], str(sent)
    assert ray_version(ctl, "few-2") == "2.53.0"
    eventually(lambda: not ctl.runtime.queue.busy()
               and ctl.runtime.scheduler.pending("few") is None, message="idle again")
    # One record write: the status, the operation and the controller's note on it
    # (trigger, what auto-sync does next) together. (The GETs are the test's ctl.status.)
    assert [v for v, r in sent if r == "configmaps" and v != "get"] == ["update"], str(sent)
    # Its two Events (ResourceConfigured on few-2, SyncSucceeded on the record) are
    # posted by the client's outbox, not by the worker that synced (kube/outbox.py).
    assert ctl.runtime.kube.outbox.flush(60)
    assert posters == ["events", "events"]
    status = ctl.status("few")
    assert status["autoSync"]["action"] == "none"
    assert {k: status["operation"][k] for k in ("automated", "trigger", "revision")} == {
        "automated": True, "trigger": "auto-sync", "revision": sha}


def test_a_pruned_object_held_by_a_finalizer_keeps_the_app_out_of_sync(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    hold = "gitops-ray.io/test-hold"
    held = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held"},
            "data": {"k": "v"}}
    git_repo.commit({"manifests/rc.yaml": raycluster("pruner"), "manifests/cm.yaml": held})
    ctl = start_controller({"applications": [application("pruner", git_repo.url, namespace)]})
    eventually(lambda: ctl.status("pruner").get("sync") == "Synced", message="first sync")

    def finalizers(value: list[str]) -> None:
        kube.patch("v1", "ConfigMap", name="held", namespace=namespace,
                   patch={"metadata": {"finalizers": value}},
                   content_type="application/merge-patch+json", field_manager="tests")

    finalizers([hold])
    sha = git_repo.commit({"manifests/cm.yaml": None}, "remove held")
    assert ctl.webhook(push_payload(git_repo, sha)).status_code == 202

    def waiting() -> dict[str, Any]:
        status = ctl.status("pruner")
        return status if (status.get("autoSync") or {}).get("reason", "").startswith(
            "waiting for pruned objects") else {}

    status = eventually(waiting, message="auto-sync waits for the deletion")
    assert status["sync"] == "OutOfSync" and status["revision"] == sha
    assert {r["key"]: r["reason"] for r in status["resources"]}[
        f"ConfigMap:{namespace}/held"] == "deleting"
    assert {r["key"]: r["action"] for r in status["operation"]["resources"]}[
        f"ConfigMap:{namespace}/held"] == "deleting"

    live = kube.get("v1", "ConfigMap", name="held", namespace=namespace)
    assert live is not None and live["metadata"]["deletionTimestamp"]
    finalizers([f for f in live["metadata"]["finalizers"] if f != hold])
    # Polls are hourly here: the watch's DELETED event is what brings the status up to date.
    eventually(lambda: ctl.status("pruner").get("sync") == "Synced", message="synced when gone")

