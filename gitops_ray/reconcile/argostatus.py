"""Argo CD's view of an app: the Application's ``status`` and ``.operation``, as pure functions.

Why: an Application annotated ``argocd.argoproj.io/skip-reconcile: "true"`` is left alone by
Argo CD's application controller, so nothing writes its status; its UI, ``argocd app
get/list`` and notifications read exactly that status. gitops-ray reconciles those apps
(when they also carry ``gitops-ray.io/managed: "true"``) and writes the status back in
Argo CD's schema (``pkg/apis/application/v1alpha1/types.go``: ``ApplicationStatus``), so
Argo CD's tools keep working while gitops-ray does the diff, sync and health.

The app's record ConfigMap (:mod:`gitops_ray.sync.records`) stays the one source of truth:
inventory, operations and history live there, and everything here is a *projection* of
a record's status into Argo CD's words. So the controller's logic (auto-sync, waves,
backoff, leader hand-over) is the same for an Application in git and one in the cluster,
and a status lost or garbled by another writer is simply written again.

The other direction, Argo CD's controls: the Sync button and ``argocd app sync`` set
``.operation`` on the Application (``Operation``: ``sync{revision, prune, dryRun,
resources, syncOptions}``, ``initiatedBy``, ``retry``); :func:`parse_operation` reads it
into a :class:`ManualOperation` the controller executes, and the finished operation is
written as ``status.operationState`` while ``.operation`` is cleared, as Argo CD's
controller does (``controller/appcontroller.go`` ``processRequestedAppOperation``,
``finalizeApplicationDeletion``). A rollback (``argocd app rollback``) is an operation
whose revision and source come from ``status.history``.

The Application's definition as gitops-ray takes it over (:func:`cluster_application`:
without its status, ``.operation`` and request annotations) is read here too, so the
controller's watch (:mod:`gitops_ray.runtime.argocd`) and the one-shot preview
(``gitops-ray diff --argocd-app``) parse it alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gitops_ray.moments import rfc3339, rfc3339_fine
from gitops_ray.render import parse_application
from gitops_ray.render.apps import REVISIONS_SEPARATOR, Application, Destination
from gitops_ray.sync.appstatus import AppStatus, Operation, ResourceRow, encode
from gitops_ray.types import (
    MANAGED_ANNOTATION,
    SKIP_RECONCILE_ANNOTATION,
    ConditionType,
    OperationPhase,
    ResourceAction,
    ResourceKey,
    SyncOptions,
)

__all__ = ["MANAGED_ANNOTATION", "SKIP_RECONCILE_ANNOTATION"]  # also imported from here
REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
HYDRATE_ANNOTATION = "argocd.argoproj.io/hydrate"  # argocd-server sets it with a refresh
REQUEST_ANNOTATIONS = (REFRESH_ANNOTATION, HYDRATE_ANNOTATION)
"""Requests to a controller, not part of an app's definition."""
RESOURCES_FINALIZERS = ("resources-finalizer.argocd.argoproj.io",
                        "resources-finalizer.argocd.argoproj.io/foreground",
                        "resources-finalizer.argocd.argoproj.io/background")
HISTORY_LIMIT = 10  # Argo CD's default spec.revisionHistoryLimit
MAX_MESSAGE = 1000  # a condition or operation message, as shown (Argo CD truncates too)

_SYNC_STATUS = {  # our resource actions -> Argo CD's ResultCode
    ResourceAction.CREATED: "Synced", ResourceAction.CONFIGURED: "Synced",
    ResourceAction.UNCHANGED: "Synced", ResourceAction.FAILED: "SyncFailed",
    ResourceAction.PRUNED: "Pruned", ResourceAction.DELETING: "Pruned",
    ResourceAction.DELETED: "Pruned", ResourceAction.PRUNE_SKIPPED: "PruneSkipped",
    ResourceAction.PENDING_PRUNE: "PruneSkipped",
}


