"""Fields another writer puts inside Ray groups survive our applies (real API server).

The second writer here writes exactly as Kueue v0.17.0's job reconciler does when it
admits a queued RayCluster: a JSON merge patch (controller-runtime's ``MergeFrom``, the
``clientutil.Patch`` of ``pkg/util/client``) under its own field manager, carrying the
``resourceVersion``, that merges the flavor's nodeSelector, tolerations and labels into
every pod template (``podset.Merge``), and restores them when it suspends again.
Kueue itself runs in tests/e2e.
"""

from __future__ import annotations

import copy
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.kube.client import MERGE_PATCH
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env, groups_by_name
from tests.samples import raycluster, worker_group

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
FLAVOR = {"key": "flavor", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}


def _git_cluster(name: str = "queued") -> dict[str, Any]:
    rc = raycluster(name, groups=[worker_group("cpu", replicas=1),
                                  worker_group("gpu", replicas=2)], autoscaling=False)
    rc["metadata"]["labels"] = dict(QUEUE)
    rc["spec"]["suspend"] = True  # what Kueue's webhook would default
    gpu = rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]
    gpu["nodeSelector"] = {"disk": "ssd"}
    return rc


def _templates(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["headGroupSpec"]["template"],
            *(g["template"] for g in spec["workerGroupSpecs"])]


def kueue_admits(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """Kueue's startJob: unsuspend and ``podset.Merge`` the flavor, as one merge patch."""
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=namespace)
    spec = copy.deepcopy(live["spec"])
    spec["suspend"] = False
    for template in _templates(spec):
        pod = template.setdefault("spec", {})
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), "cloud/flavor": "a100"}
        if FLAVOR not in (pod.get("tolerations") or []):
            pod["tolerations"] = [*(pod.get("tolerations") or []), FLAVOR]
        meta = template.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), "kueue.x-k8s.io/podset": "x"}
    return _patch(kube, live, spec)


def kueue_suspends(kube: Kube, namespace: str, name: str,
                   original: dict[str, Any]) -> dict[str, Any]:
    """Kueue's stopJob: suspend and ``RestorePodSpec`` each template to the Workload's."""
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=namespace)
    spec = copy.deepcopy(live["spec"])
    spec["suspend"] = True
    for template, before in zip(_templates(spec), _templates(original["spec"]), strict=True):
        pod, was = template.setdefault("spec", {}), before.get("spec") or {}
        for field in ("nodeSelector", "tolerations"):
            if field in was:
                pod[field] = copy.deepcopy(was[field])
            else:
                pod.pop(field, None)
        meta = template.setdefault("metadata", {})
        meta["labels"] = copy.deepcopy((before.get("metadata") or {}).get("labels") or {})
    return _patch(kube, live, spec)


def _patch(kube: Kube, live: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    meta = live["metadata"]
    return kube.patch("ray.io/v1", "RayCluster", name=meta["name"],
                      namespace=meta["namespace"], content_type=MERGE_PATCH,
                      field_manager="kueue",
                      patch={"metadata": {"resourceVersion": meta["resourceVersion"]},
                             "spec": spec})


def _pod(live: dict[str, Any], group: str) -> dict[str, Any]:
    spec: dict[str, Any] = groups_by_name(live)[group]["template"]["spec"]
    return spec


def test_kueues_fields_are_kept_not_drift_and_not_readded(env: Env, git_repo: GitRepo) -> None:
    rc = _git_cluster()
    git_repo.commit({"manifests/rc.yaml": rc})
    app = env.app(git_repo, name="kq")
    assert env.reconciler.sync(app).result.ok
    original = env.live("queued")

    kueue_admits(env.kube, env.namespace, "queued")
    after = env.pipeline.compare(app)
    assert after.diff.status == "Synced", after.diff.resources
    outcome = env.reconciler.sync(app)  # a self-heal pass re-asserts git: no change
    assert outcome.result.ok, outcome.result.message
    live = env.live("queued")
    assert live["spec"]["suspend"] is False  # Kueue's, not git's True
    assert _pod(live, "gpu")["nodeSelector"] == {"disk": "ssd", "cloud/flavor": "a100"}
    assert _pod(live, "gpu")["tolerations"] == [FLAVOR]
    assert live["spec"]["headGroupSpec"]["template"]["spec"]["tolerations"] == [FLAVOR]
    assert outcome.after.diff.status == "Synced"

    edited = copy.deepcopy(rc)  # a git edit while admitted lands beside Kueue's fields
    edited["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = \
        "rayproject/ray:2.53.0"
    del edited["spec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"]
    git_repo.commit({"manifests/rc.yaml": edited}, "new image; no disk selector")
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    live = env.live("queued")
    assert _pod(live, "gpu")["containers"][0]["image"] == "rayproject/ray:2.53.0"
    assert _pod(live, "gpu")["nodeSelector"] == {"cloud/flavor": "a100"}  # git's went
    assert _pod(live, "cpu")["tolerations"] == [FLAVOR]
    assert outcome.after.diff.status == "Synced"

    kueue_suspends(env.kube, env.namespace, "queued", original)
    assert env.pipeline.compare(app).diff.status == "Synced"
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    live = env.live("queued")
    assert live["spec"]["suspend"] is True
    assert "tolerations" not in _pod(live, "gpu")  # Kueue took them back: not re-added
    assert "cloud/flavor" not in (_pod(live, "gpu").get("nodeSelector") or {})
    assert outcome.after.diff.status == "Synced"


def test_a_field_git_sets_that_kueue_changed_is_a_conflict_naming_kueue(
        env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/rc.yaml": _git_cluster("clash")})
    app = env.app(git_repo, name="clash")
    assert env.reconciler.sync(app).result.ok
    live = env.live("clash")
    spec = copy.deepcopy(live["spec"])
    spec["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"]["disk"] = "hdd"
    _patch(env.kube, live, spec)

    comparison = env.pipeline.compare(app)
    assert comparison.diff.status == "OutOfSync"
    said = [c for c in comparison.diff.conflicts if "nodeSelector.disk" in c]
    assert said and "kueue" in said[0], comparison.diff.conflicts
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok
    assert _pod(env.live("clash"), "gpu")["nodeSelector"]["disk"] == "ssd"  # git's


def test_a_queue_managed_object_settles_with_no_writes(env: Env, git_repo: GitRepo) -> None:
    """After Kueue's admission the app stays Synced: self-heal (a sync of what is
    OutOfSync, as the controller's auto-sync runs it) writes nothing, cycle after cycle."""
    git_repo.commit({"manifests/rc.yaml": _git_cluster("calm")})
    app = env.app(git_repo, name="calm")
    assert env.reconciler.sync(app).result.ok
    version = kueue_admits(env.kube, env.namespace, "calm")["metadata"]["resourceVersion"]
    for _ in range(3):
        comparison = env.pipeline.compare(app)
        assert comparison.diff.status == "Synced"
        healed = env.reconciler.sync(app, only=frozenset(comparison.out_of_sync),
                                     before=comparison)
        assert healed.result.ok
        assert env.live("calm")["metadata"]["resourceVersion"] == version
