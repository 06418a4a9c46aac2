"""Resource hooks against the real API server: run at their phase, end by their health.

There is no Job controller in this tier (kube-controller-manager runs only the namespace
and garbage-collector controllers, and no Pod is ever scheduled), so the test plays it:
it writes a hook Job's ``status`` through the status subresource as the Job controller
does. tests/e2e/test_hooks_e2e.py has a real Job completing on a kwok node.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.reconcile.argostatus import operation_state
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.sync.hooks import HOOK_FINALIZER
from gitops_ray.sync.operation import OPERATION_STATE
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import RecordStore
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.harness.runtime import Controller, application
from tests.samples import raycluster

HOOK = "argocd.argoproj.io/hook"
POLICY = "argocd.argoproj.io/hook-delete-policy"


def job(name: str, hook: str, *, policy: str | None = None, generate: bool = False,
        **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {**({HOOK: hook} if hook else {}), **annotations}}
    if policy:
        meta["annotations"][POLICY] = policy
    meta["generateName" if generate else "name"] = name
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}


def config_map(name: str, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": annotations}, "data": {"k": "v"}}


def finish(kube: Kube, namespace: str, name: str, *, ok: bool = True) -> None:
    """Write the Job's end as the Job controller does (status subresource)."""
    live = kube.get("batch/v1", "Job", name=name, namespace=namespace)
    assert live is not None
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ends = ["SuccessCriteriaMet", "Complete"] if ok else ["FailureTarget", "Failed"]
    live["status"] = {
        "startTime": now, **({"completionTime": now, "succeeded": 1} if ok else {"failed": 1}),
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now,
                        "lastProbeTime": now, "reason": "Done" if ok else "BackoffLimitExceeded",
                        "message": "done" if ok else "Job has reached the specified backoff limit"}
                       for t in ends]}
    kube.replace(live, field_manager="job-controller", subresource="status")


def jobs(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    items, _ = kube.list("batch/v1", "Job", namespace=namespace)
    return {j["metadata"]["name"]: j for j in items}


def cm(env: Env, name: str) -> dict[str, Any] | None:
    return env.kube.get("v1", "ConfigMap", name=name, namespace=env.namespace)


def test_presync_runs_first_and_the_sync_waits_for_it(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [job("migrate", "PreSync"), config_map("app"),
                                          job("smoke", "PostSync", policy="HookSucceeded")]})
    app = env.app(git_repo, name="hooks")
    first = env.reconciler.sync(app)
    assert first.result.running, first.result.message
    assert "waiting for completion of hook batch/Job" in first.result.message
    assert cm(env, "app") is None  # the Sync phase waits for PreSync
    live = jobs(env.kube, env.namespace)["migrate"]
    assert HOOK_FINALIZER in live["metadata"]["finalizers"]
    state = env.store.load("hooks").status[OPERATION_STATE]
    assert state["syncPhase"] == "PreSync"

    finish(env.kube, env.namespace, "migrate")
    second = env.reconciler.sync(app, resume=first.result.continuation())
    assert second.result.running, second.result.message  # now PostSync runs
    assert cm(env, "app") is not None
    assert "smoke" in jobs(env.kube, env.namespace)
    assert HOOK_FINALIZER not in (jobs(env.kube, env.namespace)["migrate"]["metadata"]
                                  .get("finalizers") or [])

    finish(env.kube, env.namespace, "smoke")
    done = env.reconciler.sync(app, resume=second.result.continuation())
    assert done.result.ok, done.result.message
    left = jobs(env.kube, env.namespace)
    assert "migrate" in left  # BeforeHookCreation (the default): kept until the next sync
    assert "smoke" not in left or left["smoke"]["metadata"].get("deletionTimestamp")
    status = env.store.load("hooks").status
    assert [str(e.key) for e in env.store.load("hooks").inventory] == \
        [f"ConfigMap:{env.namespace}/app"]
    assert done.after is not None and done.after.diff.resources  # hooks are not compared
    assert {str(r.key) for r in done.after.diff.resources} == {f"ConfigMap:{env.namespace}/app"}
    state = operation_state(decode_status(status), {})
    rows = state["syncResult"]["resources"]  # type: ignore[index]
    hooks = {r["name"]: (r["hookType"], r["hookPhase"], r["status"])
             for r in rows if r.get("hookType")}
    assert hooks == {"migrate": ("PreSync", "Succeeded", "Synced"),
                     "smoke": ("PostSync", "Succeeded", "Synced")}


