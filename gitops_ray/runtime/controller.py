"""One refresh of one app, as the controller runs it: resolve, compare, decide, maybe sync.

Why this is separate from the wiring (:mod:`gitops_ray.runtime.runner`): this is the
behaviour worth reading and testing (what happens on a poll, a webhook or a watch
event); threads, sockets and signals are not.

A refresh:

1. resolves the app's revision with a cheap ``ls-remote``-style call; the pipeline only
   fetches and renders when the commit changed (renders are cached by SHA + spec);
2. compares against the watch cache (no per-object GET when nothing changed);
3. publishes sync status and health as metrics (every replica does);
   An app whose Application is invalid (see :mod:`~gitops_ray.runtime.catalog`) stops
   here: its error is published and recorded, nothing is rendered or synced;
4. **on the leader only**: asks :mod:`gitops_ray.reconcile.autosync` what to do, syncs
   through the shared :class:`~gitops_ray.reconcile.reconciler.Reconciler` (with fresh
   reads, see :meth:`LiveCache.fresh`), records the operation with the counters the
   next decision needs, requeues itself when a backoff is pending, posts Events, and
   writes the status record only when it changed (a no-op cycle writes nothing).

A sync's failure is an outcome, not an exception (:mod:`gitops_ray.sync.reasons`): it is
counted by reason (``gitops_ray_sync_failures_total{reason}``), named in the Event, and
remembered in memory *before* anything is written, so the retry limit and backoff apply
even when the record itself cannot be written (RBAC, a conflict storm). Such a record
write failure is logged once per app (``record_not_written``) until a write succeeds
again, instead of on every refresh.

**Sync waves.** A sync whose wave is not healthy yet ends its step ``Running``
(:mod:`gitops_ray.sync.operation`): the worker is released at once, the state is
recorded in the app's record and kept in memory, and the app is requeued (after
:data:`WAVE_RECHECK_SECONDS` at the latest; a watch event about one of its objects, such as
the operator writing a RayCluster's status, refreshes it within the debounce). The next
refresh continues that operation (same revision, prune flag and selection) instead of
asking the auto-sync policy, so no new sync starts while one is running. A new leader
loads running operations from the records, so a sync that waited when the previous
leader stopped continues from its wave. A running operation whose revision is no longer
the app's target (a new commit) is recorded as failed, reason ``Superseded``, and the
policy decides about the new revision as usual.

An app removed from its app-of-apps source (:meth:`Controller.forget`) is deleted on
its next turn in the work queue, so never while it is being refreshed or synced: its
objects with it when the Application carried Argo CD's resources finalizer, else
orphaned; its record goes either way (:mod:`gitops_ray.sync.teardown`). A deletion that
failed is retried; an app that comes back before its turn is simply refreshed.

**A rollback's pause** (:mod:`gitops_ray.reconcile.pause`): ``gitops-ray rollback``
records a pause of automated sync in the app's record before it syncs the old revision.
Each pass reads it from the watch cache and auto-sync stays off while it lasts (status
``autoSync: paused`` and an ``AutoSyncPaused`` condition); a pass after its end removes
it. A record event whose pause changed (set, resumed) refreshes the app at once, as does
one that another writer made to a paused app's record, so the status always shows git's
revision and the pause, not the rollback's own comparison. The web page's Rollback button
(:meth:`Controller.request_rollback`) leaves the same pause and then requests an operation
pinned to the entry's revision, executed as any requested operation and recorded as a
rollback (``trigger: rollback``, ``rollbackOf``); its Resume button ends the pause as
``gitops-ray resume`` does (:meth:`Controller.resume`).

Followers compare too, so their render and dry-run caches are warm when they take over,
but never write: no sync, no status, no events. :meth:`Controller.stop_leading` waits for
a running write to finish before it returns, so the lease is not given up mid-sync.

With leader election, each guarded unit of work also captures the lease term of the
:class:`~gitops_ray.kube.fence.WriteFence` when it starts: if the lease may have expired
(the process was paused) or was re-acquired since, every further write of that refresh is
refused with :class:`~gitops_ray.kube.LeaseExpired` and the refresh is abandoned without
recording anything, because another replica may be syncing a newer revision already.

**With sharding** (:mod:`gitops_ray.runtime.shards`) every replica "leads", but only
for the apps of the shards it holds. A refresh of another replica's app is a *standby
pass* on the one replica that would take it over (its successor,
:meth:`~gitops_ray.runtime.shards.ShardCoordinator.successor`) and nothing on the others:
its revision is resolved, its manifests rendered into the render cache and the verdicts
of what the latest commit did not change worked out (:meth:`Pipeline.prepare_standby`);
no write, and a dry run only for an object someone else wrote since our last apply (the
point of sharding is to split the work: a commit's changes are left to the owner). The
work queue runs it only when it has nothing else to do (:mod:`gitops_ray.runtime.queue`).
Why: a replica that takes over a dead one's shards would otherwise parse and compare every
object of them first (py-spy of a 3 x 1,000 failover: render and comparison were most of
the new owner's CPU), after the lease has already expired. Each write guard asks the
coordinator whether the app is owned and captures *its shard's* fence, and
:meth:`Controller.adopt` loads a gained shard's records (the previous owner wrote them)
before its apps count as owned. :meth:`Controller.writing` tells the coordinator whether a
shard it should hand over still has a write running.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger

from gitops_ray.errors import GitOpsRayError
from gitops_ray.health import HealthStatus
from gitops_ray.kube import KubeError, LeaseExpired
from gitops_ray.kube.fence import WriteFence
from gitops_ray.reconcile.argostatus import ManualOperation, requested_operation
from gitops_ray.reconcile.autosync import (
    Action,
    AutoSyncSettings,
    Decision,
    LastOperation,
    Observed,
    decide,
    operation_fields,
    source_key,
)
from gitops_ray.reconcile.pause import PAUSE_KEY, Pause
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.reconcile.reconciler import Reconciler, SyncOutcome
from gitops_ray.reconcile.rollback import (
    ROLLBACK_TRIGGER,
    marks,
    pause_automation,
    resume,
    target,
)
from gitops_ray.reconcile.status import (
    RecordChange,
    add_marks,
    adds_marks,
    desired_facts,
    proven_marks,
    status_of,
)
from gitops_ray.reconcile.windows import for_app, opens_at, verdict
from gitops_ray.render.apps import REVISIONS_SEPARATOR, Application, split_revisions
from gitops_ray.runtime.argocd import ArgoBridge
from gitops_ray.runtime.catalog import Catalog
from gitops_ray.runtime.clusters import ClusterUnavailable
from gitops_ray.runtime.compared import LastComparisons
from gitops_ray.runtime.logs import redact_url
from gitops_ray.runtime.memory import Memories
from gitops_ray.runtime.metrics import AppState, Metrics
from gitops_ray.runtime.queue import UrgentUntilLanded
from gitops_ray.runtime.revisions import FOREVER, RECENT, Revisions
from gitops_ray.runtime.shards import ShardCoordinator
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.sync import statuswrites
from gitops_ray.sync.appstatus import AutoSync, Operation, decode_operation, encode_operation
from gitops_ray.sync.engine import SyncResult
from gitops_ray.sync.events import post_event
from gitops_ray.sync.hookrun import HookRunner
from gitops_ray.sync.operation import OperationState
from gitops_ray.sync.phases import PostDelete
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import AppRecord, record_name, status_text
from gitops_ray.sync.teardown import cascade_policy, delete_app
from gitops_ray.sync.tracking import TRACKING_ANNOTATION, parse_tracking_id
from gitops_ray.types import (
    ConditionType,
    Manifest,
    OperationPhase,
    ResourceAction,
    ResourceKey,
    SyncStatus,
)

_log = structlog.get_logger(__name__)
STATUS_KEYS = ("revision", "sync", "health", "healthMessage", "resources", "repoURL", "path",
               "targetRevision", "destinationNamespace", "destinationName",
               "destinationServer", "error", "errorReason", "chart", "autoSync", "warnings",
               "renderWarnings", "rolloutPending", "conditions", "images")
Requeue = Callable[[str, float], None]
Refreshed = Callable[[str, GitOpsRayError | None], None]  # (app, error or None) after each
Route = Callable[[Application], tuple[Reconciler, LiveCache]]
"""The reconciler and watch cache of the app's destination cluster (runtime.clusters);
raises a :class:`GitOpsRayError` (stage ``cluster``) while that cluster is unreachable."""
CLUSTER_TRIGGERS = ("due",)  # watch events and backoffs: compare with the recent revision
DELETE_RETRY_SECONDS = 10.0
CARRIED = ("automated", "trigger", "argocdOperation", "initiatedBy", "rollbackOf")
"""Fields of a requested operation that every later step of it records too."""
REQUESTED_TRIGGERS = frozenset({"operation", ROLLBACK_TRIGGER})
"""The recorded ``trigger`` of a requested operation (a rollback is one, marked as such)."""
AFTER_OPERATION_SECONDS = 1.0
"""An executed operation's app is refreshed again this much later, and its status written
with a new ``reconciledAt`` (a second write, as Argo CD's own refresh after a sync makes:
argocd-server's Watch may miss the one that finished the operation)."""
TERM_RETRY_SECONDS = 2.0
"""When a refresh may not write because its lease's term is not confirmed right now (a
renewal is late: a loaded API server or machine), it is tried again this much later. Nothing
else would retry it: an app in sync elsewhere gets no watch event, polling may be off."""
WAVE_RECHECK_SECONDS = 30.0
WINDOW_RECHECK_SECONDS = 300.0
"""At the latest, a refresh this long after a sync window held an app back (it is
requeued for the moment the window opens, when that is sooner)."""
"""A running sync is re-checked at least this often (watch events usually come first)."""


def fingerprint(status: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a status that is worth a write when it changes (not ``comparedAt``)."""
    return {k: status.get(k) for k in STATUS_KEYS}


def app_of_event(obj: Manifest) -> str | None:
    """The app named by an object's tracking annotation, if it refers to the object itself."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    parsed = parse_tracking_id(str(annotations.get(TRACKING_ANNOTATION, "")))
    if parsed is None or parsed.key.name != ResourceKey.of(obj).name:
        return None
    return parsed.app


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


class Controller:
    """Refreshes apps; syncs and records only while leading."""

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

    # -- leadership ------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self._leading

    def start_leading(self) -> None:
        """Load what the previous leader recorded, then allow writes."""
        records = self._records()
        with self._cond:
            for _, memory in self._apps.each():
                memory.forget_leadership()
            self._load(records)
            self._leading = True
        self.metrics.leader.set(1)

    def adopt(self, owned: Callable[[str], bool]) -> None:
        """Gained shards: load the ``owned`` apps' records (their previous owner wrote them).

        By record, not by catalog: the catalog may not be loaded yet at start-up. Their
        next refresh resolves the revision anew: a revision this replica resolved before
        it lost the shard (or was paused) may be older than what the previous owner synced.
        """
        records = self._records(owned)
        with self._cond:
            for name in self.catalog.apps():
                if owned(name):
                    with self._apps.of(name) as memory:
                        memory.after_operation = True
            for _, memory in self._apps.each(owned):
                memory.forget_leadership()
            self._load(records)
            self._leading = True

    def _load(self, records: Mapping[str, AppRecord]) -> None:
        """Remember what the apps' ``records`` say: last and running operation, status."""
        for name, record in records.items():
            with self._apps.of(name) as memory:
                memory.last_op = LastOperation.from_status(record.status)
                memory.running = OperationState.from_status(record.status)
                memory.written = fingerprint(record.status)

    def writing(self, shard: int) -> bool:
        """Whether a write of an app of ``shard`` is running (sharding only)."""
        assert self._shards is not None
        with self._cond:
            return any(self._shards.shard_of(n) == shard for n, c in self._writing.items()
                       if c)

    def owns(self, name: str) -> bool:
        """Whether this replica writes ``name`` while it leads (its shard, with sharding)."""
        return self._shards is None or self._shards.owns(name)

    def stop_leading(self, timeout: float) -> bool:
        """Forbid new writes and wait up to ``timeout`` for running ones to finish."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._leading = False
            for _, memory in self._apps.each():  # the next leader never saw them: never
                memory.requested = None  # run them later
            while self._writes:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        self.metrics.leader.set(0)
        return True

    @contextlib.contextmanager
    def _write_guard(self, name: str) -> Iterator[bool]:
        with self._cond:
            allowed = self._leading and self.owns(name)
            self._writes += allowed
            self._writing[name] += allowed
        try:
            with self._term(name) as in_term:
                yield allowed and in_term
        finally:
            if allowed:
                with self._cond:
                    self._writes -= 1
                    self._writing[name] -= 1
                    if not self._writing[name]:
                        del self._writing[name]
                    self._cond.notify_all()

    def _term(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """Capture the lease term for the writes made inside (see the module docstring)."""
        if self._shards is not None:
            return self._shards.scope(name)
        return self._fence.scope() if self._fence else contextlib.nullcontext(True)

    def _records(self, wanted: Callable[[str], bool] | None = None) -> dict[str, AppRecord]:
        try:
            return self.store.list_apps(wanted)
        except KubeError as e:
            _log.warning("records_not_loaded", error=str(e))
            return {}

    # -- triggers --------------------------------------------------------------------

    def app_for_event(self, obj: Manifest) -> str | None:
        """The managed app a watch event is about, or ``None``.

        Besides objects the app manages: its record, when the pause of automated sync in
        it changed (a rollback set it, ``gitops-ray resume`` removed it), so a pause and
        a resume take effect at once rather than at the next poll.
        """
        app = app_of_event(obj) or self._pause_changed(obj)
        return app if app is not None and self.catalog.get(app) is not None else None

    def _pause_changed(self, obj: Manifest) -> str | None:
        """The app of a record whose pause differs from the last record event's.

        Also, on the leader, of a paused app's record that someone else wrote (the
        rollback records its sync after its pause): its status is compared and written
        again, so it goes on saying what git's revision is and that the app is paused.
        """
        app = record_app(obj, self.store.namespace)
        if app is None:
            return None
        seen = self._apps.peek(app).seen_pause
        status = record_status(obj, quick=seen is None)
        pause = Pause.of(status) if status is not None else None
        with self._apps.of(app) as memory:
            memory.seen_pause = pause
            written = memory.written
        foreign = pause is not None and status is not None and self._leading \
            and self.owns(app) and fingerprint(status) != written
        return app if pause != seen or foreign else None

    # -- one refresh -----------------------------------------------------------------

    def refresh(self, name: str, reason: str) -> None:
        """Refresh one app (the work queue guarantees one refresh per app at a time)."""
        if not self.owns(name):  # another replica's (a removed app stays `gone` for it)
            if self.successor(name):
                self._standby(name, reason)
            return
        app = self.catalog.get(name)
        log: FilteringBoundLogger = _log.bind(app=name, trigger=reason)
        with self._apps.of(name) as memory:
            gone, memory.gone = memory.gone, None
        if app is None:
            invalid = self.catalog.error(name)
            if gone is not None:
                self._delete(gone, log)
            elif invalid is not None:
                self._invalid(name, invalid, log)
            return
        started, result = time.monotonic(), "success"
        error: GitOpsRayError | None = None
        with self._apps.of(name) as memory:
            after_operation, memory.after_operation = memory.after_operation, False
        refreshed = bool(self._argocd and self._argocd.refresh(name)) or after_operation
        max_age = 0.0 if refreshed else FOREVER if reason in CLUSTER_TRIGGERS else self.recent
        try:
            synced = self._refresh(app, log, max_age, refreshed=refreshed)
            if synced is not None and synced.phase == OperationPhase.FAILED:  # recorded
                result, error = "error", synced.cause
        except LeaseExpired as e:
            result = "error"
            log.warning("sync_aborted_lease_expired", error=str(e))
            self._requeue(name, TERM_RETRY_SECONDS)  # ours again by then, or another's
        except GitOpsRayError as e:
            result, error = "error", e
            self._failed(app, e, log)
        finally:
            self._on_refreshed(name, error)
            self.metrics.reconciles.labels(name, result).inc()
            took = time.monotonic() - started
            self.metrics.reconcile_seconds.labels(name).observe(took)
            log.debug("app_refreshed", result=result, seconds=round(took, 4))

    def successor(self, name: str) -> bool:
        """Whether this replica would take another replica's app over (sharding only)."""
        return self._shards is not None and self._shards.successor(name)

    def _standby(self, name: str, reason: str) -> None:
        """Prepare an app this replica would take over: rendered, verdicts known.

        At its revision, for a takeover (see :meth:`Pipeline.prepare_standby`): no
        write, and no dry run of a commit's changes unless the owner has gone silent
        (then every verdict is worked out: :mod:`gitops_ray.runtime.shards`). The facts
        the status shows of git's objects (images, replicas) are worked out too: the
        first status a takeover writes would otherwise unpack every object of the app on
        the critical path. Quiet: a failure is the owner's to report; this replica only
        notes it at debug level.
        Without sharding there is no other replica's app.
        """
        app = self.catalog.get(name)
        if self._shards is None or app is None:
            return
        log: FilteringBoundLogger = _log.bind(app=name, trigger=reason)
        started = time.monotonic()
        try:
            sha = self._revision(app, max_age=self.recent)
            pipeline = self._target(app)[0].pipeline
            thorough = self._shards.silent(self._shards.owner_of(name)[0])
            known, left = pipeline.prepare_standby(app, revision=sha, thorough=thorough)
            for obj in pipeline.desired(app, revision=sha)[1]:  # the render just made
                desired_facts(obj)  # what a takeover's first status reads, by content
        except GitOpsRayError as e:
            self.metrics.standby_renders.labels("error").inc()
            log.debug("app_prepared", result="error", stage=e.stage)
            return
        self.metrics.standby_renders.labels("success").inc()
        log.debug("app_prepared", result="success", known=known, left=left,
                  thorough=thorough, seconds=round(time.monotonic() - started, 4))

    def _revision(self, app: Application, *, max_age: float, pinned: str = "") -> str:
        """The app's revision now: a commit SHA, a chart version, or every source's.

        A multi-source app's is its sources' joined
        (:data:`~gitops_ray.render.apps.REVISIONS_SEPARATOR`). ``pinned``: an operation's
        revision (a rollback's is the joined one of its history entry).
        """
        if not app.sources:
            return self.revisions.resolve(app.source.repo_url,
                                          pinned or app.source.target_revision,
                                          max_age=max_age, chart=app.source.chart)
        parts = split_revisions(pinned, len(app.sources)) or \
            tuple(s.target_revision for s in app.sources)
        return REVISIONS_SEPARATOR.join(
            self.revisions.resolve(s.repo_url, part, max_age=max_age, chart=s.chart)
            for s, part in zip(app.sources, parts, strict=True))

    def _refresh(self, app: Application, log: FilteringBoundLogger,
                 max_age: float, *, refreshed: bool = False) -> SyncResult | None:
        """Compare, then (leader only) decide and maybe sync; the sync's result, if any.

        ``refreshed``: Argo CD asked for this refresh (its annotation goes afterwards).
        """
        pipeline = self._target(app)[0].pipeline
        sha = "" if pipeline.refuses(app) else self._revision(app, max_age=max_age)
        comparison = pipeline.compare(app, revision=sha or None)
        self._publish(app.name, comparison)
        log.debug("app_compared", revision=sha[:12], sync=comparison.diff.status)
        with self._write_guard(app.name) as leading:
            if not leading:
                self._retry_unwritten(app.name)
                return None
            try:
                return self._act(app, comparison, log)
            finally:
                self._mirror(app.name, app, refreshed=refreshed)

    def _retry_unwritten(self, name: str) -> None:
        """Try again shortly: a refresh of an app this replica writes may not write now.

        Its lease's term is unconfirmed (a late renewal), or its shard is changing hands.
        Not on a follower: it never writes. With sharding, the retry of an app that is
        another replica's by then is only a standby pass.
        """
        if self._shards is not None or self._leading:
            _log.debug("write_deferred", app=name, retry_s=TERM_RETRY_SECONDS)
            self._requeue(name, TERM_RETRY_SECONDS)

    def _act(self, app: Application, comparison: Comparison, log: FilteringBoundLogger
             ) -> SyncResult | None:
        """The leader's part of a refresh: continue, execute, or decide (see module doc)."""
        observed = observe(app, comparison)
        running = self._apps.peek(app.name).running
        if running is not None and self._argocd is not None and \
                self._argocd.terminating(app.name):
            self._end(app.name, running, "Operation terminated", Reason.TERMINATED)
            return None  # its `.operation` is cleared with the status, not run again
        if running is not None and is_requested(running.extra):
            app, comparison = self._resumed(app, comparison, running)
        if running is not None and running.revision == comparison.revision:
            return self._sync(app, comparison, observed, _continuing(running), log,
                              resume=running)
        if running is not None:
            self._supersede(app.name, running, comparison.revision)
        requested, local = (self._argocd.operation(app.name) if self._argocd else None), False
        if requested is None:
            with self._apps.of(app.name) as memory:
                requested, memory.requested = memory.requested, None
            local = True
        if requested is not None:
            held = None if requested.error else \
                self._window(app, comparison, manual=not requested.automated)
            if held is None:
                return self._operate(app, comparison, requested, log)
            self._hold(app.name, requested if local else None, held, log)
            self._save(app.name, status_of(comparison), held, proven_marks(comparison))
            return None
        self._observe_pause(app.name)
        decision = self._decide(app, observed, comparison)
        if decision.action is Action.SYNC:
            return self._sync(app, comparison, observed, decision, log)
        if decision.action in (Action.WAIT, Action.WINDOW) or (
                decision.action is Action.PAUSED and decision.wait > 0):
            log.info("sync_backoff", reason=decision.reason, wait_s=round(decision.wait, 1))
            self._requeue(app.name, decision.wait)
        self._save(app.name, status_of(comparison), decision, proven_marks(comparison))
        return None

    def _decide(self, app: Application, observed: Observed, comparison: Comparison) -> Decision:
        memory = self._apps.peek(app.name)
        decision = decide(app.sync_policy, observed, memory.last_op, now=self._clock(),
                          settings=self.autosync, pause=memory.pause)
        if decision.action is Action.SYNC:  # auto-sync, self-heal, retry: all automated
            return self._window(app, comparison, manual=False) or decision
        return decision

    def _window(self, app: Application, comparison: Comparison, *, manual: bool
                ) -> Decision | None:
        """The decision to wait when the app's sync windows are closed (``None``: open).

        Argo CD's ``CanSync(manual)`` (:mod:`gitops_ray.reconcile.windows`); the app is
        refreshed again when the windows open, or after :data:`WINDOW_RECHECK_SECONDS`.
        """
        project = comparison.project
        if project is None or not project.sync_windows:
            return None
        windows, now = for_app(project.sync_windows, app), self._clock()
        found = verdict(windows, now, manual=manual)
        if found.can_sync:
            return None
        opens = opens_at(windows, now) if manual and not found.error else found.opens_at
        wait = WINDOW_RECHECK_SECONDS if opens is None else \
            min(max(opens - now + 1.0, 1.0), WINDOW_RECHECK_SECONDS)
        reason = found.message if not manual else \
            f"the requested operation waits: {found.message}"
        return Decision(Action.WINDOW, reason, wait=wait)

    def _hold(self, name: str, local: ManualOperation | None, held: Decision,
              log: FilteringBoundLogger) -> None:
        """Keep a requested operation a sync window holds back, as Argo CD's controller does.

        An Application's ``.operation`` stays where it is; the web page's request is put
        back. Either runs on the first refresh after the window opens.
        """
        log.info("sync_window_closed", reason=held.reason, wait_s=round(held.wait, 1))
        if local is not None:
            with self._apps.of(name) as memory:
                memory.requested = memory.requested or local
        self._requeue(name, held.wait)

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

    def request_operation(self, name: str, op: ManualOperation) -> bool:
        """Run ``op`` on the app's next refresh, as an Argo CD ``.operation`` (leader only).

        The web page's Sync button: the same execution path as Argo CD's (:meth:`_operate`),
        recorded with its ``initiatedBy``. ``False`` when this replica does not lead (its
        refreshes never sync) or the app is unknown; the caller then refreshes nothing.
        """
        with self._cond:
            if not self._leading or not self.owns(name) or self.catalog.get(name) is None:
                return False
            with self._apps.of(name) as memory:
                memory.requested = op
        return True

    def request_rollback(self, name: str, entry_id: int, *, user: str) -> bool:
        """Roll the app back to history entry ``entry_id``, as ``gitops-ray rollback`` does.

        The web page's Rollback button. Why through :meth:`request_operation`: the sync of
        the entry's revision (its full SHA) must be the same sync as any other, so it is an
        operation pinned to that revision, recorded with the rollback's marks. As the CLI,
        an automated app is paused first (until resumed), so no later pass syncs git's revision
        in between; the pause is also taken into memory, so the pass that executes the
        rollback decides its follow-up as paused even before the record event arrives.
        ``False`` when this replica does not lead; :class:`ConfigError` naming the known
        ids when the history has no such entry.
        """
        app = self.catalog.get(name)
        if app is None or not self.leading or not self.owns(name):
            return False
        revision = str(target(self.store, name, entry_id)["revision"])
        op = ManualOperation(raw={"sync": {"revision": revision},
                                  "initiatedBy": {"username": user}},
                             revision=revision, rollback_of=entry_id,
                             initiated_by={"username": user})
        with self._write_guard(name) as leading:  # pause and request together, or neither
            if not leading:
                return False
            pause = pause_automation(self.store, app, Pause(
                since=self._clock(), rollback_id=entry_id, revision=revision, by=user))
            with self._apps.of(name) as memory:
                if pause is not None:
                    memory.pause = pause
                memory.requested = op
        return True

    def resume(self, name: str) -> Pause | None:
        """End the app's pause, as ``gitops-ray resume`` does (the web page's Resume).

        The pause it ended, ``None`` when there was none or this replica does not lead.
        The record event that follows refreshes the app, which then syncs git again.
        """
        with self._write_guard(name) as leading:
            if not leading:
                return None
            ended = resume(self.store, name)
        with self._apps.of(name) as memory:
            memory.pause = None
        return ended

    def request_refresh(self, name: str) -> None:
        """Make the app's next refresh resolve its revision anew (the web page's Refresh).

        As Argo CD's refresh annotation: git is asked, not the recently resolved revision.
        """
        with self._apps.of(name) as memory:
            memory.after_operation = True

    def _target(self, app: Application) -> tuple[Reconciler, LiveCache]:
        """The reconciler and cache of the app's destination cluster (see :data:`Route`)."""
        return self._route(app) if self._route is not None else (self.reconciler, self.cache)

    def _publish(self, name: str, comparison: Comparison) -> None:
        self.compared.remember(name, comparison)
        health = (comparison.health.status if comparison.health else HealthStatus.UNKNOWN).value
        last = self.metrics.apps.get(name).last_sync
        self.metrics.apps.set(name, AppState(comparison.diff.status, health, last))

    # -- sync ------------------------------------------------------------------------

    def _sync(self, app: Application, before: Comparison, observed: Observed,
              decision: Decision, log: FilteringBoundLogger, *,
              resume: OperationState | None = None, extra: Mapping[str, Any] | None = None,
              retry_limit: int = 0) -> SyncResult:
        """Sync, remember (in memory first), record, account, requeue.

        The recorded ``autoSync`` is what happens next (a retry after backoff, blocked
        after the last retry), so the status says so without waiting for a refresh; it
        is written with the sync's own record (:data:`~gitops_ray.reconcile.reconciler.Note`).
        ``resume``: continue a sync that waited for a wave; a step that waits again
        releases the worker and nothing is accounted until it finishes.
        """
        log.info("sync_started" if resume is None else "sync_continued",
                 revision=before.revision[:12], reason=decision.reason,
                 kind=decision.trigger, resources=len(decision.only or before.desired),
                 settled=len(before.settled))
        started = time.monotonic()
        reconciler, cache = self._target(app)
        step = _Step(self, app, observed, decision, {
            **operation_fields(decision, observed, self.identity), **(extra or {}),
            **_carried(resume)}, retry_limit)
        with cache.fresh():
            outcome = reconciler.sync(app, revision=before.revision, prune=decision.prune,
                                      only=decision.only, before=before, resume=resume,
                                      progress=UrgentUntilLanded(before.out_of_sync),
                                      note=step.note)
        result = outcome.result
        if outcome.unrecorded is not None:
            self._not_written(app.name, outcome.unrecorded)
        elif outcome.record is not None:
            self._recorded(app.name, outcome.record)
        if result.running:  # a wave is not healthy yet: come back on a change or a timer
            log.info("sync_waiting", revision=result.revision[:12], message=result.message)
            self._publish(app.name, outcome.after or outcome.before)
            self._requeue(app.name, WAVE_RECHECK_SECONDS)
            return result
        follow_up = step.follow_up
        self._account(app.name, outcome, decision, time.monotonic() - started)
        log.info("sync_finished", phase=result.phase, message=result.message,
                 reason=result.reason or "", revision=result.revision[:12],
                 kind=decision.trigger, next=follow_up.action.value)
        if follow_up.action in (Action.WAIT, Action.SYNC, Action.WINDOW):
            self._requeue(app.name, follow_up.wait)
        return result

    def _noted(self, step: _Step, result: SyncResult, basis: Comparison) -> RecordChange:
        """The controller's part of a sync step's record (see :class:`_Step`)."""
        name, fields = step.app.name, step.fields
        if is_requested(fields) and self._retrying(name, result, step.retry_limit):
            fields["retrying"] = True
        if result.running:
            with self._apps.of(name) as memory:
                memory.running = result.continuation(**fields)  # first: as last_op
            return _operation_note(fields, step.decision, running=True)
        with self._apps.of(name) as memory:
            memory.running = None
            memory.last_op = LastOperation(  # first: backoff must not need the record
                result.revision, result.phase, result.finished_at or self._clock(),
                step.observed.source_key, step.decision.self_heal_attempts,
                step.decision.attempt)
        self._publish(name, basis)
        step.follow_up = self._decide(step.app, observe(step.app, basis), basis)
        return _operation_note(fields, step.follow_up)

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

    def _supersede(self, name: str, running: OperationState, revision: str) -> None:
        """End a waiting sync whose revision is no longer the target (see module doc)."""
        self._end(name, running, f"superseded by revision {revision[:12]} while waiting "
                                 f"for wave {running.wave}", Reason.SUPERSEDED)

    def _end(self, name: str, running: OperationState, message: str, reason: Reason) -> None:
        """Record a sync that waited for a wave as failed, and forget it."""
        op = dataclasses.replace(
            decode_operation(running.extra), revision=running.revision,
            phase=OperationPhase.FAILED.value, message=message, reason=reason.value,
            started_at=running.started_at, finished_at=self._clock(),
            resources=running.resources)
        last = LastOperation.from_status({"operation": encode_operation(op)})
        with self._apps.of(name) as memory:
            memory.running = None
            if last is not None:
                memory.last_op = last
        self._update(name, lambda r: statuswrites.finished(r, op))

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

    # -- Argo CD: requested operations and status ------------------------------------

    def _operate(self, app: Application, comparison: Comparison, op: ManualOperation,
                 log: FilteringBoundLogger) -> SyncResult | None:
        """Execute the operation set on the Application (Sync button, ``argocd app sync``).

        Its revision (a rollback's history revision too), prune flag, resource selection
        and sync options apply to this sync only; a dry run records no deployment.
        """
        if op.error:
            self._refuse(app.name, comparison.revision, op)
            return None
        app = with_sync_options(app, op.sync_options)
        revision = self._revision(app, max_age=0, pinned=op.revision)  # resolved when run
        before = comparison if (revision, op.sync_options) == (comparison.revision, ()) \
            else self._target(app)[0].pipeline.compare(app, revision=revision)
        attempt = self._apps.peek(app.name).op_attempts + 1
        decision = Decision(Action.SYNC, f"operation initiated by {op.user or 'Argo CD'}",
                            prune=op.prune, only=op.only(r.key for r in before.diff.resources),
                            attempt=attempt, requested=True)
        extra = {"automated": False, "argocdOperation": op.raw, "initiatedBy": op.user,
                 **(marks(op.rollback_of) if op.rollback_of is not None else {})}
        if op.dry_run:
            result = self._dry_run(app, before, decision, extra, log)
        else:
            result = self._sync(app, before, observe(app, before), decision, log,
                                extra=extra, retry_limit=op.retry_limit)
        if not result.running:  # as Argo CD's controller: a refresh follows an operation
            with self._apps.of(app.name) as memory:
                memory.after_operation = True
            self._requeue(app.name, AFTER_OPERATION_SECONDS)
        return result

    def _resumed(self, app: Application, comparison: Comparison, running: OperationState
                 ) -> tuple[Application, Comparison]:
        """A requested operation's next step: its sync options and revision again."""
        op = requested_operation(running.extra.get("argocdOperation"))
        options = op.sync_options if op is not None and not op.error else ()
        if not options and running.revision == comparison.revision:
            return app, comparison
        app = with_sync_options(app, options)
        return app, self._target(app)[0].pipeline.compare(app, revision=running.revision)

    def _dry_run(self, app: Application, before: Comparison, decision: Decision,
                 extra: dict[str, Any], log: FilteringBoundLogger) -> SyncResult:
        """A requested dry run: what a sync would do, recorded as an operation only."""
        outcome = self._target(app)[0].sync(app, revision=before.revision,
                                            prune=decision.prune, only=decision.only,
                                            before=before, dry_run=True)
        op = {**outcome.result.as_operation(), **extra, "trigger": "operation",
              "dryRun": True}
        self._update(app.name, lambda r: statuswrites.finished(r, op))
        log.info("dry_run_finished", phase=outcome.result.phase,
                 revision=before.revision[:12])
        return outcome.result

    def _refuse(self, name: str, revision: str, op: ManualOperation) -> None:
        """A malformed operation: recorded as failed (so Argo CD shows why), not run."""
        now = self._clock()
        refused = Operation(revision=revision, phase=OperationPhase.FAILED.value,
                            message=op.error, reason=Reason.CONFIG_INVALID.value,
                            started_at=now, finished_at=now, resources=(),
                            trigger="operation", automated=False, argocd_operation=op.raw)
        self._update(name, lambda r: statuswrites.finished(r, refused))

    def _retrying(self, name: str, result: SyncResult, limit: int) -> bool:
        """Whether a failed requested operation is tried again (its ``retry.limit``)."""
        with self._apps.of(name) as memory:
            attempt = memory.op_attempts + 1
            if result.running:
                return False
            if result.phase != OperationPhase.FAILED or attempt > limit:
                memory.op_attempts = 0
                return False
            memory.op_attempts = attempt
        self._requeue(name, self.autosync.retry.delay(attempt))
        return True

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

    # -- deletion --------------------------------------------------------------------

    def forget(self, app: Application) -> None:
        """``app`` left its app-of-apps source: delete it on its next refresh turn."""
        with self._apps.of(app.name) as memory:
            memory.gone, memory.requested = app, None
        self.compared.forget(app.name)

    def _delete(self, app: Application, log: FilteringBoundLogger) -> None:
        """Delete (or orphan) a removed app's objects and drop its record; leader only."""
        with self._write_guard(app.name) as leading:
            if not leading:
                return
            try:
                reconciler = self._target(app)[0]
                # A destination that resolves to no cluster cannot be cascaded: its
                # objects are orphaned, never looked for in another cluster instead.
                unresolved = isinstance(reconciler.pipeline.clusters(app.destination), str)
                teardown = delete_app(reconciler.syncer.kube, self.store, app.name,
                                      policy=None if unresolved else cascade_policy(app),
                                      protected=reconciler.protection(app))
                done = unresolved or not teardown.ok or \
                    self._post_delete(app, reconciler, log)
            except (KubeError, ClusterUnavailable) as e:
                teardown, done = None, True
                log.warning("app_delete_failed", error=str(e))
            if teardown is not None and teardown.ok and done:
                self._apps.forget(app.name)  # everything: a re-added app starts clean
                if self._argocd is not None:
                    self._argocd.release(app)
                return
        self.forget(app)  # retried, unless the app comes back first
        self._requeue(app.name, DELETE_RETRY_SECONDS)

    def _post_delete(self, app: Application, reconciler: Reconciler,
                     log: FilteringBoundLogger) -> bool:
        """Run the deleted app's ``PostDelete`` hooks; whether they all ended.

        Rendered from git at the app's target revision, as for a sync; an app whose
        render fails is deleted without them (logged): a deletion never waits on git.
        """
        state = self._post_deletes.setdefault(app.name, PostDelete())
        try:
            sha, hooks = reconciler.pipeline.hooks(app)
        except GitOpsRayError as e:
            log.warning("post_delete_hooks_not_run", error=str(e))
            hooks, sha = (), ""
        runs = state.advance(HookRunner(reconciler.syncer.kube, app.name),
                             [h.manifest() for h in hooks], revision=sha)
        if runs is None:
            return False
        self._post_deletes.pop(app.name, None)
        if runs:
            log.info("post_delete_hooks_done", hooks=len(runs),
                     failed=[str(r.task.key) for r in runs
                             if r.phase is not OperationPhase.SUCCEEDED])
        return True

    # -- status and errors -----------------------------------------------------------

    def _save(self, name: str, fields: dict[str, Any], decision: Decision,
              marks: Mapping[str, str]) -> None:
        """Write the status record if what it says changed, or to add applied ``marks``."""
        fields = {**fields, "autoSync": statuswrites.auto_sync_fields(_auto_sync(decision))}
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

    def _failed(self, app: Application, error: GitOpsRayError, log: FilteringBoundLogger) -> None:
        if error.stage == "source":
            self.metrics.fetch_errors.labels(app.name).inc()
        log.warning("refresh_failed", stage=error.stage, error=str(error),
                    repo=redact_url(app.source.repo_url))
        state = self.metrics.apps.get(app.name)
        unreachable = isinstance(error, ClusterUnavailable)  # nothing is known of its objects
        health = HealthStatus.UNKNOWN.value if unreachable else state.health_status
        self.metrics.apps.set(app.name, AppState(SyncStatus.UNKNOWN, health, state.last_sync))
        with self._write_guard(app.name) as leading:
            if leading:
                self._save_error(app.name, f"{error.stage}: {error}",
                                 {"errorReason": str(getattr(error, "reason", "")),
                                  **({"health": health} if unreachable else {})})
                self._mirror(app.name, app)

    def _invalid(self, name: str, error: str, log: FilteringBoundLogger) -> None:
        """An unusable Application: no render, sync or prune; status and metrics say why."""
        self.metrics.reconciles.labels(name, "error").inc()
        state = self.metrics.apps.get(name)
        self.metrics.apps.set(name, AppState(SyncStatus.UNKNOWN, state.health_status,
                                             state.last_sync))
        log.warning("refresh_failed", stage="config", error=error)
        with self._write_guard(name) as leading:
            if leading:
                self._save_error(name, f"config: {error}")
                self._mirror(name, None)

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


@dataclasses.dataclass
class _Step:
    """One sync step of :meth:`Controller._sync`, and what its record notes.

    :meth:`note` is called by the reconciler right before it writes the step's record
    (:data:`~gitops_ray.reconcile.reconciler.Note`): it remembers the operation in
    memory first (the running step, or the last operation backoff is decided from),
    decides what auto-sync does next from the comparison the status is saved from, and
    hands back the change that notes both, written with the status in one request.
    """

    controller: Controller
    app: Application
    observed: Observed
    decision: Decision
    fields: dict[str, Any]
    retry_limit: int
    follow_up: Decision = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.follow_up = self.decision  # until the note is taken (never read before)

    def note(self, result: SyncResult, basis: Comparison) -> RecordChange:
        return self.controller._noted(self, result, basis)


def _operation_note(fields: dict[str, Any], decision: Decision, *, running: bool = False
                    ) -> RecordChange:
    """The record change noting a sync step's ``fields`` and what auto-sync does next."""
    def change(record: AppRecord) -> None:
        statuswrites.note_operation(record, fields, running=running)
        statuswrites.auto_sync(record, _auto_sync(decision))

    return change


def observe(app: Application, comparison: Comparison) -> Observed:
    """Reduce a comparison to the policy's input."""
    wanted = {o.key for o in comparison.desired}
    out = comparison.out_of_sync
    return Observed(comparison.revision, source_key(app, comparison.shapes),
                    comparison.diff.status, out,
                    frozenset(k for k in out if k not in wanted), len(comparison.desired),
                    deleting=comparison.deleting)


def _continuing(running: OperationState) -> Decision:
    """The decision that continues a running sync (no policy involved: it was decided)."""
    return Decision(Action.SYNC, f"continuing the sync at wave {running.wave}",
                    prune=running.prune, only=running.only,
                    self_heal_attempts=int(running.extra.get("selfHealAttempts", 0)),
                    attempt=int(running.extra.get("attempt", 1)))


def is_requested(fields: Mapping[str, Any]) -> bool:
    """Whether recorded operation ``fields`` are those of a requested operation."""
    return fields.get("trigger") in REQUESTED_TRIGGERS


def _carried(resume: OperationState | None) -> dict[str, Any]:
    """What a continued requested operation keeps from its first step."""
    if resume is None or not is_requested(resume.extra):
        return {}
    return {k: resume.extra[k] for k in CARRIED if k in resume.extra}


def with_sync_options(app: Application, options: Sequence[str]) -> Application:
    """``app`` with an operation's sync options added to its own (the operation's win)."""
    if not options:
        return app
    names = {o.split("=", 1)[0] for o in options}
    kept = tuple(o for o in app.sync_policy.sync_options if o.split("=", 1)[0] not in names)
    policy = dataclasses.replace(app.sync_policy, sync_options=(*kept, *options))
    return dataclasses.replace(app, sync_policy=policy)


def _end_pause(ended: Pause, record: AppRecord) -> None:
    """Remove the pause that ended, not a newer one another rollback wrote meanwhile."""
    statuswrites.resume(record, ended)


def _auto_sync(decision: Decision) -> AutoSync:
    return AutoSync(action=decision.action.value, reason=decision.reason)
