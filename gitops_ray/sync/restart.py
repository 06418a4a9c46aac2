"""Restarting an app's Ray Pods on demand, the way KubeRay recreates them.

The old Ray operator let users "add an annotation and re-apply" to restart a cluster; in
GitOps that would be a commit, and a second commit to do it again. Here nothing in git or
in the RayCluster's spec changes: the request is recorded on the RayCluster as the
annotation ``gitops-ray.io/restartedAt`` (server-side apply under the field manager
``gitops-ray-restart``, for audit), then the chosen Pods are deleted and the KubeRay
operator creates them again (:mod:`gitops_ray.sync.restartplan` says which and why).

Why the annotation is never drift: the controller's diff is a server-side dry run of git's
object applied as ``gitops-ray``, and server-side apply owns annotations key by key, so a
key that another manager set and git does not mention stays in the dry run's result as it
is live; a sync leaves it too. The annotation does not change the spec (nor
``metadata.generation``), so neither the operator's ``Recreate`` hash nor the autoscaler
sees anything.

Each delete carries the Pod's ``uid`` as a precondition, so a Pod that was replaced by
one of the same name since it was chosen is not deleted a second time.
An Event on the RayCluster says what was restarted (no values from the spec).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from gitops_ray.errors import ConfigError, SyncError
from gitops_ray.kube import Conflict, Kube, KubeError, NotFound
from gitops_ray.sync.events import post_event
from gitops_ray.sync.records import InventoryEntry
from gitops_ray.sync.restartplan import (
    RESTART_FIELD_MANAGER,
    RESTARTED_AT,
    PodRef,
    RestartPlan,
    replaced,
)
from gitops_ray.sync.tracking import is_tracked_by
from gitops_ray.types import Manifest

EVENT_REASON = "Restarted"


class PodAction(StrEnum):
    """What the restart did to one Pod."""

    DELETED = "deleted"  # the operator creates it again
    GONE = "gone"  # already deleted by somebody else
    REPLACED = "replaced"  # its uid changed since it was chosen: left alone
    FAILED = "failed"
    WOULD_DELETE = "would-delete"  # --dry-run


@dataclass(frozen=True)
class PodOutcome:
    pod: PodRef
    action: PodAction
    message: str = ""


@dataclass
class RestartResult:
    """What restarting one RayCluster did."""

    plan: RestartPlan
    outcomes: list[PodOutcome] = field(default_factory=list)
    error: str = ""  # the annotation could not be written: nothing was deleted

    @property
    def ok(self) -> bool:
        return not self.error and all(o.action != PodAction.FAILED for o in self.outcomes)

    @property
    def deleted(self) -> int:
        return sum(o.action == PodAction.DELETED for o in self.outcomes)


def load_clusters(kube: Kube, app: str, entries: Sequence[InventoryEntry]) -> list[Manifest]:
    """The live RayClusters of ``entries``; each must exist and be tracked by ``app``."""
    found: list[Manifest] = []
    for entry in entries:
        live = kube.get(entry.api_version, entry.kind, name=entry.name,
                        namespace=entry.namespace)
        where = f"RayCluster {entry.namespace}/{entry.name}"
        if live is None:
            raise SyncError(f"{where} of app {app} does not exist (not synced yet?)")
        if not is_tracked_by(app, live):
            raise ConfigError(f"{where} is in app {app}'s inventory but its tracking id "
                              "names another app; not restarted")
        found.append(live)
    return found


def cluster_pods(kube: Kube, cluster: Manifest) -> list[Manifest]:
    """The Pods KubeRay labelled as ``cluster``'s (one list request)."""
    meta = cluster["metadata"]
    items, _ = kube.list("v1", "Pod", meta["namespace"],
                         label_selector=f"ray.io/cluster={meta['name']}")
    return items


def dry_run(plan: RestartPlan) -> RestartResult:
    return RestartResult(plan, [PodOutcome(p, PodAction.WOULD_DELETE) for p in plan.pods])


def restart(kube: Kube, plan: RestartPlan, cluster: Manifest, *,
            now: datetime.datetime | None = None) -> RestartResult:
    """Record the restart on ``cluster``, delete ``plan``'s Pods in order, post an Event."""
    result = RestartResult(plan)
    try:
        annotated = annotate(kube, cluster, now or datetime.datetime.now(datetime.UTC))
    except KubeError as e:
        result.error = f"cannot annotate RayCluster {_where(plan)}: {e}"
        return result
    namespace = plan.cluster.namespace
    result.outcomes = [delete_pod(kube, namespace, pod) for pod in plan.pods]
    _announce(kube, annotated, result)
    return result


def annotate(kube: Kube, cluster: Manifest, now: datetime.datetime) -> Manifest:
    """Apply ``gitops-ray.io/restartedAt: <RFC 3339>`` as ``gitops-ray-restart``.

    Forced: the key is the restart's own, whoever wrote it before.
    """
    meta = cluster["metadata"]
    body: Manifest = {
        "apiVersion": cluster["apiVersion"], "kind": cluster["kind"],
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "annotations": {RESTARTED_AT: rfc3339(now)}}}
    return kube.apply(body, field_manager=RESTART_FIELD_MANAGER, force=True)


def rfc3339(moment: datetime.datetime) -> str:
    """``2026-11-23T10:00:00Z``: seconds, UTC (as ``kubectl rollout restart``'s annotation)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def delete_pod(kube: Kube, namespace: str, pod: PodRef) -> PodOutcome:
    """Delete one Pod if it is still the one chosen (``uid`` precondition)."""
    try:
        deleted = kube.delete("v1", "Pod", name=pod.name, namespace=namespace, uid=pod.uid)
    except NotFound:
        return PodOutcome(pod, PodAction.GONE)
    except Conflict:
        return PodOutcome(pod, PodAction.REPLACED, "a new Pod has its name")
    except KubeError as e:
        return PodOutcome(pod, PodAction.FAILED, str(e))
    return PodOutcome(pod, PodAction.DELETED if deleted else PodAction.GONE)


def is_replaced(kube: Kube, plan: RestartPlan) -> bool:
    """Whether ``plan``'s restart is over, read live now (two requests)."""
    key = plan.cluster
    live = kube.get(plan.api_version, "RayCluster", name=key.name, namespace=key.namespace)
    return live is not None and replaced(live, cluster_pods(kube, live), plan)


def event_message(result: RestartResult) -> str:
    """``Restarted by gitops-ray restart: group gpu, 3 pods`` (+ failures, if any)."""
    message = f"Restarted by gitops-ray restart: {result.plan.summary()}"
    failed = sum(o.action == PodAction.FAILED for o in result.outcomes)
    return message + (f" ({failed} could not be deleted)" if failed else "")


def _announce(kube: Kube, cluster: Manifest, result: RestartResult) -> None:
    post_event(kube, cluster, reason=EVENT_REASON, message=event_message(result),
               warning=not result.ok)


def _where(plan: RestartPlan) -> str:
    return f"{plan.cluster.namespace}/{plan.cluster.name}"