class OptIn(StrEnum):
    """Whether an Application is ours, by its two annotations."""

    MANAGED = "managed"  # both: gitops-ray reconciles it, Argo CD leaves it alone
    NOT_OURS = "not-ours"  # neither
    NOT_SKIPPED = "managed-without-skip-reconcile"  # Argo CD would fight us: not taken
    NOT_MANAGED = "skip-reconcile-without-managed"  # nobody reconciles it (or a 3rd party)

    @property
    def warning(self) -> str:
        """What to tell the user about a half opt-in ("" when there is nothing to say)."""
        if self is OptIn.NOT_SKIPPED:
            return (f"annotated {MANAGED_ANNOTATION}=true without "
                    f"{SKIP_RECONCILE_ANNOTATION}=true: Argo CD still reconciles it, so "
                    "gitops-ray leaves it alone (add the second annotation to hand it over)")
        if self is OptIn.NOT_MANAGED:
            return (f"annotated {SKIP_RECONCILE_ANNOTATION}=true without "
                    f"{MANAGED_ANNOTATION}=true: neither Argo CD nor gitops-ray reconciles "
                    "it (add the second annotation if gitops-ray should)")
        return ""


def opt_in(obj: Mapping[str, Any]) -> OptIn:
    """Which of the two annotations an Application carries (values compared as Argo CD: "true")."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    managed = str(annotations.get(MANAGED_ANNOTATION, "")).lower() == "true"
    skipped = str(annotations.get(SKIP_RECONCILE_ANNOTATION, "")).lower() == "true"
    if managed and skipped:
        return OptIn.MANAGED
    if managed:
        return OptIn.NOT_SKIPPED
    return OptIn.NOT_MANAGED if skipped else OptIn.NOT_OURS


def app_name(namespace: str, name: str, *, argocd_namespace: str) -> str:
    """The app's name in gitops-ray: Argo CD's instance name (``<ns>_<name>`` elsewhere)."""
    return name if namespace == argocd_namespace else f"{namespace}_{name}"


def refresh_requested(obj: Mapping[str, Any]) -> str:
    """``normal``, ``hard`` or "" (the ``argocd.argoproj.io/refresh`` annotation)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = str(annotations.get(REFRESH_ANNOTATION, "")).lower()
    return value if value in ("normal", "hard") else ""


def cluster_application(obj: Mapping[str, Any], name: str) -> Application:
    """An in-cluster Application as gitops-ray takes it over, named ``name``.

    Its status, ``.operation`` and request annotations are not part of its definition.
    :class:`~gitops_ray.errors.ConfigError` when it is invalid; the fields it would not
    honour are its ``warnings`` (also what ``gitops-ray diff --argocd-app`` lists).
    """
    body = {k: v for k, v in obj.items() if k not in ("status", "operation")}
    meta = dict(body.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in REQUEST_ANNOTATIONS}
    body["metadata"] = {k: v for k, v in meta.items() if k in (
        "name", "namespace", "finalizers", "labels")} | {"annotations": annotations}
    app = parse_application(body, origin=f"Application {meta.get('namespace')}/"
                                         f"{meta.get('name')}")
    return replace(app, name=name)


def application_destination(obj: Mapping[str, Any]) -> Destination:
    """``spec.destination`` as written (a malformed one names no cluster)."""
    spec = obj.get("spec")
    dest = spec.get("destination") if isinstance(spec, Mapping) else None
    if not isinstance(dest, Mapping):
        return Destination(name="\0")
    return Destination(str(dest.get("namespace") or ""), str(dest.get("server") or ""),
                       str(dest.get("name") or ""))


# -- operations ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Selector:
    """One ``operation.sync.resources[]`` entry: group, kind, name and (optional) namespace."""

    group: str
    kind: str
    name: str
    namespace: str = ""

    def matches(self, key: ResourceKey) -> bool:
        return ((self.group, self.kind, self.name) == (key.group, key.kind, key.name)
                and self.namespace in ("", key.namespace))


