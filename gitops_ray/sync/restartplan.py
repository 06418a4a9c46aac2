"""Which Ray Pods ``gitops-ray restart`` deletes, and in which order (pure).

Why deleting Pods is the restart: the KubeRay operator (v1.6.1,
``raycluster_controller.go`` ``reconcilePods``) keeps one head Pod and, per worker group,
``clamp(replicas, minReplicas, maxReplicas) * numOfHosts`` worker Pods; a Pod that is gone
is created again from the group's *current* template, whether or not autoscaling is on.
Its other mechanisms do not fit a restart on demand: ``spec.upgradeStrategy.type:
Recreate`` acts only when the spec hash changes (a git commit), ``spec.suspend`` and a
group's ``suspend`` are spec fields (git owns the spec, the autoscaler rejects a suspended
group) and ``replicas`` belongs to the autoscaler. Deleting Pods changes no spec field, so
git, gitops-ray's diff and the autoscaler all see the same RayCluster as before.

What is chosen, so nothing is deleted that the operator would not bring back:

* only Pods labelled ``ray.io/cluster=<name>`` in the cluster's namespace *and* whose
  controller owner is this RayCluster (its ``uid``): the operator creates nothing else;
* not Pods already being deleted, nor workers named in the group's
  ``scaleStrategy.workersToDelete`` (the autoscaler is removing them, and the operator
  would not replace them);
* the head only when asked, and never for a cluster annotated
  ``ray.io/disable-provisioned-head-restart: "true"`` (KubeRay does not create a new head
  for a provisioned cluster with it; a RayJob sets it on its own cluster).

Done (``restart --wait``, :func:`replaced`): none of the deleted Pods is left, and every
restarted group has as many Ready Pods as KubeRay wants now (``GetWorkerGroupDesiredReplicas``:
``replicas`` clamped to ``[minReplicas, maxReplicas]``, times ``numOfHosts``; none for a
suspended group; one head), read again on every look, so an autoscaler that scales the
group meanwhile moves the goal with it.

Order: the head first, then the workers in spec order. Worker Pods carry KubeRay's
``wait-gcs-ready`` init container, so workers created after the head was deleted wait for
the new head instead of joining the old one just before it goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gitops_ray.errors import ConfigError, closest
from gitops_ray.health.fields import dig, mapping, number, objects, text
from gitops_ray.health.rollout import CLUSTER_LABEL, GROUP_LABEL, HEAD_GROUP, NODE_TYPE_LABEL
from gitops_ray.sync.records import InventoryEntry
from gitops_ray.types import Manifest, ResourceKey

RESTARTED_AT = "gitops-ray.io/restartedAt"
"""Annotation recording the last restart on the RayCluster (RFC 3339, UTC), for audit."""
RESTART_FIELD_MANAGER = "gitops-ray-restart"
"""Field manager of the annotation: not ours (``FIELD_MANAGER``), so a sync never drops it."""
NO_HEAD_RESTART = "ray.io/disable-provisioned-head-restart"
"""KubeRay's annotation: a provisioned cluster's deleted head is not recreated."""
RAY_GROUP = "ray.io"
RAY_CLUSTER_API = "ray.io/v1"


class RayKind(StrEnum):
    """The KubeRay kinds an app's inventory may hold."""

    RAY_CLUSTER = "RayCluster"
    RAY_JOB = "RayJob"
    RAY_SERVICE = "RayService"


class NodeType(StrEnum):
    """KubeRay's ``ray.io/node-type`` label on its Pods."""

    HEAD = "head"
    WORKER = "worker"


OWNS_ITS_CLUSTER = {
    RayKind.RAY_JOB: "a RayJob's RayCluster lives for its job; restarting its Pods fails the "
                     "job (and KubeRay does not recreate its head)",
    RayKind.RAY_SERVICE: "a RayService replaces its RayCluster itself on a spec change; "
                         "restarting its Pods takes Serve down",
}
"""Why restart refuses the Ray kinds that own their RayClusters."""


