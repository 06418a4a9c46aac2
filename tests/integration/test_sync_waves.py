"""Sync waves against the real API server: wave N+1 is applied only once wave N is healthy.

There is no KubeRay operator in these tests: the test plays it, writing a RayCluster's
``status`` through the status subresource. A ConfigMap (no health check) in wave 1 shows
whether the sync moved on. The controller tests show that a waiting sync holds no worker
and that a controller started after another one stopped continues its operation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.sync.operation import OPERATION_STATE
from gitops_ray.sync.reasons import Reason
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.harness.runtime import Controller, application
from tests.samples import raycluster

WAVE = "argocd.argoproj.io/sync-wave"




def in_wave(obj: dict[str, Any], wave: int) -> dict[str, Any]:
    meta = obj["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), WAVE: str(wave)}
    return obj


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": "v"}}


def report(kube: Kube, namespace: str, name: str, state: str) -> None:
    """Write the RayCluster's status as the KubeRay operator would."""
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=namespace)
    assert live is not None
    live["status"] = {"state": state, "observedGeneration": live["metadata"]["generation"]}
    kube.replace(live, field_manager="kuberay-operator", subresource="status")


def cm_exists(kube: Kube, namespace: str, name: str) -> bool:
    return kube.get("v1", "ConfigMap", name=name, namespace=namespace) is not None


def two_waves(git_repo: GitRepo, rc: str = "head", cm: str = "after") -> None:
    git_repo.commit({"manifests/a.yaml": [raycluster(rc), in_wave(config_map(cm), 1)]})


def test_wave_1_is_applied_only_once_wave_0_is_healthy(env: Env, git_repo: GitRepo) -> None:
    two_waves(git_repo)
    app = env.app(git_repo, name="waves")

    first = env.reconciler.sync(app)
    assert first.result.running, first.result.message
    assert env.live("head") is not None
    assert not cm_exists(env.kube, env.namespace, "after")
    recorded = env.store.load("waves").status[OPERATION_STATE]
    assert (recorded["phase"], recorded["wave"]) == ("Running", 0)
    assert recorded["reason"] == ""  # waiting is not a failure
    assert "history" not in env.store.load("waves").status  # nothing finished yet

    still = env.reconciler.sync(app, resume=first.result.continuation())
    assert still.result.running
    assert not cm_exists(env.kube, env.namespace, "after")

    report(env.kube, env.namespace, "head", "ready")
    done = env.reconciler.sync(app, resume=still.result.continuation())
    assert done.result.ok, done.result.message
    assert cm_exists(env.kube, env.namespace, "after")
    status = env.store.load("waves").status
    assert OPERATION_STATE not in status
    operation = status["history"][0]
    assert operation["phase"] == "Succeeded"
    assert operation["startedAt"] == recorded["startedAt"]  # one operation, three steps
    actions = {r["key"]: r["action"] for r in operation["resources"]}
    assert actions == {f"ray.io/RayCluster:{env.namespace}/head": "created",
                       f"ConfigMap:{env.namespace}/after": "created"}


def test_the_last_wave_is_not_waited_for(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("first"), in_wave(raycluster("last"), 1)]})
    outcome = env.reconciler.sync(env.app(git_repo, name="last-wave"))
    assert outcome.result.ok, outcome.result.message  # as in Argo CD: applied is done
    assert outcome.after is not None
    assert outcome.after.health is not None and outcome.after.health.status == "Progressing"


def test_a_degraded_wave_fails_the_sync_and_stops_there(env: Env, git_repo: GitRepo) -> None:
    two_waves(git_repo, rc="broken", cm="never")
    app = env.app(git_repo, name="degraded")
    first = env.reconciler.sync(app)
    assert first.result.running
    report(env.kube, env.namespace, "broken", "failed")
    failed = env.reconciler.sync(app, resume=first.result.continuation())
    assert failed.result.phase == "Failed"
    assert failed.result.reason == Reason.WAVE_DEGRADED
    assert "wave 0" in failed.result.message and "Degraded" in failed.result.message
    assert not cm_exists(env.kube, env.namespace, "never")
    assert OPERATION_STATE not in env.store.load("degraded").status


def test_in_process_wait_continues_when_healthy_and_times_out_otherwise(
        env: Env, git_repo: GitRepo) -> None:
    two_waves(git_repo)
    app = env.app(git_repo, name="cli-wait")
    polls: list[float] = []

    def operator_acts(seconds: float) -> None:  # called instead of sleeping between polls
        polls.append(seconds)
        if len(polls) == 2:
            report(env.kube, env.namespace, "head", "ready")

    done = env.reconciler.sync_until_done(app, timeout=600, poll=1.0, sleep=operator_acts)
    assert done.result.ok, done.result.message
    assert len(polls) == 2
    assert cm_exists(env.kube, env.namespace, "after")

    git_repo.commit({"manifests/a.yaml": [raycluster("slow"),
                                          in_wave(config_map("late"), 1)]})
    gave_up = env.reconciler.sync_until_done(app, timeout=0, poll=1.0)
    assert gave_up.result.phase == "Failed"
    assert gave_up.result.reason == Reason.WAVE_TIMEOUT
    assert not cm_exists(env.kube, env.namespace, "late")
    status = env.store.load("cli-wait").status
    assert OPERATION_STATE not in status  # nothing left running for a controller
    assert status["history"][0]["reason"] == Reason.WAVE_TIMEOUT


