"""What the controller keeps and writes of each app: memory, records, metrics, Events.

The bottom part of :class:`gitops_ray.runtime.controller.Controller` (split from it so each
part fits in one read): the state the controller holds (its per-app memory,
:mod:`gitops_ray.runtime.memory`, and its collaborators), and every write of what a
refresh or a sync found: the status record (only when what it says changed, or to add
applied marks; :mod:`gitops_ray.sync.statuswrites` makes the change), a record write
that fails (logged once per app until one succeeds), the metrics, the app's Events, the
Argo CD Application's status, and the pause of automated sync read from the record.
Nothing here decides anything: :mod:`gitops_ray.runtime.operations` does.
"""

from __future__ import annotations

import collections
import functools
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from gitops_ray.errors import GitOpsRayError
from gitops_ray.health import HealthStatus
from gitops_ray.kube import LeaseExpired
from gitops_ray.kube.fence import WriteFence
from gitops_ray.reconcile.autosync import Action, AutoSyncSettings, Decision, LastOperation
from gitops_ray.reconcile.pause import PAUSE_KEY, Pause
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.reconcile.reconciler import Reconciler, SyncOutcome
from gitops_ray.reconcile.status import add_marks, adds_marks
from gitops_ray.render.apps import Application
from gitops_ray.runtime.argocd import ArgoBridge
from gitops_ray.runtime.catalog import Catalog
from gitops_ray.runtime.compared import LastComparisons
from gitops_ray.runtime.memory import Memories
from gitops_ray.runtime.metrics import AppState, Metrics
from gitops_ray.runtime.revisions import RECENT, Revisions
from gitops_ray.runtime.shards import ShardCoordinator
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.sync import statuswrites
from gitops_ray.sync.appstatus import AutoSync
from gitops_ray.sync.events import post_event
from gitops_ray.sync.phases import PostDelete
from gitops_ray.sync.records import AppRecord, record_name, status_text
from gitops_ray.types import ConditionType, Manifest, ResourceAction

_log = structlog.get_logger("gitops_ray.runtime.controller")  # one log for its parts
STATUS_KEYS = ("revision", "sync", "health", "healthMessage", "resources", "repoURL", "path",
               "targetRevision", "destinationNamespace", "destinationName",
               "destinationServer", "error", "errorReason", "chart", "autoSync", "warnings",
               "renderWarnings", "rolloutPending", "conditions", "images", "impact")
Requeue = Callable[[str, float], None]
Refreshed = Callable[[str, GitOpsRayError | None], None]  # (app, error or None) after each
Route = Callable[[Application], tuple[Reconciler, LiveCache]]
"""The reconciler and watch cache of the app's destination cluster (runtime.clusters);
raises a :class:`GitOpsRayError` (stage ``cluster``) while that cluster is unreachable."""