@dataclass(frozen=True)
class PodRef:
    """One Pod to delete: ``uid`` is the delete's precondition."""

    name: str
    uid: str
    group: str  # HEAD_GROUP for the head

    @property
    def is_head(self) -> bool:
        return self.group == HEAD_GROUP


@dataclass(frozen=True)
class RestartPlan:
    """The Pods of one RayCluster to delete, in order, and what was asked."""

    cluster: ResourceKey
    pods: tuple[PodRef, ...]
    groups: tuple[str, ...]  # the selected worker groups this cluster has
    head: bool
    api_version: str = RAY_CLUSTER_API  # the RayCluster's, to read it again

    def summary(self) -> str:
        """``"head, group g1, group g2, 5 pods"`` (the Event's and the CLI's words)."""
        parts = (["head"] if self.head else []) + [f"group {g}" for g in self.groups]
        count = len(self.pods)
        return ", ".join([*parts, f"{count} pod{'' if count == 1 else 's'}"])


def ray_entries(inventory: Iterable[InventoryEntry]) -> list[InventoryEntry]:
    """The KubeRay objects of an inventory, in its (sorted) order."""
    return [e for e in inventory if e.key.group == RAY_GROUP and e.kind in set(RayKind)]


def select_clusters(app: str, inventory: Sequence[InventoryEntry],
                    names: Sequence[str]) -> list[InventoryEntry]:
    """The app's RayClusters to restart: all of them, or those named.

    A name of the app's RayJob or RayService, a name the app has nothing of, or an app
    without RayClusters is a :class:`ConfigError` that says why.
    """
    ray = ray_entries(inventory)
    clusters = [e for e in ray if e.kind == RayKind.RAY_CLUSTER]
    for name in names:
        _check_cluster_name(app, name, ray)
    if not clusters:
        raise ConfigError(f"app {app} has no RayCluster to restart" + _owners_note(ray))
    return [e for e in clusters if not names or e.name in names]


def _check_cluster_name(app: str, name: str, ray: Sequence[InventoryEntry]) -> None:
    found = [e for e in ray if e.name == name]
    if any(e.kind == RayKind.RAY_CLUSTER for e in found):
        return
    if found:
        kind = RayKind(found[0].kind)
        raise ConfigError(f"{kind} {found[0].namespace}/{name} owns its RayCluster: "
                          f"restart is for the app's RayClusters ({OWNS_ITS_CLUSTER[kind]})")
    known = [e.name for e in ray if e.kind == RayKind.RAY_CLUSTER]
    raise ConfigError(f"no RayCluster {name} in app {app}{closest(name, known)}")


def _owners_note(ray: Sequence[InventoryEntry]) -> str:
    owners = [e for e in ray if e.kind != RayKind.RAY_CLUSTER]
    if not owners:
        return ""
    listed = ", ".join(f"{e.kind} {e.namespace}/{e.name}" for e in owners)
    return f"; {listed} own their RayClusters and are not restarted"


def check_groups(groups: Sequence[str], clusters: Sequence[Manifest]) -> None:
    """Fail on a worker group that none of the live ``clusters`` has (closest suggested)."""
    known = sorted({g for c in clusters for g in group_names(c)})
    for name in groups:
        if name not in known:
            raise ConfigError(f"no worker group {name} in the selected RayClusters "
                              f"({', '.join(known) or 'none'}){closest(name, known)}")


def group_names(cluster: Manifest) -> list[str]:
    """The worker groups of a RayCluster, in spec order."""
    return [text(g.get("groupName")) for g in objects(dig(cluster, "spec", "workerGroupSpecs"))
            if text(g.get("groupName"))]


