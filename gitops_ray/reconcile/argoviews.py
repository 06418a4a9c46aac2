"""Argo CD's resource tree and managed resources of a handed-over app, as pure functions.

Why: argocd-server answers the UI's resource tree and diff views, ``argocd app
resources``, ``argocd app diff`` and ``argocd app manifests`` not from the Application
but from the application controller's Redis cache (``server/application/application.go``:
``getAppResources``, ``ManagedResources``), which Argo CD's controller does not fill for
an app it skips. gitops-ray compares the app anyway, so it can fill those two entries
itself (:mod:`gitops_ray.runtime.argoredis` writes them); this module says what they
hold, in the JSON of argo-cd's ``pkg/apis/application/v1alpha1/types.go``:

* ``app|resources-tree|<app>``: an ``ApplicationTree`` — one ``ResourceNode`` per object
  of the app (its live ``uid``, ``resourceVersion``, ``createdAt``, health; a missing
  one with health ``Missing``, as ``getResourceTree`` in ``controller/appcontroller.go``
  makes it) and one per object the cluster made from them (found by
  ``ownerReferences[].uid``, as Argo CD's cluster cache does: a RayCluster's Pods and
  Services, a RayJob's RayCluster), each with ``parentRefs`` to its owners, a Pod's
  ``images`` and info (phase, node, ready containers, its Ray group). Nodes are sorted by
  ``group/kind/namespace/name`` (``ApplicationTree.Normalize``); no shards, hosts or
  orphaned nodes.
* ``app|managed-resources|<app>``: a list of ``ResourceDiff`` sorted by full name
  (``SetAppManagedResources``): ``liveState`` the live object (``"null"`` when absent,
  as ``hideSecretData`` writes), ``predictedLiveState`` and ``normalizedLiveState`` the
  two sides gitops-ray compared (its server-side dry run of git's object and the live
  object, both normalized by the app's rules), ``modified`` when OutOfSync.
  A Synced object whose verdict was kept from an earlier comparison (live as gitops-ray's
  apply left it) has no compared sides: both are the live object without the server's
  fields. ``targetState`` is git's object as that dry run stored it (git's own when there
  is none): Argo CD 3.6's ``argocd app diff`` compares ``targetState`` with
  ``normalizedLiveState`` client-side, so it then shows the difference gitops-ray sees,
  not the API server's defaults.
  Secrets' values are masks on every side (:func:`gitops_ray.secretmask.masked`, Argo
  CD's ``++++++++`` masks, equal values equal masks), as Argo CD's ``HideSecretData``.

The cache's key format is versioned: ``<key>|<common.CacheVersion>`` (``util/cache/
cache.go``), plus ``.gz`` when Redis compression is on (``util/cache/redis.go``).
:data:`CACHE_VERSIONS` is the Argo CD minor versions whose source was read for this
format; for any other, :func:`cache_version` says why nothing is written.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitops_ray.diff.compare import ResourceDiff, strip_server_fields
from gitops_ray.health import assess
from gitops_ray.health.fields import dig, mapping, objects, text
from gitops_ray.jsonio import dumps
from gitops_ray.reconcile.tree import MAX_DEPTH, ray_group_of
from gitops_ray.secretmask import is_secret, masked
from gitops_ray.types import Manifest, ResourceKey, SyncStatus

CACHE_VERSIONS = {"3.2": "1.8.3", "3.3": "1.8.3", "3.4": "1.8.3", "3.5": "1.8.3",
                  "3.6": "1.8.3"}
"""Argo CD minor version -> its ``common.CacheVersion`` (read in v3.2.11, v3.3.19,
v3.4.13, v3.5.7 and v3.6.1: the keys, ``ApplicationTree`` and ``ResourceDiff`` are the
same in all of them)."""
TREE_KEY = "app|resources-tree|"
MANAGED_KEY = "app|managed-resources|"
MAX_TREE_NODES = 5_000
"""Nodes of one app's tree (its objects first); the rest are left out."""
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.\d+")