@dataclass(frozen=True)
class ManualOperation:
    """A sync (or rollback) requested through Argo CD: the Application's ``.operation``."""

    raw: dict[str, Any]  # as set, compared to decide whether it is still the one requested
    revision: str = ""  # "" = the app's target revision
    prune: bool = False
    dry_run: bool = False
    selectors: tuple[Selector, ...] = ()  # () = every resource
    sync_options: SyncOptions = field(default_factory=SyncOptions)  # parsed with it
    retry_limit: int = 0
    rollback: bool = False  # carries a source (``argocd app rollback``)
    rollback_of: int | None = None  # the web page's Rollback: recorded with rollbackOf
    initiated_by: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # malformed: refused with this message, nothing synced

    def only(self, keys: Iterable[ResourceKey]) -> frozenset[ResourceKey] | None:
        """The selected resources among ``keys`` (``None``: all of them)."""
        if not self.selectors:
            return None
        return frozenset(k for k in keys if any(s.matches(k) for s in self.selectors))

    @property
    def user(self) -> str:
        return str(self.initiated_by.get("username") or "")

    @property
    def automated(self) -> bool:
        """``initiatedBy.automated``: Argo CD's sync windows treat it as an auto-sync."""
        return self.initiated_by.get("automated") is True


def requested_operation(raw: object) -> ManualOperation | None:
    """:func:`parse_operation`, with a malformed operation as one carrying its ``error``."""
    try:
        return parse_operation(raw)
    except ValueError as e:
        return ManualOperation(raw=dict(raw) if isinstance(raw, Mapping) else {},
                               error=f"invalid operation: {e}")