def plan_restart(cluster: Manifest, pods: Sequence[Manifest], *, groups: Sequence[str],
                 head: bool) -> RestartPlan:
    """The Pods of ``cluster`` to delete for ``groups`` (empty: every group) and the head.

    ``pods`` may be any Pods; see the module docstring for which are chosen and the order.
    Asking for the head of a cluster whose head KubeRay would not recreate is a
    :class:`ConfigError`.
    """
    key = ResourceKey.of(cluster)
    if head and text(mapping(dig(cluster, "metadata", "annotations")).get(NO_HEAD_RESTART)) \
            == "true":
        raise ConfigError(f"RayCluster {key.namespace}/{key.name} has {NO_HEAD_RESTART}: "
                          "KubeRay would not recreate its head; restart its worker groups "
                          "only (--no-head)")
    order = [HEAD_GROUP] if head else []
    wanted = [g for g in group_names(cluster) if not groups or g in groups]
    order += wanted
    chosen = [p for p in (_pod_ref(cluster, pod) for pod in pods) if p and p.group in order]
    chosen.sort(key=lambda p: (order.index(p.group), p.name))
    return RestartPlan(key, tuple(chosen), tuple(wanted), head,
                       text(cluster.get("apiVersion")) or RAY_CLUSTER_API)


def _pod_ref(cluster: Manifest, pod: Manifest) -> PodRef | None:
    """The Pod as a :class:`PodRef` if it is one of ``cluster``'s to restart."""
    meta = mapping(pod.get("metadata"))
    labels = mapping(meta.get("labels"))
    cluster_meta = mapping(cluster.get("metadata"))
    if (text(labels.get(CLUSTER_LABEL)) != text(cluster_meta.get("name"))
            or text(meta.get("namespace")) != text(cluster_meta.get("namespace"))
            or meta.get("deletionTimestamp") or not text(meta.get("uid"))
            or not _controlled_by(meta, text(cluster_meta.get("uid")))):
        return None
    is_head = text(labels.get(NODE_TYPE_LABEL)) == NodeType.HEAD
    group = HEAD_GROUP if is_head else text(labels.get(GROUP_LABEL))
    if not is_head and text(meta.get("name")) in _workers_to_delete(cluster, group):
        return None
    return PodRef(text(meta.get("name")), text(meta.get("uid")), group)


def _controlled_by(meta: Manifest, uid: str) -> bool:
    return bool(uid) and any(mapping(ref).get("controller") is True
                             and text(mapping(ref).get("uid")) == uid
                             for ref in objects(meta.get("ownerReferences")))


def _workers_to_delete(cluster: Manifest, group: str) -> set[str]:
    for spec in objects(dig(cluster, "spec", "workerGroupSpecs")):
        if text(spec.get("groupName")) == group:
            names = dig(spec, "scaleStrategy", "workersToDelete")
            return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()
    return set()


def replaced(cluster: Manifest, pods: Sequence[Manifest], plan: RestartPlan) -> bool:
    """Whether the restart of ``plan`` is over (see the module docstring)."""
    old = {p.uid for p in plan.pods}
    if any(text(dig(pod, "metadata", "uid")) in old for pod in pods):
        return False
    current = [(ref, pod) for pod in pods if (ref := _pod_ref(cluster, pod))]
    groups = ([HEAD_GROUP] if plan.head else []) + list(plan.groups)
    return all(sum(ref.group == group and _is_ready(pod) for ref, pod in current)
               >= desired_pods(cluster, group) for group in groups)


def desired_pods(cluster: Manifest, group: str) -> int:
    """How many Pods KubeRay keeps in ``group`` (``HEAD_GROUP``: one)."""
    if group == HEAD_GROUP:
        return 1
    spec = next((g for g in objects(dig(cluster, "spec", "workerGroupSpecs"))
                 if text(g.get("groupName")) == group), {})
    if spec.get("suspend") is True:
        return 0
    low, high = number(spec.get("minReplicas")) or 0, number(spec.get("maxReplicas"))
    replicas = number(spec.get("replicas"))
    if replicas is None or replicas < low:
        replicas = low
    elif high is not None and replicas > high:
        replicas = high
    return replicas * max(number(spec.get("numOfHosts")) or 1, 1)


def _is_ready(pod: Manifest) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in objects(dig(pod, "status", "conditions")))
