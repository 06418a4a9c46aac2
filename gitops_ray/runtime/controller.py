"""One refresh of one app, as the controller runs it: resolve, compare, decide, maybe sync.

Why this is separate from the wiring (:mod:`gitops_ray.runtime.runner`): this is the
behaviour worth reading and testing (what happens on a poll, a webhook or a watch
event); threads, sockets and signals are not.

:class:`Controller` is four parts, one on top of the other, each a module:
:mod:`~gitops_ray.runtime.bookkeeping` (its state, and the writes of what it found:
records, metrics, Events, the Application's status), :mod:`~gitops_ray.runtime.leadership`
(who may write: leading, shards, the write guard), :mod:`~gitops_ray.runtime.operations`
(deciding and running syncs, requested operations, rollbacks), and this one (a refresh
from start to end, its triggers, and deleting an app).

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

import time

from structlog.typing import FilteringBoundLogger

from gitops_ray.errors import GitOpsRayError
from gitops_ray.health import HealthStatus
from gitops_ray.kube import KubeError, LeaseExpired
from gitops_ray.logs import redact_url
from gitops_ray.reconcile.autosync import Action
from gitops_ray.reconcile.destinations import ClusterUnavailable
from gitops_ray.reconcile.pause import Pause
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.reconcile.status import desired_facts, proven_marks, status_of
from gitops_ray.render.apps import Application
from gitops_ray.runtime.bookkeeping import (
    _log,
    fingerprint,
    record_app,
    record_pause,
    record_status,
)
from gitops_ray.runtime.leadership import TERM_RETRY_SECONDS
from gitops_ray.runtime.metrics import AppState
from gitops_ray.runtime.operations import (
    Operations,
    _carried,
    _continuing,
    is_requested,
    observe,
    with_sync_options,
)
from gitops_ray.runtime.revisions import FOREVER
from gitops_ray.sync.hookrun import HookRunner
from gitops_ray.sync.phases import PostDelete
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.request import SyncResult
from gitops_ray.sync.teardown import cascade_policy, delete_app
from gitops_ray.sync.tracking import TRACKING_ANNOTATION, parse_tracking_id
from gitops_ray.types import Manifest, OperationPhase, ResourceKey, SyncStatus

CLUSTER_TRIGGERS = ("due",)  # watch events and backoffs: compare with the recent revision
DELETE_RETRY_SECONDS = 10.0


def app_of_event(obj: Manifest) -> str | None:
    """The app named by an object's tracking annotation, if it refers to the object itself."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    parsed = parse_tracking_id(str(annotations.get(TRACKING_ANNOTATION, "")))
    if parsed is None or parsed.key.name != ResourceKey.of(obj).name:
        return None
    return parsed.app

__all__ = ["Controller", "_carried", "app_of_event", "fingerprint", "is_requested", "observe",
           "record_app", "record_pause", "record_status", "with_sync_options"]


class Controller(Operations):
    """Refreshes apps; syncs and records only while leading."""

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

    def _refresh(self, app: Application, log: FilteringBoundLogger,
                 max_age: float, *, refreshed: bool = False) -> SyncResult | None:
        """Compare, then (leader only) decide and maybe sync; the sync's result, if any.

        ``refreshed``: Argo CD asked for this refresh (its annotation goes afterwards).
        The revision and comparison are acted on only in the lease term they were made in:
        a replica paused mid-refresh may lose the lease and win it again before it goes
        on, and what it resolved before (a push's commit) may be older than what the
        owner in between synced.
        """
        pipeline = self._target(app)[0].pipeline
        term = self._term_now(app.name)
        sha = "" if pipeline.refuses(app) else self._revision(app, max_age=max_age)
        comparison = pipeline.compare(app, revision=sha or None)
        self._publish(app.name, comparison)
        log.debug("app_compared", revision=sha[:12], sync=comparison.diff.status)
        with self._write_guard(app.name) as leading:
            if not leading or self._term_now(app.name) != term:
                self._retry_unwritten(app.name)
                return None
            try:
                return self._act(app, comparison, log)
            finally:
                self._mirror(app.name, app, refreshed=refreshed)

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

    def request_refresh(self, name: str) -> None:
        """Make the app's next refresh resolve its revision anew (the web page's Refresh).

        As Argo CD's refresh annotation: git is asked, not the recently resolved revision.
        """
        with self._apps.of(name) as memory:
            memory.after_operation = True

    def forget(self, app: Application) -> None:
        """``app`` left its app-of-apps source: delete it on its next refresh turn."""
        with self._apps.of(app.name) as memory:
            memory.gone, memory.requested = app, None
        self.compared.forget(app.name)
        if self._argocd is not None:
            self._argocd.forget(app.name)

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
                reconciler.pipeline.forget(app.name)
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
