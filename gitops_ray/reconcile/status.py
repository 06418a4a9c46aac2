"""App status as users see it (``gitops-ray status``), derived from a comparison.

The status mirrors ``argocd app list``: sync status, health, revision, plus the last
operation and a short history. It is persisted in the app's record ConfigMap by
:func:`save_status`, so ``status`` and ``wait`` work from any machine and a restarted
controller knows where it left off. The repository URL is stored redacted: a
``user:token@`` in an Application's ``repoURL`` must not end up readable by everyone who
may read ConfigMaps in the control namespace.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitops_ray.diff import ResourceDiff
from gitops_ray.diff.ray import RAY_GROUP
from gitops_ray.health import Health, HealthStatus, aggregate, assess
from gitops_ray.health.queued import waits_for_admission
from gitops_ray.health.workergroups import CLUSTER_SPEC, replicas_of
from gitops_ray.kube import Kube, UnknownKind
from gitops_ray.kube.workloads import workloads_in
from gitops_ray.reconcile.pipeline import Comparison, DesiredObject
from gitops_ray.redact import redact
from gitops_ray.render.apps import Destination
from gitops_ray.sync import statuswrites
from gitops_ray.sync.records import (
    MAX_APPLIED_MARKS,
    AppRecord,
    RecordStore,
    applied_mark,
    markable,
)
from gitops_ray.sync.request import SyncResult
from gitops_ray.types import Manifest, ResourceKey, split_api_version

MAX_WARNINGS = 20  # e.g. skipped ignore rules; they name the rule and object, no values
MAX_IMAGES = 50
MAX_FACTS = 100_000  # git objects whose images and replicas are remembered (by content)


_derived: dict[str, tuple[tuple[Any, ...], dict[str, Any], weakref.ref[Comparison]]] = {}
_derived_lock = threading.Lock()
MAX_DERIVED = 100_000  # apps whose last derived status is remembered


def status_of(comparison: Comparison) -> dict[str, Any]:
    """The status fields a comparison determines (a new dict; its lists are shared).

    Derived again only when something it is derived from changed. Why: a controller
    derives every app's status on every refresh, to see that there is nothing to write;
    at 5,000 RayClusters that was a tenth of a no-op cycle's CPU. A refresh that changed
    nothing hands back the same render, per-object verdicts and healths (the pipeline's
    memo), so the check is mostly identity comparisons. The nested lists and rows are
    shared with earlier calls: callers only ever serialize them.
    """
    name = comparison.app.name
    with _derived_lock:
        last = _derived.get(name)
    if last is not None and last[2]() is comparison:  # the pipeline handed the same one back
        return {**last[1], "comparedAt": time.time()}
    inputs = _inputs(comparison)
    derived = last is None or last[0] != inputs
    fields = last[1] if last is not None and not derived else _derive(comparison)
    with _derived_lock:
        if len(_derived) >= MAX_DERIVED and name not in _derived:
            del _derived[next(iter(_derived))]
        _derived[name] = (inputs, fields, weakref.ref(comparison))
    return {**fields} if derived else {**fields, "comparedAt": time.time()}


def _inputs(comparison: Comparison) -> tuple[Any, ...]:
    """Everything :func:`_derive` reads, as small values.

    Values, not the comparison's objects: a first comparison's diffs carry both
    normalized sides of every object, and remembering those for every app kept 10,000
    RayClusters' worth of decoded copies alive (RSS 1.7 GiB instead of 0.5).
    """
    return (comparison.app, comparison.revision,
            tuple((d.key, d.digest, d.api_version) for d in comparison.desired),
            tuple((r.key, r.status, r.reason, r.refused, _live_api_version(r))
                  for r in comparison.diff.resources),
            comparison.health, tuple(comparison.resource_health.items()), comparison.rollouts,
            comparison.impacts,
            comparison.conditions, tuple(comparison.warnings), comparison.render_problems)


def _live_api_version(diff: ResourceDiff) -> str:
    """The apiVersion a resource row shows when git has no object for it (extraneous)."""
    return str((diff.live_normalized or {}).get("apiVersion", ""))


def _derive(comparison: Comparison) -> dict[str, Any]:
    health = comparison.health
    facts = [desired_facts(d) for d in comparison.desired]  # by content: a no-op unpacks none
    return {
        "revision": comparison.revision,
        "sync": comparison.diff.status.value,
        "health": (health.status if health else HealthStatus.UNKNOWN).value,
        "healthMessage": (health.message if health else "") or _rollouts(comparison),
        "rolloutPending": list(comparison.rollouts),
        "impact": [i.as_dict() for i in comparison.impacts],
        "resources": _rows(comparison, {f.key: f.replicas for f in facts
                                        if f.replicas is not None}),
        "conditions": [{"type": c.type.value, "message": c.message}
                       for c in comparison.conditions],
        "images": sorted(set().union(*(f.images for f in facts)))[:MAX_IMAGES],
        "warnings": comparison.warnings[:MAX_WARNINGS],
        "conflicts": comparison.diff.conflicts[:MAX_WARNINGS],
        "refusals": [str(r) for r in comparison.diff.refusals[:MAX_WARNINGS]],
        "repoURL": redact(comparison.app.source.repo_url),
        "path": comparison.app.source.path,
        "chart": comparison.app.source.chart,
        "targetRevision": comparison.app.source.target_revision,
        "syncPolicy": comparison.app.sync_policy.summary,
        "selfHeal": comparison.app.sync_policy.self_heal,
        "destinationNamespace": comparison.app.destination.namespace,
        **destination_of(comparison.app.destination),
        "comparedAt": time.time(),
        "error": "",
        "errorReason": "",
        "renderWarnings": list(comparison.render_problems),
    }


def destination_of(dest: Destination) -> dict[str, str]:
    """The cluster the app names (``get`` reads that cluster's live objects)."""
    return {"destinationName": dest.name, "destinationServer": redact(dest.server)}


def resources_of(comparison: Comparison,
                 manifests: list[Manifest] | None = None) -> list[dict[str, Any]]:
    """Each resource's sync status and health, with what Argo CD's resource rows show.

    Ray objects also keep git's ``replicas`` per worker group (``gitReplicas``), for the
    worker-group view of ``get``. ``manifests``: git's objects, if already unpacked.
    """
    return _rows(comparison, git_replicas(
        comparison.manifests() if manifests is None else manifests))


def _rows(comparison: Comparison, replicas: dict[ResourceKey, dict[str, int | None]]
          ) -> list[dict[str, Any]]:
    versions = {o.key: o.api_version for o in comparison.desired}
    rows = []
    for r in comparison.diff.resources:
        api_version = versions.get(r.key) or _live_api_version(r)
        row: dict[str, Any] = {"key": str(r.key), "status": r.status.value, "reason": r.reason,
                               "group": r.key.group, "version": split_api_version(api_version)[1],
                               "kind": r.key.kind, "namespace": r.key.namespace,
                               "name": r.key.name}
        health = comparison.resource_health.get(r.key)
        if health is not None:
            row["health"] = {"status": health.status.value, "message": health.message}
        if r.key in replicas:
            row["gitReplicas"] = replicas[r.key]
        rows.append(row)
    return rows


def git_replicas(manifests: list[Manifest]) -> dict[ResourceKey, dict[str, int | None]]:
    """Git's ``replicas`` per worker group of each Ray object, for the worker-group view.

    The record keeps no manifests, and ``get`` shows git's number next to live's.
    """
    keys = [(ResourceKey.of(m), m) for m in manifests]
    return {key: replicas_of(m) for key, m in keys
            if key.group == RAY_GROUP and key.kind in CLUSTER_SPEC}


@dataclass(frozen=True)
class DesiredFacts:
    """What the status reads of one of git's objects: its images and git's replicas."""

    key: ResourceKey
    images: frozenset[str]
    replicas: dict[str, int | None] | None  # Ray objects with worker groups only


_facts: dict[str, DesiredFacts] = {}
_facts_lock = threading.Lock()


def desired_facts(obj: DesiredObject) -> DesiredFacts:
    """``obj``'s facts, remembered by its content digest (at most :data:`MAX_FACTS`).

    Why: the status is derived on every refresh, and unpacking every git object of
    every app for its images would make a no-op cycle at 10,000 RayClusters cost
    seconds; an unchanged object's facts are the same as last time.
    """
    with _facts_lock:
        known = _facts.get(obj.digest)
    if known is not None and known.key == obj.key:
        return known
    manifest = obj.manifest()
    replicas = git_replicas([manifest]).get(obj.key)
    facts = DesiredFacts(obj.key, frozenset(images_of([manifest])), replicas)
    with _facts_lock:
        if len(_facts) >= MAX_FACTS:
            del _facts[next(iter(_facts))]
        _facts[obj.digest] = facts
    return facts


def images_of(objects: list[Manifest]) -> list[str]:
    """The container images git asks for (Argo CD's ``status.summary.images``), sorted."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("containers", "initContainers") and isinstance(value, list):
                    found.update(str(c["image"]) for c in value
                                 if isinstance(c, dict) and c.get("image"))
                else:
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    for obj in objects:
        visit(obj.get("spec"))
    return sorted(found)


def _rollouts(comparison: Comparison) -> str:
    """Healthy apps have no message (Argo CD); Pods on an older template are worth one."""
    return "rollout pending: " + "; ".join(comparison.rollouts) if comparison.rollouts else ""


RecordChange = Callable[[AppRecord], None]
"""A change to an app's record, made in the same write as the one it is passed to."""


def save_status(store: RecordStore, comparison: Comparison,
                result: SyncResult | None = None, also: RecordChange | None = None
                ) -> AppRecord:
    """Persist the comparison's status (and the sync operation, when there was one).

    A sync step that waits for a wave is recorded as the running operation, not in the
    history: the history holds finished operations only. ``also``: the caller's own
    change of the record (the controller's note on the operation), in the same write.
    """
    fields = status_of(comparison)

    def change(record: AppRecord) -> None:
        statuswrites.compared(record, fields)
        _set_inventory(record, result)
        if result is not None:
            record.applied = applied_marks(comparison)
            statuswrites.sync_step(record, result.as_operation(), running=result.running)
        else:
            add_marks(record, proven_marks(comparison))
        if also is not None:
            also(record)

    return store.update(comparison.app.name, change)


def applied_marks(comparison: Comparison) -> dict[str, str]:
    """The record's applied marks after a sync (:mod:`gitops_ray.sync.records`).

    Replaced with each sync's status. A refresh only adds proven ones
    (:func:`proven_marks`): one that sees an object changed leaves its old mark, which no
    longer matches anything, rather than write the record.
    """
    marks = {str(k): applied_mark(*v) for k, v in comparison.applied.items() if markable(k)}
    return dict(sorted(marks.items())) if len(marks) <= MAX_APPLIED_MARKS else {}


def proven_marks(comparison: Comparison) -> dict[str, str]:
    """The marks a refresh adds (none if it proved nothing).

    Objects a no-op dry run proved are as our apply leaves them
    (:attr:`~gitops_ray.reconcile.pipeline.Comparison.proven`).
    """
    return {str(k): applied_mark(*comparison.applied[k]) for k in comparison.proven
            if markable(k) and k in comparison.applied}


def add_marks(record: AppRecord, marks: Mapping[str, str]) -> None:
    """Add ``marks`` to the record's, within :data:`MAX_APPLIED_MARKS` (else unchanged).

    A refresh only adds: the marks of objects it saw changed no longer match anything and
    are replaced by the next sync's.
    """
    if adds_marks(record.applied, marks):
        record.applied = dict(sorted({**record.applied, **marks}.items()))


def adds_marks(applied: Mapping[str, str], marks: Mapping[str, str]) -> bool:
    """Whether :func:`add_marks` would change a record whose marks are ``applied``."""
    missing = [k for k, v in marks.items() if applied.get(k) != v]
    return bool(missing) and len(applied) + sum(1 for k in missing if k not in applied) \
        <= MAX_APPLIED_MARKS


def save_failed_sync(store: RecordStore, result: SyncResult, error: str,
                     also: RecordChange | None = None) -> AppRecord:
    """Record a sync that failed without a comparison (before or after it).

    As the controller records a failed refresh: sync status ``Unknown`` (we no longer
    know), the error, and the failed operation in the history, so ``status`` cannot go on
    showing the Synced of an earlier sync. ``also``: as :func:`save_status`.
    """

    def change(record: AppRecord) -> None:
        statuswrites.failed(record, error)
        _set_inventory(record, result)
        statuswrites.finished(record, result.as_operation())
        if also is not None:
            also(record)

    return store.update(result.app, change)


def _set_inventory(record: AppRecord, result: SyncResult | None) -> None:
    """The inventory the sync ended with, written with its status (engine, "The inventory")."""
    if result is not None and result.inventory is not None:
        record.inventory = sorted(set(result.inventory))


def save_operation(store: RecordStore, result: SyncResult) -> None:
    """Record a finished operation (e.g. one the CLI gave up waiting for), nothing else."""
    store.update(result.app, lambda r: statuswrites.finished(r, result.as_operation()))


def live_health(kube: Kube, record: AppRecord) -> Health:
    """The app's health now, from the live objects of its recorded inventory.

    Needs neither git nor a controller: what ``wait --health`` polls, so an app whose
    RayCluster became ready after the last recorded comparison is seen as Healthy.
    """
    return aggregate(assess_live(kube, _get(kube, e.api_version, e.kind, e.namespace, e.name))
                     for e in record.inventory)


def assess_live(kube: Kube, obj: dict[str, Any] | None) -> Health | None:
    """:func:`assess`, with Kueue's Workloads read for an object waiting for admission."""
    if obj is None or not waits_for_admission(obj):
        return assess(obj)
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    return assess(obj, workloads=workloads_in(kube, namespace))


def _get(kube: Kube, api_version: str, kind: str, namespace: str, name: str
         ) -> dict[str, Any] | None:
    try:
        return kube.get(api_version, kind, name=name, namespace=namespace or None)
    except UnknownKind:
        return None