def test_a_failed_hook_fails_the_sync_and_runs_syncfail(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [
        job("check", "PreSync", policy="HookFailed"), config_map("never"),
        job("tell-", "SyncFail", generate=True)]})
    app = env.app(git_repo, name="failing")
    first = env.reconciler.sync(app)
    assert first.result.running
    finish(env.kube, env.namespace, "check", ok=False)
    second = env.reconciler.sync(app, resume=first.result.continuation())
    assert second.result.running, second.result.message  # SyncFail hook running
    assert env.store.load("failing").status[OPERATION_STATE]["syncPhase"] == "SyncFail"
    assert cm(env, "never") is None
    told = [n for n in jobs(env.kube, env.namespace) if n.startswith("tell-")]
    assert told == [f"tell-{second.result.revision[:7]}-syncfail-"
                    f"{int(second.result.started_at)}"]
    finish(env.kube, env.namespace, told[0])
    done = env.reconciler.sync(app, resume=second.result.continuation())
    assert done.result.phase == "Failed"
    assert done.result.reason == Reason.HOOK_FAILED
    assert "one or more synchronization tasks completed unsuccessfully" in done.result.message
    left = jobs(env.kube, env.namespace)
    assert "check" not in left or left["check"]["metadata"].get("deletionTimestamp")


def test_before_hook_creation_replaces_the_last_run(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [job("once", "Sync"), config_map("app")]})
    app = env.app(git_repo, name="again")
    first = env.reconciler.sync(app)
    assert first.result.running
    finish(env.kube, env.namespace, "once")
    assert env.reconciler.sync(app, resume=first.result.continuation()).result.ok
    uid = jobs(env.kube, env.namespace)["once"]["metadata"]["uid"]
    git_repo.commit({"manifests/a.yaml": [job("once", "Sync"), config_map("app"),
                                          config_map("more")]})
    again = env.reconciler.sync(app)
    assert again.result.running, again.result.message
    assert jobs(env.kube, env.namespace)["once"]["metadata"]["uid"] != uid  # a new run


def test_dry_run_lists_hooks_and_creates_none(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [job("migrate", "PreSync"), raycluster("head"),
                                          config_map("skipped", **{HOOK: "Skip"})]})
    outcome = env.reconciler.sync(env.app(git_repo, name="dry"), dry_run=True)
    assert outcome.result.ok, outcome.result.message
    listed = {str(r.key): r.message for r in outcome.result.resources}
    assert listed[f"batch/Job:{env.namespace}/migrate"] == "not run (dry run)"
    assert not jobs(env.kube, env.namespace)
    assert f"ConfigMap:{env.namespace}/skipped" not in listed  # Skip: not applied at all


def test_helm_hooks_are_argo_cd_phases(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [
        job("pre", "", **{"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "-1"}),
        config_map("app", **{"helm.sh/hook": "test"})]})  # not a hook to Argo CD
    outcome = env.reconciler.sync(env.app(git_repo, name="helm"))
    assert outcome.result.running
    assert cm(env, "app") is None
    assert "pre" in jobs(env.kube, env.namespace)


def test_postdelete_hooks_run_once_the_app_is_deleted(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    app = application("leaving", git_repo.url, namespace, path="leaving")
    app["metadata"]["finalizers"] = ["resources-finalizer.argocd.argoproj.io"]
    git_repo.commit({"apps/leaving.yaml": app, "leaving/all.yaml": [
        config_map("app"), job("cleanup", "PostDelete", policy="HookSucceeded")],
        "apps/stays.yaml": application("stays", git_repo.url, namespace, path="stays"),
        "stays/cm.yaml": config_map("stays")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           interval="1s")
    eventually(lambda: kube.get("v1", "ConfigMap", name="app", namespace=namespace),
               message="synced")
    assert "cleanup" not in jobs(kube, namespace)  # not a resource: not applied

    git_repo.commit({"apps/leaving.yaml": None})
    eventually(lambda: "cleanup" in jobs(kube, namespace), message="the PostDelete hook")
    assert kube.get("v1", "ConfigMap", name="app", namespace=namespace) is None
    finish(kube, namespace, "cleanup")
    eventually(lambda: _gone_or_going(jobs(kube, namespace), "cleanup"),
               message="the PostDelete hook deleted once it succeeded (HookSucceeded)")
    eventually(lambda: "leaving" not in RecordStore(kube, namespace).list_apps(),
               message="the record dropped")
    assert ctl.runtime.catalog.get("leaving") is None


def _gone_or_going(objects: dict[str, Any], name: str) -> bool:
    """Deleted, or being deleted: from one read (it may go between two)."""
    return name not in objects or bool(objects[name]["metadata"].get("deletionTimestamp"))