@dataclass(frozen=True)
class Format:
    """How one Argo CD version keys and encodes its app-state cache."""

    argocd_version: str  # as argocd-server reported it, e.g. v3.6.1+abc1234
    cache_version: str  # its common.CacheVersion, e.g. 1.8.3

    def tree_key(self, app: str) -> str:
        return f"{TREE_KEY}{app}|{self.cache_version}"

    def managed_key(self, app: str) -> str:
        """Also the channel argocd-server's tree watch subscribes to (``NotifyUpdated``)."""
        return f"{MANAGED_KEY}{app}|{self.cache_version}"


def cache_version(argocd_version: str) -> Format | str:
    """The :class:`Format` of an Argo CD version, or why gitops-ray does not write for it."""
    found = _VERSION.match(argocd_version.strip())
    if found is None:
        return f"Argo CD version {argocd_version[:40]!r} is not a version gitops-ray can read"
    minor = f"{found.group(1)}.{found.group(2)}"
    if minor not in CACHE_VERSIONS:
        return (f"Argo CD {argocd_version[:40]}: its cache format is not known to gitops-ray "
                f"(it writes the format of Argo CD {', '.join(CACHE_VERSIONS)})")
    return Format(argocd_version, CACHE_VERSIONS[minor])


# -- the resource tree ---------------------------------------------------------------------

def application_tree(rows: Sequence[Mapping[str, Any]], live: Mapping[ResourceKey, Manifest],
                     candidates: Sequence[Manifest] = ()) -> dict[str, Any]:
    """The app's ``ApplicationTree`` (see the module docstring).

    ``rows``: the record's ``status.resources``; ``live``: the app's objects by key;
    ``candidates``: objects the cluster may have made from them (Pods, Services, ...).
    """
    by_owner = _by_owner(candidates)
    nodes: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = ResourceKey(text(row.get("group")), text(row.get("kind")),
                          text(row.get("namespace")), text(row.get("name")))
        obj = live.get(key)
        node = _node(obj, mapping(row.get("health"))) if obj is not None else \
            _missing(key, text(row.get("version")))
        nodes.setdefault(_full_name(node), node)
        if obj is not None:
            _descend(obj, by_owner, nodes, MAX_DEPTH)
    ordered = sorted(nodes.values(), key=_full_name)[:MAX_TREE_NODES]
    return {"nodes": ordered} if ordered else {}


def _descend(obj: Manifest, by_owner: Mapping[str, list[Manifest]],
             nodes: dict[str, dict[str, Any]], depth: int) -> None:
    uid = text(dig(obj, "metadata", "uid"))
    if depth <= 0 or not uid:
        return
    for child in by_owner.get(uid, []):
        if len(nodes) >= MAX_TREE_NODES:
            return
        node = _node(child, None)
        if _full_name(node) not in nodes:
            nodes[_full_name(node)] = node
            _descend(child, by_owner, nodes, depth - 1)


def _by_owner(candidates: Sequence[Manifest]) -> dict[str, list[Manifest]]:
    out: dict[str, list[Manifest]] = defaultdict(list)
    for obj in candidates:
        for ref in objects(dig(obj, "metadata", "ownerReferences")):
            if text(ref.get("uid")):
                out[text(ref.get("uid"))].append(obj)
    return out


def _node(obj: Manifest, health: Mapping[str, Any] | None) -> dict[str, Any]:
    """A ``ResourceNode`` of a live object; ``health`` the row's, else assessed here."""
    meta = mapping(obj.get("metadata"))
    group, _, version = text(obj.get("apiVersion")).rpartition("/")
    node: dict[str, Any] = {
        "group": group, "version": version, "kind": text(obj.get("kind")),
        "namespace": text(meta.get("namespace")), "name": text(meta.get("name")),
        "uid": text(meta.get("uid")), "resourceVersion": text(meta.get("resourceVersion"))}
    refs = [_parent_ref(ref, node["namespace"])
            for ref in objects(meta.get("ownerReferences"))]
    if refs:
        node["parentRefs"] = refs
    if health is None:
        verdict = assess(obj)
        health = {"status": verdict.status.value, "message": verdict.message} if verdict \
            else {}
    shown = {k: text(health.get(k)) for k in ("status", "message") if text(health.get(k))}
    if shown:
        node["health"] = shown
    if text(meta.get("creationTimestamp")):
        node["createdAt"] = text(meta.get("creationTimestamp"))
    if node["kind"] == "Pod" and not group:
        node.update(_pod_info(obj))
    return {k: v for k, v in node.items() if v not in ("", None) or k == "name"}


