"""The resource tree of an app: its objects, what the cluster made from them, per group.

``argocd app get`` lists an app's resources with their sync status and health; Argo CD's
UI also shows what the cluster made from them (a Deployment's ReplicaSets and Pods). For
a Ray app the interesting part is one level down: the Pods and Services KubeRay made for
each RayCluster, grouped by worker group, and the RayClusters a RayJob or RayService
made. This module assembles that tree from what the caller already has: the app's
resource rows (the record's ``status.resources``), the live objects, git's objects, and
candidate children (Pods, Services, RayClusters in the app's namespaces, from the
controller's watch cache or one list each from the CLI).

Children are found as Argo CD finds them, by ``metadata.ownerReferences[].uid``, to a
bounded depth (a RayJob's RayCluster's Pods is three levels), so an unrelated Pod that
merely carries a ``ray.io/cluster`` label is never shown under the wrong cluster. Each
RayCluster, RayJob and RayService node carries the worker-group view
(:mod:`gitops_ray.health.workergroups`); a RayJob's or RayService's is that of the
RayCluster the operator made, with git's side taken from the embedded cluster spec.

Pure and total: malformed input makes empty fields, never an error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitops_ray.health import assess
from gitops_ray.health.fields import dig, mapping, objects, text
from gitops_ray.health.rollout import GROUP_LABEL, NODE_TYPE_LABEL
from gitops_ray.health.workergroups import WorkerGroupView, has_worker_groups, worker_groups
from gitops_ray.sync.appstatus import ResourceHealth, ResourceRow
from gitops_ray.types import Manifest, ResourceKey

MAX_DEPTH = 3
"""Levels of children below an app's own object (RayJob → RayCluster → Pod)."""
MAX_CHILDREN = 500
"""Children shown per node; the rest are counted (a 2,000-worker group stays readable)."""


@dataclass(frozen=True)
class TreeNode:
    """One object: an app's own (``sync`` set) or one the cluster made from it."""

    group: str
    kind: str
    namespace: str
    name: str
    sync: str  # "" for objects the app does not own itself
    health: str
    message: str
    children: tuple[TreeNode, ...] = ()
    hidden_children: int = 0  # children beyond MAX_CHILDREN, counted only
    worker_groups: tuple[WorkerGroupView, ...] = field(default=())
    ray_group: str = ""  # a Ray Pod's group: "head" or its worker group's name


    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.group, self.kind, self.namespace, self.name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``-o json``, the web page's data)."""
        out: dict[str, Any] = {"group": self.group, "kind": self.kind,
                               "namespace": self.namespace, "name": self.name,
                               "health": self.health, "message": self.message}
        if self.sync:
            out["sync"] = self.sync
        if self.ray_group:
            out["rayGroup"] = self.ray_group
        if self.worker_groups:
            out["workerGroups"] = [g.as_dict() for g in self.worker_groups]
        if self.children:
            out["children"] = [c.as_dict() for c in self.children]
        if self.hidden_children:
            out["hiddenChildren"] = self.hidden_children
        return out

    def walk(self) -> list[tuple[int, TreeNode]]:
        """The node and its descendants with their depth, depth first."""
        out = [(0, self)]
        for child in self.children:
            out.extend((depth + 1, node) for depth, node in child.walk())
        return out


def resource_tree(rows: Sequence[ResourceRow], live: Mapping[ResourceKey, Manifest],
                  desired: Mapping[ResourceKey, Manifest] | None = None,
                  candidates: Sequence[Manifest] = ()) -> list[TreeNode]:
    """One node per resource row, with its children among ``candidates``.

    ``rows``: the record's ``status.resources``, typed; ``live``/``desired``: the objects
    by key.
    """
    by_owner = _by_owner(candidates)
    nodes = []
    for row in rows:
        key = row.resource_key
        health = row.health or ResourceHealth()
        obj = live.get(key)
        children, hidden = _children(obj, by_owner, MAX_DEPTH)
        nodes.append(TreeNode(
            group=key.group, kind=key.kind, namespace=key.namespace, name=key.name,
            sync=row.status or "Unknown",
            health=health.status or "", message=health.message or "",
            children=children, hidden_children=hidden,
            worker_groups=tuple(_groups_of((desired or {}).get(key), obj, by_owner))))
    return nodes


def _by_owner(candidates: Sequence[Manifest]) -> dict[str, list[Manifest]]:
    out: dict[str, list[Manifest]] = defaultdict(list)
    for obj in candidates:
        for ref in objects(dig(obj, "metadata", "ownerReferences")):
            uid = text(ref.get("uid"))
            if uid:
                out[uid].append(obj)
    for siblings in out.values():
        siblings.sort(key=lambda o: (text(o.get("kind")), text(dig(o, "metadata", "name"))))
    return out


def _children(obj: Manifest | None, by_owner: Mapping[str, list[Manifest]],
              depth: int) -> tuple[tuple[TreeNode, ...], int]:
    uid = text(dig(obj, "metadata", "uid"))
    if obj is None or depth <= 0 or not uid:
        return (), 0
    found = by_owner.get(uid, [])
    return tuple(_child(c, by_owner, depth - 1) for c in found[:MAX_CHILDREN]), \
        max(0, len(found) - MAX_CHILDREN)


def _child(obj: Manifest, by_owner: Mapping[str, list[Manifest]], depth: int) -> TreeNode:
    """A made object: no sync status (git does not own it); its groups show on the top node."""
    key = ResourceKey.of(obj)
    health = assess(obj)
    children, hidden = _children(obj, by_owner, depth)
    return TreeNode(group=key.group, kind=key.kind, namespace=key.namespace, name=key.name,
                    sync="", health=health.status.value if health else "",
                    message=health.message if health else "",
                    children=children, hidden_children=hidden, ray_group=ray_group_of(obj))


def ray_group_of(obj: Manifest) -> str:
    """A Ray Pod's group (``head`` for the head), from KubeRay's labels; ``""`` otherwise."""
    if text(obj.get("kind")) != "Pod":
        return ""
    labels = mapping(dig(obj, "metadata", "labels"))
    if text(labels.get(NODE_TYPE_LABEL)) == "head":
        return "head"
    return text(labels.get(GROUP_LABEL))


def _groups_of(desired: Manifest | None, live: Manifest | None,
               by_owner: Mapping[str, list[Manifest]]) -> list[WorkerGroupView]:
    """The worker-group view of a Ray object (a RayJob's or RayService's: its cluster's)."""
    if not (has_worker_groups(live) or has_worker_groups(desired)):
        return []
    cluster = live
    if live is not None and text(live.get("kind")) != "RayCluster":
        made = [c for c in by_owner.get(text(dig(live, "metadata", "uid")), [])
                if text(c.get("kind")) == "RayCluster"]
        cluster = _newest(made)
    pods = by_owner.get(text(dig(cluster, "metadata", "uid")), []) if cluster else []
    return worker_groups(desired, cluster, pods)


def _newest(clusters: list[Manifest]) -> Manifest | None:
    """A RayService may have two clusters during an upgrade: show the newest."""
    if not clusters:
        return None
    return max(clusters, key=lambda c: text(dig(c, "metadata", "creationTimestamp")))
