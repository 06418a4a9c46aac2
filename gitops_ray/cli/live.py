"""The live objects behind an app's resource tree, read with a bounded number of requests.

``get`` and ``diff`` show what KubeRay made from an app's Ray objects
(:mod:`gitops_ray.reconcile.tree`). A tree is never built by walking owner references
one GET at a time: the CLI reads each of the app's Ray objects once (only they have
children shown here; the other rows' sync and health are the record's, so no Secret is
read for nothing), then, per namespace holding a Ray object, lists the Pods and Services
labelled ``ray.io/cluster`` and (when a RayJob or RayService is there) the RayClusters
labelled ``ray.io/originated-from-crd``.
So a 2,000-worker cluster costs the same handful of requests as a small one, and
children are then matched by owner uid, never by label alone.

Git's side of the worker-group view comes from the record: it keeps git's ``replicas``
per group of each Ray object (``gitReplicas`` in a resource row), not the manifests.
An object the CLI may not read (RBAC) is shown without its live state, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gitops_ray.health.workergroups import CLUSTER_SPEC, replicas_skeleton
from gitops_ray.kube import Forbidden, Kube, UnknownKind
from gitops_ray.reconcile.tree import TreeNode, resource_tree
from gitops_ray.sync.appstatus import ResourceRow
from gitops_ray.types import Manifest, ResourceKey

RAY_GROUP = "ray.io"
CHILD_LABELS = {"Pod": "ray.io/cluster", "Service": "ray.io/cluster"}
"""Core kinds KubeRay makes for a RayCluster, and the label it puts on every one."""
MADE_CLUSTER_LABEL = "ray.io/originated-from-crd"
"""On a RayCluster a RayJob or RayService made (value ``RayJob`` / ``RayService``)."""

Row = ResourceRow


@dataclass
class LiveTree:
    """What one read found: the tree, and what could not be read (for a warning)."""

    nodes: list[TreeNode]
    unreadable: list[str] = field(default_factory=list)


def is_ray(row: Row) -> bool:
    return row.group == RAY_GROUP and row.kind in CLUSTER_SPEC


def read_tree(kube: Kube, rows: Sequence[Row],
              desired: Mapping[ResourceKey, Manifest] | None = None) -> LiveTree:
    """The tree of ``rows`` (a record's ``status.resources``) over the live cluster.

    ``desired``: git's objects when the caller has them (a fresh comparison); else git's
    side is what the rows recorded.
    """
    unreadable: list[str] = []
    read = _reader(kube, unreadable)
    live = {r.resource_key: obj for r in rows
            if is_ray(r) and (obj := read(r.api_version, r)) is not None}
    candidates = _candidates(kube, rows, unreadable)
    git = dict(desired) if desired is not None else recorded_desired(rows)
    return LiveTree(resource_tree(rows, live, git, candidates), unreadable)


def recorded_desired(rows: Iterable[Row]) -> dict[ResourceKey, Manifest]:
    """Stand-ins for git's Ray objects from the rows' ``gitReplicas``."""
    out = {}
    for row in rows:
        skeleton = replicas_skeleton(row.api_version, row.kind or "", dict(row.git_replicas or {}))
        if is_ray(row) and row.git_replicas is not None and skeleton is not None:
            out[row.resource_key] = skeleton
    return out


def _reader(kube: Kube, unreadable: list[str]) -> Callable[[str, Row], Manifest | None]:
    def read(api_version: str, row: Row) -> Manifest | None:
        key = row.resource_key
        if not api_version or not key.name:
            return None
        try:
            return kube.get(api_version, key.kind, name=key.name,
                            namespace=key.namespace or None)
        except UnknownKind:  # the CRD is gone: nothing live
            return None
        except Forbidden:
            unreadable.append(str(key))
            return None

    return read


def _candidates(kube: Kube, rows: Sequence[Row], unreadable: list[str]) -> list[Manifest]:
    """Pods, Services (and made RayClusters) in the namespaces of the app's Ray objects."""
    ray = [r for r in rows if is_ray(r)]
    found: list[Manifest] = []
    for namespace in sorted({r.namespace or "" for r in ray}):
        lists = [("v1", kind, label) for kind, label in CHILD_LABELS.items()]
        if any(r.kind != "RayCluster" and (r.namespace or "") == namespace
               for r in ray):
            lists.append((f"{RAY_GROUP}/v1", "RayCluster", MADE_CLUSTER_LABEL))
        for api_version, kind, label in lists:
            found.extend(_list(kube, (api_version, kind, namespace), label, unreadable))
    return found


def _list(kube: Kube, where: tuple[str, str, str], label: str,
          unreadable: list[str]) -> list[Manifest]:
    api_version, kind, namespace = where
    try:
        return kube.list(api_version, kind, namespace or None, label_selector=label)[0]
    except UnknownKind:
        return []
    except Forbidden:
        unreadable.append(f"{kind}s in {namespace}")
        return []