def parse_operation(raw: object) -> ManualOperation | None:
    """The ``.operation`` of an Application, or ``None`` when there is none (or no sync).

    ``ValueError`` names the field of a malformed operation; its values are not quoted.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("operation: expected a mapping")
    sync = raw.get("sync")
    if sync is None:
        return None
    if not isinstance(sync, Mapping):
        raise ValueError("operation.sync: expected a mapping")
    initiated = raw.get("initiatedBy") or {}
    retry = raw.get("retry") or {}
    return ManualOperation(
        raw=dict(raw), revision=_text(sync, "revision") or _joined(sync.get("revisions")),
        prune=_flag(sync, "prune"),
        dry_run=_flag(sync, "dryRun"), selectors=_selectors(sync.get("resources")),
        sync_options=SyncOptions.parse(str(o) for o in _items(sync, "syncOptions")),
        retry_limit=_limit(retry),
        rollback=sync.get("source") is not None or sync.get("sources") is not None,
        initiated_by=dict(initiated) if isinstance(initiated, Mapping) else {})


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"operation.sync.{key}: expected a string")
    return value or ""


def _flag(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"operation.sync.{key}: expected true or false")
    return value


def _items(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise ValueError(f"operation.sync.{key}: expected a list")
    return value


def _selectors(raw: object) -> tuple[Selector, ...]:
    out = []
    for i, item in enumerate(_items({"resources": raw}, "resources")):
        if not isinstance(item, Mapping) or not item.get("kind") or not item.get("name"):
            raise ValueError(f"operation.sync.resources[{i}]: kind and name are required")
        out.append(Selector(str(item.get("group") or ""), str(item["kind"]), str(item["name"]),
                            str(item.get("namespace") or "")))
    return tuple(out)


def _limit(retry: object) -> int:
    if not isinstance(retry, Mapping):
        raise ValueError("operation.retry: expected a mapping")
    limit = retry.get("limit", 0)
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise ValueError("operation.retry.limit: expected a number")
    return max(limit, 0)


# -- status --------------------------------------------------------------------------------



def source_type(app: Application) -> str:
    """Argo CD's ``status.sourceType`` for the app's source."""
    if app.source.helm is not None or app.source.chart:
        return "Helm"
    return "Kustomize" if app.source.kustomize is not None else "Directory"


@dataclass(frozen=True)
class Projection:
    """What the status is projected from: the record, the Application, and the time."""

    record: AppStatus  # the app record's status (sync.records), typed
    app: Application | None  # None: the Application is invalid
    live: Mapping[str, Any]  # the Application object as last seen
    now: float
    deployed: float | None = None  # startedAt of the operation last added to the history


def application_status(p: Projection) -> dict[str, Any]:
    """The Application's ``status`` (every field Argo CD's UI and CLI read)."""
    spec = p.live.get("spec") or {}
    old = p.live.get("status") or {}
    record = p.record
    status: dict[str, Any] = {
        "sync": _sync(record, spec),
        "health": _health(record, old.get("health"), p.now),
        "resources": [_resource(r) for r in record.resources or ()],
        "reconciledAt": rfc3339_fine(float(record.compared_at or p.now)),
        **({"sourceType": source_type(p.app)} if p.app is not None else {}),
        "summary": {"images": list(record.images or ())},
        "conditions": _conditions(record, old.get("conditions") or [], p.now),
        "history": history(old.get("history") or [], record, spec,
                           limit=_history_limit(spec), deployed=p.deployed),
    }
    state = operation_state(record, spec)
    if state is not None:
        status["operationState"] = state
    elif old.get("operationState"):
        status["operationState"] = old["operationState"]
    return status


def _sync(record: AppStatus, spec: Mapping[str, Any]) -> dict[str, Any]:
    sync: dict[str, Any] = {"status": record.sync or "Unknown",
                            "comparedTo": {"destination": dict(spec.get("destination") or {})}}
    sync["comparedTo"].update(_sources(spec))
    if spec.get("ignoreDifferences"):
        sync["comparedTo"]["ignoreDifferences"] = spec["ignoreDifferences"]
    if record.revision:
        sync.update(revision_fields(record.revision, spec))
    return sync


def _multi(spec: Mapping[str, Any]) -> bool:
    sources = spec.get("sources")
    return isinstance(sources, list) and len(sources) > 1


def _sources(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``source``, or ``sources`` for a multi-source app (as Argo CD records them)."""
    if _multi(spec):
        return {"sources": spec["sources"]}
    return {"source": spec["source"]} if spec.get("source") is not None else {}


