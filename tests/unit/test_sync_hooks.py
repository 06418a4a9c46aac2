"""The hook rules (gitops_ray.sync.hooks) and the step plan (gitops_ray.sync.phases): pure."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_ray.health import Health, HealthStatus, assess
from gitops_ray.sync.hooks import (
    HOOK_FINALIZER,
    DeletePolicy,
    HookTask,
    HookType,
    delete_policies,
    hook_name,
    hook_types,
    is_hook,
    is_skipped,
    phase_of,
    split,
)
from gitops_ray.sync.order import wave_of
from gitops_ray.sync.phases import plan, resumed_rank
from gitops_ray.types import OperationPhase


def obj(name: str = "x", kind: str = "Job", **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1" if kind == "Job" else "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations}}


@pytest.mark.parametrize(("annotations", "types"), [
    ({"argocd.argoproj.io/hook": "PreSync"}, (HookType.PRE_SYNC,)),
    ({"argocd.argoproj.io/hook": "PreSync, PostSync"}, (HookType.PRE_SYNC, HookType.POST_SYNC)),
    ({"argocd.argoproj.io/hook": "Bogus"}, ()),
    ({"helm.sh/hook": "pre-install,pre-upgrade"}, (HookType.PRE_SYNC,)),
    ({"helm.sh/hook": "post-install"}, (HookType.POST_SYNC,)),
    ({"helm.sh/hook": "test"}, ()),  # not a hook to Argo CD
    ({"helm.sh/hook": "pre-delete"}, ()),
    # Argo CD's annotation wins over Helm's
    ({"argocd.argoproj.io/hook": "Sync", "helm.sh/hook": "pre-install"}, (HookType.SYNC,)),
])
def test_hook_types(annotations: dict[str, str], types: tuple[HookType, ...]) -> None:
    assert hook_types(obj(**annotations)) == types


def test_skip_and_is_hook() -> None:
    skipped = obj(**{"argocd.argoproj.io/hook": "Skip"})
    assert is_skipped(skipped) and not is_hook(skipped)
    assert is_hook(obj(**{"helm.sh/hook": "post-upgrade"}))
    assert not is_hook(obj(**{"helm.sh/hook": "test"}))
    plain = obj("plain")
    resources, hooks = split([plain, skipped, obj("h", **{"argocd.argoproj.io/hook": "Sync"})])
    assert resources == [plain] and [h["metadata"]["name"] for h in hooks] == ["h"]


def test_delete_policies_default_and_helm() -> None:
    assert delete_policies(obj()) == {DeletePolicy.BEFORE_HOOK_CREATION}
    assert delete_policies(obj(**{"argocd.argoproj.io/hook-delete-policy":
                                  "HookSucceeded,HookFailed"})) == \
        {DeletePolicy.HOOK_SUCCEEDED, DeletePolicy.HOOK_FAILED}
    assert delete_policies(obj(**{"helm.sh/hook-delete-policy": "hook-succeeded"})) == \
        {DeletePolicy.HOOK_SUCCEEDED}


def test_generate_name_is_stable_in_one_operation() -> None:
    hook = obj()
    hook["metadata"].pop("name")
    hook["metadata"]["generateName"] = "migrate-"
    name = hook_name(hook, revision="ABCDEF0123456", phase=HookType.PRE_SYNC, started_at=17.9)
    assert name == "migrate-abcdef0-presync-17"
    assert hook_name(obj("fixed"), revision="a", phase=HookType.SYNC, started_at=1) == "fixed"
    body = HookTask(hook, HookType.PRE_SYNC, name).body()
    assert body["metadata"]["name"] == name and "generateName" not in body["metadata"]
    assert body["metadata"]["finalizers"] == [HOOK_FINALIZER]


@pytest.mark.parametrize(("health", "phase"), [
    (None, OperationPhase.SUCCEEDED),
    (Health(HealthStatus.HEALTHY), OperationPhase.SUCCEEDED),
    (Health(HealthStatus.PROGRESSING), OperationPhase.RUNNING),
    (Health(HealthStatus.SUSPENDED), OperationPhase.RUNNING),
    (Health(HealthStatus.DEGRADED, "boom"), OperationPhase.FAILED),
    (Health(HealthStatus.UNKNOWN), OperationPhase.FAILED),
    (Health(HealthStatus.MISSING), OperationPhase.FAILED),
])
def test_phase_of_health(health: Health | None, phase: OperationPhase) -> None:
    assert phase_of(health)[0] is phase


def test_helm_weight_is_the_wave_when_sync_wave_is_absent() -> None:
    assert wave_of(obj(**{"helm.sh/hook-weight": "-5"})) == -5
    assert wave_of(obj(**{"helm.sh/hook-weight": "-5", "argocd.argoproj.io/sync-wave": "2"})) == 2
    assert wave_of(obj(**{"argocd.argoproj.io/sync-wave": "x", "helm.sh/hook-weight": "3"})) == 3


def test_plan_orders_phase_then_wave() -> None:
    hooks = [obj("post", **{"argocd.argoproj.io/hook": "PostSync"}),
             obj("pre1", **{"argocd.argoproj.io/hook": "PreSync",
                            "argocd.argoproj.io/sync-wave": "1"}),
             obj("pre0", **{"argocd.argoproj.io/hook": "PreSync"}),
             obj("sync", **{"argocd.argoproj.io/hook": "Sync"}),
             obj("fail", **{"argocd.argoproj.io/hook": "SyncFail"})]
    resources = [obj("cm", "ConfigMap"), obj("late", "ConfigMap",
                                             **{"argocd.argoproj.io/sync-wave": "3"})]
    steps = plan(resources, hooks, revision="abc", started_at=0)
    assert [(s.phase.value, s.wave, [r["metadata"]["name"] for r in s.resources],
             [t.name for t in s.hooks]) for s in steps] == [
        ("PreSync", 0, [], ["pre0"]), ("PreSync", 1, [], ["pre1"]),
        ("Sync", 0, ["cm"], ["sync"]), ("Sync", 3, ["late"], []),
        ("PostSync", 0, [], ["post"])]
    assert resumed_rank("PostSync", 0) == steps[-1].rank
    assert resumed_rank("SyncFail", 0) is None


@pytest.mark.parametrize(("live", "phase"), [
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Never"},
      "status": {"phase": "Pending"}}, OperationPhase.RUNNING),
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Never"},
      "status": {"phase": "Succeeded"}}, OperationPhase.SUCCEEDED),
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Never"},
      "status": {"phase": "Failed"}}, OperationPhase.FAILED),
    ({"apiVersion": "batch/v1", "kind": "Job", "status": {}}, OperationPhase.RUNNING),
    ({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}, OperationPhase.SUCCEEDED),
    ({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [
        {"type": "Failed", "status": "True", "message": "backoff"}]}}, OperationPhase.FAILED),
    ({"apiVersion": "ray.io/v1", "kind": "RayJob",
      "status": {"jobDeploymentStatus": "Running"}}, OperationPhase.RUNNING),
    ({"apiVersion": "ray.io/v1", "kind": "RayJob",
      "status": {"jobDeploymentStatus": "Suspended"}}, OperationPhase.RUNNING),
    ({"apiVersion": "ray.io/v1", "kind": "RayJob",
      "status": {"jobDeploymentStatus": "Complete"}}, OperationPhase.SUCCEEDED),
    ({"apiVersion": "ray.io/v1", "kind": "RayJob",
      "status": {"jobDeploymentStatus": "Failed"}}, OperationPhase.FAILED),
    ({"apiVersion": "v1", "kind": "ConfigMap"}, OperationPhase.SUCCEEDED),
])
def test_a_hook_ends_by_its_health(live: dict[str, Any], phase: OperationPhase) -> None:
    live.setdefault("metadata", {"name": "h", "namespace": "ns"})
    assert phase_of(assess(live))[0] is phase