def test_controller_waits_without_a_worker_and_a_new_controller_continues(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    two_waves(git_repo, rc="w0", cm="w1")
    settings = {"applications": [application("waves", git_repo.url, namespace),
                                 application("other", git_repo.url, namespace,
                                             path="other")]}
    git_repo.commit({"other/cm.yaml": config_map("other-cm")})
    first = start_controller(settings, workers="1")
    running = eventually(lambda: recorded_running(first.status("waves")),
                         message="sync waiting for wave 0")
    assert (running["phase"], running["wave"]) == ("Running", 0)
    assert running["trigger"] == "auto-sync"
    # One worker, and the waiting sync does not hold it: the other app is synced too.
    eventually(lambda: cm_exists(kube, namespace, "other-cm"), message="other app synced")
    assert first.live("w0") is not None
    assert not cm_exists(kube, namespace, "w1")

    first.runtime.shutdown()
    report(kube, namespace, "w0", "ready")
    assert not cm_exists(kube, namespace, "w1")  # nobody is syncing now

    second = start_controller(settings, workers="1")
    eventually(lambda: cm_exists(kube, namespace, "w1"), message="wave 1 applied")
    operation = eventually(lambda: finished(second.status("waves")), message="finished")
    assert operation["phase"] == "Succeeded", operation
    assert operation["startedAt"] == running["startedAt"]  # continued, not started afresh
    actions = {r["key"]: r["action"] for r in operation["resources"]}
    # The RayCluster was created by the first controller and not re-applied by the second.
    assert actions[f"ray.io/RayCluster:{namespace}/w0"] == "created"
    assert actions[f"ConfigMap:{namespace}/w1"] == "created"
    assert OPERATION_STATE not in second.status("waves")


def test_controller_continues_when_the_watch_sees_the_wave_become_healthy(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    two_waves(git_repo, rc="watched", cm="then")
    ctl = start_controller({"applications": [application("watched", git_repo.url,
                                                         namespace)]})
    eventually(lambda: ctl.status("watched").get(OPERATION_STATE), message="waiting")
    assert not cm_exists(kube, namespace, "then")
    report(kube, namespace, "watched", "ready")
    eventually(lambda: cm_exists(kube, namespace, "then"), message="wave 1 applied")
    operation = eventually(lambda: finished(ctl.status("watched")), message="finished")
    assert operation["phase"] == "Succeeded"


def recorded_running(status: dict[str, Any]) -> dict[str, Any] | None:
    """The running operation, once the controller added its bookkeeping (a second write)."""
    running = status.get(OPERATION_STATE)
    return running if running and "trigger" in running else None


def finished(status: dict[str, Any]) -> dict[str, Any] | None:
    operation = status.get("operation")
    return operation if operation and OPERATION_STATE not in status else None


def test_a_new_commit_supersedes_a_sync_waiting_for_a_wave(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    two_waves(git_repo, rc="stuck", cm="later")
    ctl = start_controller({"applications": [application("fixed", git_repo.url, namespace)]},
                           interval="1s")
    waiting = eventually(lambda: ctl.status("fixed").get(OPERATION_STATE), message="waiting")
    # The fix: nothing waits for the RayCluster any more (one wave).
    fix = git_repo.commit({"manifests/a.yaml": [raycluster("stuck"), config_map("later")]})
    eventually(lambda: cm_exists(kube, namespace, "later"), message="new revision synced")

    def synced_fix() -> list[dict[str, Any]] | None:
        history = ctl.status("fixed").get("history") or []
        return history if history and history[0]["revision"] == fix else None

    history = eventually(synced_fix, message="the fix's sync recorded")
    superseded = [op for op in history if op.get("reason") == Reason.SUPERSEDED]
    assert len(superseded) == 1
    assert superseded[0]["revision"] == waiting["revision"] != fix
    assert superseded[0]["phase"] == "Failed"
    assert history[0]["revision"] == fix and history[0]["phase"] == "Succeeded"


def test_cli_sync_gives_up_after_its_timeout_and_says_why(cli: Cli, git_repo: GitRepo) -> None:
    git_repo.commit({"apps/slow.yaml": app_yaml(git_repo, "slow", cli.namespace, "slow"),
                     "slow/a.yaml": [raycluster("slow"), in_wave(config_map("slow-cm"), 1)]})
    result = cli("sync", "--repo", git_repo.url, "--apps", "apps", "--timeout", "0")
    assert result.exit_code == 2, result.output
    assert "timed out after 0s: waiting for wave 0 to be healthy" in result.output
    status = json.loads(cli("status", "-o", "json", "slow").stdout)[0]
    assert status["lastSync"] == "Failed"
    assert status["history"][0]["reason"] == Reason.WAVE_TIMEOUT
