"""Operations: deciding, running and recording a sync, a requested one or a waiting one.

This part of :class:`gitops_ray.runtime.controller.Controller` turns a comparison into an
operation: auto-sync's decision (with sync windows and a pause), the sync itself (one step
at a time, a waiting wave released and continued: :mod:`gitops_ray.sync.operation`), an
Argo CD ``.operation`` or the web page's request (with its sync options, revision, retry
and dry run), a rollback, and the end of a waiting sync that was superseded or
terminated. Each operation is recorded through :mod:`gitops_ray.sync.statuswrites` as
typed :class:`~gitops_ray.sync.appstatus.Operation` values or the engine's own.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from structlog.typing import FilteringBoundLogger

from gitops_ray.reconcile.argostatus import ManualOperation, requested_operation
from gitops_ray.reconcile.autosync import (
    Action,
    Decision,
    LastOperation,
    Observed,
    decide,
    operation_fields,
    source_key,
)
from gitops_ray.reconcile.pause import Pause
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.reconcile.rollback import ROLLBACK_TRIGGER, marks, pause_automation, resume, target
from gitops_ray.reconcile.status import RecordChange
from gitops_ray.reconcile.windows import for_app, opens_at, verdict
from gitops_ray.render.apps import REVISIONS_SEPARATOR, Application, split_revisions
from gitops_ray.runtime.bookkeeping import auto_sync_of
from gitops_ray.runtime.leadership import Leadership
from gitops_ray.runtime.queue import UrgentUntilLanded
from gitops_ray.sync import statuswrites
from gitops_ray.sync.appstatus import Operation, decode_operation, encode_operation
from gitops_ray.sync.operation import OperationState
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import AppRecord
from gitops_ray.sync.request import SyncResult
from gitops_ray.types import OperationPhase, SyncOptions

CARRIED = ("automated", "trigger", "argocdOperation", "initiatedBy", "rollbackOf")
"""Fields of a requested operation that every later step of it records too."""
REQUESTED_TRIGGERS = frozenset({"operation", ROLLBACK_TRIGGER})
"""The recorded ``trigger`` of a requested operation (a rollback is one, marked as such)."""
AFTER_OPERATION_SECONDS = 1.0
"""An executed operation's app is refreshed again this much later, and its status written
with a new ``reconciledAt`` (a second write, as Argo CD's own refresh after a sync makes:
argocd-server's Watch may miss the one that finished the operation)."""
WAVE_RECHECK_SECONDS = 30.0
"""A running sync is re-checked at least this often (watch events usually come first)."""
WINDOW_RECHECK_SECONDS = 300.0
"""At the latest, a refresh this long after a sync window held an app back (it is
requeued for the moment the window opens, when that is sooner)."""


@dataclasses.dataclass
class _Step:
    """One sync step of :meth:`Operations._sync`, and what its record notes.

    :meth:`note` is called by the reconciler right before it writes the step's record
    (:data:`~gitops_ray.reconcile.reconciler.Note`): it remembers the operation in
    memory first (the running step, or the last operation backoff is decided from),
    decides what auto-sync does next from the comparison the status is saved from, and
    hands back the change that notes both, written with the status in one request.
    """

    controller: Operations
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
        statuswrites.auto_sync(record, auto_sync_of(decision))

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


def with_sync_options(app: Application, options: SyncOptions) -> Application:
    """``app`` with an operation's sync options added to its own (the operation's win)."""
    if not options:
        return app
    merged = app.sync_policy.options.overridden_by(options)
    policy = dataclasses.replace(app.sync_policy, sync_options=merged.written)
    return dataclasses.replace(app, sync_policy=policy)


class Operations(Leadership):
    """Decisions and operations (see the module doc)."""

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
        before = comparison if revision == comparison.revision and not op.sync_options \
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
        options = op.sync_options if op is not None and not op.error else SyncOptions()
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