def _missing(key: ResourceKey, version: str) -> dict[str, Any]:
    node = {"group": key.group, "version": version, "kind": key.kind,
            "namespace": key.namespace, "name": key.name, "health": {"status": "Missing"}}
    return {k: v for k, v in node.items() if v != ""}


def _parent_ref(ref: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    group, _, version = text(ref.get("apiVersion")).rpartition("/")
    out = {"group": group, "version": version, "kind": text(ref.get("kind")),
           "namespace": namespace, "name": text(ref.get("name")), "uid": text(ref.get("uid"))}
    return {k: v for k, v in out.items() if v}


def _pod_info(pod: Manifest) -> dict[str, Any]:
    """A Pod's images and info items, as ``populatePodInfo`` (controller/cache/info.go)."""
    spec, status = mapping(pod.get("spec")), mapping(pod.get("status"))
    containers = objects(spec.get("containers"))
    images = sorted({text(c.get("image")) for c in [*objects(spec.get("initContainers")),
                                                     *containers] if text(c.get("image"))})
    ready = sum(1 for c in objects(status.get("containerStatuses")) if c.get("ready") is True)
    info = [("Status Reason", text(status.get("reason")) or text(status.get("phase"))),
            ("Node", text(spec.get("nodeName"))),
            ("Containers", f"{ready}/{len(containers)}"),
            ("Ray Group", ray_group_of(pod))]
    out: dict[str, Any] = {"info": [{"name": n, "value": v} for n, v in info if v]}
    if images:
        out["images"] = images
    return out


def _full_name(node: Mapping[str, Any]) -> str:
    return "/".join(str(node.get(k) or "") for k in ("group", "kind", "namespace", "name"))


# -- managed resources ---------------------------------------------------------------------

def managed_resources(diffs: Iterable[ResourceDiff], desired: Mapping[ResourceKey, Manifest],
                      live: Mapping[ResourceKey, Manifest]) -> list[dict[str, Any]]:
    """The app's ``[]ResourceDiff``, sorted by full name (see the module docstring).

    ``diffs``: the comparison's resources; ``desired``: git's objects by key; ``live``:
    the live objects by key (either may lack a key: that side is ``"null"``).
    """
    out = [_resource_diff(rd, desired.get(rd.key), live.get(rd.key)) for rd in diffs]
    return sorted(out, key=_full_name)


def _resource_diff(rd: ResourceDiff, target: Manifest | None,
                   live: Manifest | None) -> dict[str, Any]:
    predicted, normalized = rd.desired_normalized, rd.live_normalized
    if is_secret(rd.key):  # the compared sides are masked already (diff.compare)
        target, live = masked(target, live)
    if rd.status == SyncStatus.SYNCED and live is not None and (
            predicted is None or normalized is None):  # a settled verdict keeps no sides:
        predicted = normalized = strip_server_fields(live)  # live is as git's apply left it
    if predicted is not None:  # git's object as the dry run stored it: what `argocd app
        target = predicted  # diff` compares with normalizedLiveState, as gitops-ray does
    item: dict[str, Any] = {
        "group": rd.key.group, "kind": rd.key.kind, "namespace": rd.key.namespace,
        "name": rd.key.name, "targetState": _json(target), "liveState": _json(_bare(live)),
        "predictedLiveState": _json(predicted), "normalizedLiveState": _json(normalized)}
    version = text(dig(live, "metadata", "resourceVersion"))
    if version:
        item["resourceVersion"] = version
    if rd.status == SyncStatus.OUT_OF_SYNC:
        item["modified"] = True
    return {k: v for k, v in item.items() if v != ""}


def _bare(obj: Manifest | None) -> Manifest | None:
    """The live object without ``managedFields`` (bulk nobody reads in these views)."""
    if obj is None or "managedFields" not in mapping(obj.get("metadata")):
        return obj
    meta = {k: v for k, v in mapping(obj.get("metadata")).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _json(obj: Manifest | None) -> str:
    return "null" if obj is None else dumps(obj).decode()
