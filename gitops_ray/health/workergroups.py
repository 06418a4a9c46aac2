"""The worker-group view: git's replicas next to the autoscaler's, per group, and who set them.

What a Ray platform team asks first about a RayCluster is per worker group: how many
workers git asks for, how many the cluster has now and *who* put that number there (the
Ray autoscaler, a person with ``kubectl``, or gitops-ray), the group's bounds, how many
of its Pods are ready, which workers the autoscaler asked KubeRay to delete, and how many
Pods still run an older template. No tool shows this, Argo CD included: its diff hides
``replicas`` under ``ignoreDifferences`` and its tree lists Pods without their group.

Who set the live ``replicas`` comes from ``metadata.managedFields``. KubeRay's
``workerGroupSpecs`` is an atomic list (no ``x-kubernetes-list-type``), so the whole list
belongs to whichever writer changed it last: the Ray autoscaler patches it without a
``fieldManager``, so the API server names it after its User-Agent (``python-requests``).
Should the CRD make the list a map keyed by ``groupName`` (kuberay #4840), the per-group
``replicas`` entry is read instead. With several candidates the newest entry wins.

Pure and total like the rest of :mod:`gitops_ray.health`: the RayCluster (git's and the
live one) and its Pods come from the caller; malformed input yields empty fields, never
an error. Used by ``gitops-ray get``, ``gitops-ray diff`` and the web page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from gitops_ray.health.fields import dig, mapping, number, objects, text
from gitops_ray.health.pod import pod_health
from gitops_ray.health.rollout import (
    CLUSTER_LABEL,
    GROUP_LABEL,
    NODE_TYPE_LABEL,
    matches_template,
)
from gitops_ray.health.status import HealthStatus
from gitops_ray.types import Manifest

CLUSTER_SPEC = {"RayCluster": (), "RayJob": ("rayClusterSpec",),
                "RayService": ("rayClusterConfig",),
                "RayCronJob": ("jobTemplate", "rayClusterSpec")}  # the RayJobs' template
"""Where each Ray kind keeps its RayClusterSpec under ``.spec``."""


class Writer(StrEnum):
    """Field managers the worker-group view explains (as the API server names them)."""

    AUTOSCALER = "python-requests"  # the Ray autoscaler's KubeRay provider (no fieldManager)
    KUBECTL = "kubectl"  # kubectl-edit, kubectl-patch, kubectl-scale, kubectl-client-side-apply


WRITER_LABELS = {Writer.AUTOSCALER: "autoscaler", Writer.KUBECTL: "by hand"}


def writer_label(manager: str) -> str:
    """``python-requests (autoscaler)``, ``kubectl-edit (by hand)``, ``gitops-ray``."""
    if not manager:
        return "-"
    known = next((w for w in (Writer.AUTOSCALER, Writer.KUBECTL)
                  if manager == w or manager.startswith(f"{w.value}-")), None)
    return f"{manager} ({WRITER_LABELS[known]})" if known is not None else manager


@dataclass(frozen=True)
class WorkerGroupView:
    """One worker group as git and the cluster see it (``None``: that side does not say)."""

    group: str
    in_git: bool
    live: bool
    git_replicas: int | None
    live_replicas: int | None
    replicas_manager: str  # who last set the live replicas ("" when nobody can tell)
    min_replicas: int | None
    max_replicas: int | None
    ready_pods: int
    total_pods: int
    stale_pods: int  # Pods on an older template than the live group's
    workers_to_delete: tuple[str, ...] = field(default=())

    @property
    def writer(self) -> str:
        """Who set the live replicas, explained: ``python-requests (autoscaler)``."""
        return writer_label(self.replicas_manager)

    @property
    def drifted(self) -> bool:
        """Git and live disagree on the replicas (the autoscaler's business, not drift)."""
        return (self.git_replicas is not None and self.live_replicas is not None
                and self.git_replicas != self.live_replicas)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, camelCase like the Kubernetes objects it summarises."""
        raw = asdict(self)
        return {"group": raw["group"], "inGit": raw["in_git"], "live": raw["live"],
                "gitReplicas": raw["git_replicas"], "liveReplicas": raw["live_replicas"],
                "replicasManager": raw["replicas_manager"],
                "minReplicas": raw["min_replicas"], "maxReplicas": raw["max_replicas"],
                "readyPods": raw["ready_pods"], "totalPods": raw["total_pods"],
                "stalePods": raw["stale_pods"],
                "workersToDelete": list(raw["workers_to_delete"])}


def has_worker_groups(obj: Manifest | None) -> bool:
    """Whether ``obj`` is a Ray object with a cluster spec this view can show."""
    return (bool(obj) and text(mapping(obj).get("kind")) in CLUSTER_SPEC
            and text(mapping(obj).get("apiVersion")).startswith("ray.io/"))


def worker_groups(desired: Manifest | None, live: Manifest | None,
                  pods: Sequence[Manifest] = ()) -> list[WorkerGroupView]:
    """The groups of git's object and the live one: live order first, then git-only ones.

    ``pods`` may be any Pods; only the live RayCluster's (label ``ray.io/cluster``, same
    namespace, not being deleted) count. For a RayJob or RayService the Pods belong to
    the RayCluster the operator made, so the caller passes those (or none).
    """
    git_groups = _groups(desired)
    live_groups = _groups(live)
    owners = _replica_owners(live, list(live_groups))
    counts = _pod_counts(live, live_groups, pods)
    names = list(live_groups) + [g for g in git_groups if g not in live_groups]
    return [_view(name, git_groups.get(name), live_groups.get(name), owners.get(name, ""),
                  counts.get(name, (0, 0, 0)))
            for name in names]


def _view(name: str, git: Manifest | None, live: Manifest | None, owner: str,
          count: tuple[int, int, int]) -> WorkerGroupView:
    bounds = live if live is not None else (git or {})
    return WorkerGroupView(
        group=name, in_git=git is not None, live=live is not None,
        git_replicas=number(git.get("replicas")) if git is not None else None,
        live_replicas=number(live.get("replicas")) if live is not None else None,
        replicas_manager=owner if live is not None else "",
        min_replicas=number(bounds.get("minReplicas")),
        max_replicas=number(bounds.get("maxReplicas")),
        ready_pods=count[0], total_pods=count[1], stale_pods=count[2],
        workers_to_delete=tuple(text(w) for w in
                                (dig(live, "scaleStrategy", "workersToDelete") or [])
                                if isinstance(w, str)) if live is not None else ())


def cluster_spec(obj: Manifest | None) -> Manifest:
    """The RayClusterSpec of a RayCluster, RayJob or RayService (``{}`` otherwise)."""
    path = CLUSTER_SPEC.get(text(mapping(obj).get("kind")))
    return mapping(dig(obj, "spec", *path)) if path is not None else {}


def replicas_of(obj: Manifest | None) -> dict[str, int | None]:
    """Git's ``replicas`` per group name (``None``: not set), what a record keeps of git.

    A status record stores no manifests; this is enough for the view to show git's
    number next to live's later (:func:`replicas_skeleton`).
    """
    return {name: number(group.get("replicas")) for name, group in _groups(obj).items()}


def replicas_skeleton(api_version: str, kind: str,
                      replicas: dict[str, int | None]) -> Manifest | None:
    """A stand-in for git's object holding only its groups' ``replicas`` (see above)."""
    path = CLUSTER_SPEC.get(kind)
    if path is None or not isinstance(replicas, dict):
        return None
    groups = [{"groupName": name, **({"replicas": n} if number(n) is not None else {})}
              for name, n in replicas.items() if isinstance(name, str)]
    spec: Manifest = {"workerGroupSpecs": groups}
    for key in reversed(path):
        spec = {key: spec}
    return {"apiVersion": api_version, "kind": kind, "spec": spec}


def _groups(obj: Manifest | None) -> dict[str, Manifest]:
    out: dict[str, Manifest] = {}
    for group in objects(cluster_spec(obj).get("workerGroupSpecs")):
        name = text(group.get("groupName"))
        if name and name not in out:
            out[name] = group
    return out


def _replica_owners(live: Manifest | None, names: list[str]) -> dict[str, str]:
    """Group name -> the manager that last set its ``replicas`` (see the module doc)."""
    if live is None or not names:
        return {}
    prefix = tuple(f"f:{key}" for key in ("spec", *CLUSTER_SPEC.get(text(live.get("kind")), ())))
    best: dict[str, tuple[str, str]] = {}  # group -> (time, manager)
    for entry in objects(dig(live, "metadata", "managedFields")):
        node: Any = mapping(entry.get("fieldsV1"))
        for key in (*prefix, "f:workerGroupSpecs"):
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        stamp, manager = text(entry.get("time")), text(entry.get("manager"))
        for name in _owned_groups(node, names):
            if name not in best or stamp >= best[name][0]:
                best[name] = (stamp, manager)
    return {name: manager for name, (_, manager) in best.items()}


def _owned_groups(node: Manifest, names: list[str]) -> list[str]:
    """The groups whose replicas this ``fieldsV1`` node of ``workerGroupSpecs`` owns."""
    if not node:  # an atomic list: the whole of it, every group
        return names
    owned = []
    for key, child in node.items():
        if not key.startswith("k:"):
            continue
        try:
            item = json.loads(key[2:])
        except ValueError:
            continue
        if (isinstance(item, dict) and item.get("groupName") in names
                and isinstance(child, dict) and "f:replicas" in child):
            owned.append(str(item["groupName"]))
    return owned


def _pod_counts(live: Manifest | None, groups: dict[str, Manifest],
                pods: Sequence[Manifest]) -> dict[str, tuple[int, int, int]]:
    """Group -> (ready, total, stale) over the live cluster's worker Pods."""
    if live is None or not groups:
        return {}
    meta = mapping(live.get("metadata"))
    name, namespace = text(meta.get("name")), text(meta.get("namespace"))
    counts = {g: [0, 0, 0] for g in groups}
    for pod in pods:
        labels = mapping(dig(pod, "metadata", "labels"))
        group = text(labels.get(GROUP_LABEL))
        if (text(labels.get(CLUSTER_LABEL)) != name or group not in counts
                or text(labels.get(NODE_TYPE_LABEL)) == "head"
                or dig(pod, "metadata", "deletionTimestamp")
                or text(dig(pod, "metadata", "namespace")) not in ("", namespace)):
            continue
        tally = counts[group]
        tally[1] += 1
        if pod_health(pod).status == HealthStatus.HEALTHY:
            tally[0] += 1
        if not matches_template(mapping(groups[group].get("template")), pod):
            tally[2] += 1
    return {g: (c[0], c[1], c[2]) for g, c in counts.items()}