def revision_fields(revision: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """``revision``, or ``revisions`` (one per source) for a multi-source app."""
    if _multi(spec):
        return {"revisions": revision.split(REVISIONS_SEPARATOR) if revision else []}
    return {"revision": revision}


def _joined(revisions: object) -> str:
    """``operation.sync.revisions`` (a multi-source rollback) as the app's one revision."""
    if not isinstance(revisions, list) or not all(isinstance(r, str) for r in revisions):
        return ""
    return REVISIONS_SEPARATOR.join(revisions)


def _health(record: AppStatus, old: object, now: float) -> dict[str, Any]:
    """``status.health``; ``lastTransitionTime`` kept while the status stays the same.

    Argo CD sets it when the health status changes; its notifications' stock
    ``on-deployed`` trigger compares it with the operation's times.
    """
    health = {"status": record.health or "Unknown"}
    if record.health_message:
        health["message"] = record.health_message[:MAX_MESSAGE]
    was = old if isinstance(old, Mapping) else {}
    same = was.get("status") == health["status"] and was.get("lastTransitionTime")
    health["lastTransitionTime"] = str(was["lastTransitionTime"]) if same else rfc3339(now)
    return health


def _resource(row: ResourceRow) -> dict[str, Any]:
    out: dict[str, Any] = {"group": row.group or "", "version": row.version or "",
                           "kind": row.kind or "", "namespace": row.namespace or "",
                           "name": row.name or "", "status": row.status or "Unknown"}
    health = {k: v for k, v in encode(row.health).items() if v} if row.health else {}
    if health:
        out["health"] = health
    if row.reason == "extraneous":
        out["requiresPruning"] = True
    return {k: v for k, v in out.items() if v != "" or k in ("group", "namespace")}


def app_conditions(record: AppStatus) -> list[tuple[str, str]]:
    """The app's conditions as ``(type, message)``, as Argo CD would have them.

    The comparison's own, plus the recorded error (``ComparisonError``, or
    ``InvalidSpecError`` for a configuration error) and a ``SyncError`` for a failed last
    sync. Also what ``gitops-ray status`` summarises, so both tell the same story.
    """
    wanted = [(c.type or "", c.message or "") for c in record.conditions or ()]
    error = record.error or ""
    if error:
        kind = ConditionType.INVALID_SPEC if error.startswith("config:") else \
            ConditionType.COMPARISON
        wanted.append((kind.value, error))
    last = record.operation
    if last is not None and last.phase == OperationPhase.FAILED:
        revision = (last.revision or "")[:7]
        wanted.append((ConditionType.SYNC.value, f"Failed sync attempt to {revision}: "
                       f"{last.message or 'one or more objects failed to apply'}"))
    return wanted


def _conditions(record: AppStatus, old: Sequence[Mapping[str, Any]],
                now: float) -> list[dict[str, Any]]:
    """Conditions now, keeping ``lastTransitionTime`` of those that were already there."""
    wanted = app_conditions(record)
    since = {(str(c.get("type")), str(c.get("message"))): c.get("lastTransitionTime")
             for c in old if isinstance(c, Mapping)}
    return [{"type": t, "message": m[:MAX_MESSAGE],
             "lastTransitionTime": since.get((t, m[:MAX_MESSAGE])) or rfc3339(now)}
            for t, m in dict.fromkeys(wanted)]


def operation_state(record: AppStatus, spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """``status.operationState`` of the running operation, else of the last finished one."""
    op = record.running if record.running is not None else record.operation
    if op is None or not op.started_at:
        return None
    state: dict[str, Any] = {
        "operation": _operation_of(op, spec),
        "phase": op.phase or OperationPhase.SUCCEEDED.value,
        "message": (op.message or _default_message(op))[:MAX_MESSAGE],
        "startedAt": rfc3339_fine(float(op.started_at)),
        "syncResult": {"revision": "",  # required by the CRD; "" when multi-source
                       **revision_fields(op.revision or "", spec),
                       "resources": _results(op, record), **_sources(spec)},
    }
    if op.attempt:
        state["retryCount"] = max(op.attempt - 1, 0)
    if op.retrying:  # failed, tried again later: still running (Argo CD's words)
        state["phase"] = OperationPhase.RUNNING.value
        state["message"] = (f"{state['message']}. Retrying attempt "
                            f"#{op.attempt or 1}.")[:MAX_MESSAGE]
    elif op.finished_at and op.phase != OperationPhase.RUNNING:
        state["finishedAt"] = rfc3339(float(op.finished_at))
    return state


def _default_message(op: Operation) -> str:
    if op.phase == OperationPhase.SUCCEEDED:
        return "successfully synced (all tasks run)"
    return ""


def _operation_of(op: Operation, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The operation as requested: the Application's own, or an automated one's."""
    if op.argocd_operation is not None:
        return dict(op.argocd_operation)
    sync: dict[str, Any] = revision_fields(op.revision or "", spec)
    if op.prune:
        sync["prune"] = True
    initiated = {"automated": True} if op.automated else {
        "username": op.initiated_by or "gitops-ray"}
    return {"sync": sync, "initiatedBy": initiated}


def _results(op: Operation, record: AppStatus) -> list[dict[str, Any]]:
    """Argo CD's ``syncResult.resources`` of an operation's per-resource results."""
    versions = {str(r.key): r.version or "" for r in record.resources or ()}
    return [row for r in op.resources or () if (row := _result(r, versions)) is not None]


def _result(r: Mapping[str, Any], versions: Mapping[str, str]) -> dict[str, Any] | None:
    code = _SYNC_STATUS.get(ResourceAction(r["action"])) if r.get("action") in \
        ResourceAction._value2member_map_ else None
    if code is None or "kind" not in r:
        return None  # gone, not ours, orphaned: nothing Argo CD would list
    failed = code == "SyncFailed"
    row = {"group": str(r.get("group") or ""),
           "version": versions.get(str(r.get("key")), "") or str(r.get("version") or ""),
           "kind": str(r["kind"]), "namespace": str(r.get("namespace") or ""),
           "name": str(r.get("name") or ""), "status": code,
           "message": (str(r.get("message") or "") or str(r["action"]))[:MAX_MESSAGE],
           "hookPhase": "Failed" if failed else "Succeeded", "syncPhase": "Sync"}
    if r.get("hookType"):  # a resource hook (sync.hooks): its own phase and type
        row.update(hookType=str(r["hookType"]), syncPhase=str(r.get("syncPhase") or ""),
                   hookPhase=str(r.get("hookPhase") or ""))
    return row


def _history_limit(spec: Mapping[str, Any]) -> int:
    limit = spec.get("revisionHistoryLimit")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 \
        else HISTORY_LIMIT


def history(old: Sequence[Mapping[str, Any]], record: AppStatus,
            spec: Mapping[str, Any], *, limit: int = HISTORY_LIMIT,
            deployed: float | None = None) -> list[dict[str, Any]]:
    """``status.history``: one entry per successful sync of the whole app, newest last.

    Dry runs and partial syncs (``sync.resources``) add none. The id is the one the
    record gave the deployment (:mod:`gitops_ray.sync.history`), so ``argocd app
    rollback APP ID`` and ``gitops-ray rollback APP ID`` name the same deployment; an
    operation recorded before ids (or an id not above the Application's newest, from a
    record that was re-created) gets the next one, as Argo CD numbers. The oldest
    entries go beyond ``limit``. An operation is added once: ``deployed`` is the
    ``startedAt`` of the last one added by this process; without it (after a restart)
    an entry equal in :data:`_SAME_DEPLOY` is taken to be the operation's own.
    """
    entries = [dict(e) for e in old if isinstance(e, Mapping)]
    op = record.operation
    if op is None or not op.deployment or op.started_at is None:
        return entries[-limit:] if limit else []
    requested = op.argocd_operation or {}
    asked = requested.get("sync") or {}
    sources = {"sources": asked["sources"]} if asked.get("sources") else \
        {"source": asked["source"]} if asked.get("source") else _sources(spec) or {"source": {}}
    newest = max((int(e.get("id") or 0) for e in entries), default=-1)
    entry = {"id": op.id if op.id is not None and op.id > newest else newest + 1,
             **revision_fields(op.revision or "", spec),
             "deployStartedAt": rfc3339(float(op.started_at)),
             "deployedAt": rfc3339(op.finished),
             **sources,
             "initiatedBy": _initiator(requested)}
    if deployed == float(op.started_at) or (deployed is None and any(
            all(e.get(k) == entry.get(k) for k in _SAME_DEPLOY) for e in entries)):
        return entries[-limit:] if limit else []
    return [*entries, entry][-limit:] if limit else []


def _initiator(requested: Mapping[str, Any]) -> dict[str, Any]:
    """Who started a deployment: a requested operation's ``initiatedBy``, else automated.

    Taken as it is, ``{}`` included (argocd-server without auth: ``session.Username`` "").
    """
    return dict(requested.get("initiatedBy") or {}) if requested else {"automated": True}


_SAME_DEPLOY = ("revision", "revisions", "deployStartedAt", "deployedAt")
"""An entry with these equal is the same operation (times are whole seconds, as Argo's)."""