def fingerprint(status: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a status that is worth a write when it changes (not ``comparedAt``)."""
    return {k: status.get(k) for k in STATUS_KEYS}


def record_app(obj: Manifest, namespace: str) -> str | None:
    """The app whose record ConfigMap ``obj`` is (in the control ``namespace``), or ``None``."""
    meta, data = obj.get("metadata") or {}, obj.get("data") or {}
    name = str(data.get("app") or "")
    if obj.get("kind") != "ConfigMap" or meta.get("namespace") != namespace or not name \
            or meta.get("name") != record_name(name):
        return None
    return name


def record_status(obj: Manifest, *, quick: bool = False) -> dict[str, Any] | None:
    """The status in a record ConfigMap (``quick``: ``None`` unless it names a pause).

    Every status write of every app is a record event: most carry no pause, and the
    substring test saves decoding their status.
    """
    text = status_text(obj)
    if quick and PAUSE_KEY not in text:
        return None
    try:
        status = json.loads(text or "{}")
    except ValueError:
        return None
    return status if isinstance(status, dict) else None


def record_pause(obj: Manifest) -> Pause | None:
    """The pause of automated sync in a record ConfigMap, if any."""
    status = record_status(obj)
    return Pause.of(status) if status is not None else None


def _end_pause(ended: Pause, record: AppRecord) -> None:
    """Remove the pause that ended, not a newer one another rollback wrote meanwhile."""
    statuswrites.resume(record, ended)


def auto_sync_of(decision: Decision) -> AutoSync:
    return AutoSync(action=decision.action.value, reason=decision.reason)


class Bookkeeping:
    """The controller's state, and its writes of what it found (see the module doc)."""

    def __init__(self, *, reconciler: Reconciler, cache: LiveCache, catalog: Catalog,
                 revisions: Revisions, metrics: Metrics, autosync: AutoSyncSettings,
                 identity: str, requeue: Requeue, recent: float = RECENT,
                 fence: WriteFence | None = None,
                 clock: Callable[[], float] = time.time,
                 on_refreshed: Refreshed = lambda app, error: None,
                 argocd: ArgoBridge | None = None, route: Route | None = None,
                 shards: ShardCoordinator | None = None) -> None:
        self.reconciler = reconciler
        self.recent = recent  # how old a resolved revision a poll or webhook accepts
        self.revisions = revisions
        self.pipeline = reconciler.pipeline
        self.store = reconciler.syncer.store
        self.cache = cache
        self.catalog = catalog
        self.metrics = metrics
        self.autosync = autosync
        self.identity = identity
        self._requeue = requeue
        self._fence = fence  # None: no leader election, writes are never fenced
        self._shards = shards  # None: one leader (or none) writes every app
        # Writes running, by app: not memory of the app (a deletion must not lose a count).
        self._writing: collections.Counter[str] = collections.Counter()
        self._clock = clock
        self._on_refreshed = on_refreshed
        self._leading = False
        self._writes = 0
        self._cond = threading.Condition()  # reentrant: the memories' lock too
        self._apps = Memories(self._cond)  # what is remembered of each app (runtime.memory)
        self._post_deletes: dict[str, PostDelete] = {}  # PostDelete hooks of deleted apps
        self._argocd = argocd  # None: no Applications in the cluster (git only)
        self.compared = LastComparisons()  # each app's last comparison, for the web page
        self._route = route  # None: every app is synced to our own cluster

    def _target(self, app: Application) -> tuple[Reconciler, LiveCache]:
        """The reconciler and cache of the app's destination cluster (see :data:`Route`)."""
        return self._route(app) if self._route is not None else (self.reconciler, self.cache)

    def _publish(self, name: str, comparison: Comparison) -> None:
        self.compared.remember(name, comparison)
        if self._argocd is not None:
            self._argocd.compared(name, comparison, self._target(comparison.app)[1])
        health = (comparison.health.status if comparison.health else HealthStatus.UNKNOWN).value
        last = self.metrics.apps.get(name).last_sync
        self.metrics.apps.set(name, AppState(comparison.diff.status, health, last))

    def _update(self, name: str, change: Callable[[AppRecord], None]) -> AppRecord | None:
        """Write the app's record; ``None`` (logged once) when it cannot be written."""
        try:
            record = self.store.update(name, change)
        except LeaseExpired:
            raise
        except GitOpsRayError as e:
            self._not_written(name, e)
            return None
        self._recorded(name, record)
        return record

    def _recorded(self, name: str, record: AppRecord) -> None:
        """What this replica knows once it wrote the app's record."""
        with self._apps.of(name) as memory:
            memory.unwritable = False
            memory.written = fingerprint(record.status)
            if self._argocd is not None:  # what its Application's status is projected from
                memory.status = record.status

    def _not_written(self, name: str, error: GitOpsRayError) -> None:
        """Log a record write failure once per app, until a write succeeds again.

        Backoff does not depend on it (the last operation is kept in memory), so a record
        RBAC forbids costs one log line, not one per refresh.
        """
        with self._apps.of(name) as memory:
            first, memory.unwritable = not memory.unwritable, True
        if first:
            _log.warning("record_not_written", app=name, error=str(error),
                         note="backing off in memory; logged once until a write succeeds")

    def _save(self, name: str, fields: dict[str, Any], decision: Decision,
              marks: Mapping[str, str]) -> None:
        """Write the status record if what it says changed, or to add applied ``marks``."""
        fields = {**fields, "autoSync": statuswrites.auto_sync_fields(auto_sync_of(decision))}
        held = {Action.PAUSED: ConditionType.AUTO_SYNC_PAUSED,
                Action.WINDOW: ConditionType.SYNC_WINDOW_CLOSED}.get(decision.action)
        if held is not None:  # a condition: status, get and Argo CD show it
            fields["conditions"] = [*fields.get("conditions", []), {
                "type": held.value, "message": decision.reason}]
        if marks and adds_marks(self.store.load(name, status=False).applied, marks):
            def change(record: AppRecord) -> None:
                statuswrites.compared(record, fields)
                add_marks(record, marks)

            self._update(name, change)
            return
        said = fingerprint(fields)
        with self._apps.of(name) as memory:
            kept = memory.written == said
            if kept:
                # Kept instead of the written copy: its lists are status_of's, shared with
                # the next refresh's, so that comparison is by identity, not row by row (a
                # record decoded after a write or a takeover held copies: 12 of 199 py-spy
                # samples of no-op cycles at 2,000 RayClusters were this comparison).
                memory.written = said
        if kept:
            return
        self._update(name, lambda r: statuswrites.compared(r, fields))

    def _save_error(self, name: str, message: str, extra: Mapping[str, Any] | None = None
                    ) -> None:
        previous = self._apps.peek(name).written or {}
        if previous.get("error") == message:
            return
        try:
            now = self._clock()
            record = self._update(name, lambda r: statuswrites.failed(r, message, at=now,
                                                                      extra=extra))
        except LeaseExpired as e:  # not leading any more: nothing to record
            _log.warning("status_not_saved", app=name, error=str(e))
            return
        if record is not None:
            self._event(name, reason="ComparisonError", message=message, warning=True)

    def _event(self, name: str, *, reason: str, message: str, warning: bool = False) -> None:
        """An Event on the app's record ConfigMap (``kubectl get events -n <control ns>``)."""
        stub = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": record_name(name), "namespace": self.store.namespace}}
        post_event(self.store.kube, stub, reason=reason, message=f"app {name}: {message}",
                   warning=warning)

    def _mirror(self, name: str, app: Application | None, *, refreshed: bool = False) -> None:
        """Write the app's status into its Application, if it has one and it changed."""
        if self._argocd is None or not self._argocd.manages(name):
            return
        try:
            status = self._apps.peek(name).status
            if status is None:
                status = self.store.load(name).status
                with self._apps.of(name) as memory:
                    memory.status = status
            self._argocd.publish(name, status, app, refreshed=refreshed)
        except LeaseExpired:
            raise
        except GitOpsRayError as e:
            _log.warning("application_status_not_written", app=name, error=str(e))

    def _account(self, name: str, outcome: SyncOutcome, decision: Decision,
                 seconds: float) -> None:
        result = outcome.result
        self.metrics.syncs.labels(name, result.phase, decision.trigger).inc()
        if result.reason is not None:
            self.metrics.sync_failures.labels(name, result.reason.value).inc()
        self.metrics.sync_seconds.labels(name).observe(seconds)
        state = self.metrics.apps.get(name)
        self.metrics.apps.set(name, AppState(state.sync_status, state.health_status,
                                             self._clock()))
        if decision.only is not None:
            for res in result.resources:
                if res.action in (ResourceAction.CONFIGURED, ResourceAction.CREATED):
                    self.metrics.drift_corrections.labels(name, res.key.kind).inc()
        summary = ", ".join(f"{r.key} {r.action}" for r in result.resources
                            if r.action != ResourceAction.UNCHANGED) or "no changes"
        failed = f"{result.reason}: " if result.reason else ""
        self._event(name, reason="SyncSucceeded" if result.ok else "SyncFailed",
                    message=f"{failed}{decision.trigger} to {result.revision[:12]}: "
                            f"{result.message or summary}", warning=not result.ok)

    def _observe_pause(self, name: str) -> None:
        """Read the app's pause from its record (watch cache); end it once its time is up.

        While a pause is (or was) recorded, the last operation is taken from the record
        too when it is newer than the one in memory: the rollback was recorded by another
        process (the CLI), and once the pause ends auto-sync must compare git's revision
        with the rollback's, not with this controller's last sync. For the same reason
        the status this controller last wrote is forgotten when the record says
        otherwise, so the paused comparison is written even if it equals that one.
        """
        paused = self._apps.peek(name).pause
        status = self.store.load_status(name, naming="" if paused is not None else PAUSE_KEY)
        pause = Pause.of(status)
        if pause is None and paused is None:
            return
        if paused is not None and pause != paused:
            status = self.store.read(name).status  # the cache may not have the pause yet
            pause = Pause.of(status)
        recorded = LastOperation.from_status(status)
        with self._apps.of(name) as memory:
            if fingerprint(status) != memory.written:  # the rollback wrote it
                memory.written = None  # so the paused status is written over it
            known = memory.last_op
            if recorded is not None and (known is None
                                         or recorded.finished_at > known.finished_at):
                memory.last_op = recorded
        if pause is not None and not pause.active(self._clock()):
            self._update(name, functools.partial(_end_pause, pause))
            pause = None
        with self._apps.of(name) as memory:
            memory.pause = pause
