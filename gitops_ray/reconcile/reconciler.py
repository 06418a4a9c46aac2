"""Sync operations for one app: compare, sync, compare again, record.

Shared by ``gitops-ray sync`` and the controller, so a one-shot sync and an automated one
behave the same. The second comparison is what the status reports: after a sync the app
should be Synced, and if it is not (an admission webhook changed something, a field we
cannot own) the status says so instead of assuming success. It costs nothing per object
the sync applied: the apply responses are the live objects it compares
(:meth:`Pipeline.compare`'s ``landed``), and the live objects the first comparison read
are what the sync starts from (:attr:`SyncRequest.live`).

**No prune after a partial render.** A render that tolerated a problem (a skipped file,
an ignored patch file: :mod:`gitops_ray.render.notes`) may be missing objects that are
still in git; pruning would delete them from the cluster. Such a sync applies what was
rendered and leaves every prune pending, saying why. (A render that *failed* never gets
this far: nothing is synced at all.)

**Every sync is recorded, failed or not** (:mod:`gitops_ray.sync.reasons`). The sync
itself never raises, and the steps around it that can fail are folded into its result:
a comparison after the sync that fails makes it a ``CompareFailed`` operation (recorded
without a comparison: sync status ``Unknown``, the error), and a record that cannot be
written makes it ``RecordFailed`` (unless it had failed already), returned all the same
so the controller can back off in memory. Only :class:`~gitops_ray.kube.LeaseExpired`
escapes: a replica that lost its lease records nothing. **One record write per sync
step**: the caller's own notes on the operation (the controller's trigger, initiator and
what auto-sync does next: :data:`Note`) are made in the same write as the status, the
history entry and the applied marks. A takeover syncs every changed app of a dead
replica at once, and a second write per sync was a third of its requests to the
controller's own API server.

**AppProject rules** (:mod:`gitops_ray.reconcile.project`, when the pipeline enforces
them): an app whose project stops it (an ``InvalidSpecError`` or ``UnknownError``
condition), or a sync that would write an object the project forbids, is refused before
anything is written: a ``Failed`` operation, reason ``ProjectForbidden``, with Argo CD's
message. Nothing is applied and nothing pruned; and no sync ever prunes a live object
the project forbids (Argo CD does not see those). A sync the project's **sync windows**
refuse (:mod:`gitops_ray.reconcile.windows`, judged as a manual sync: the controller
holds its automated ones back before they get here) fails ``SyncWindowClosed`` and is
not recorded, as argocd-server refuses ``argocd app sync``.

**Shared resources.** With ``FailOnSharedResource=true`` an app whose comparison found
one of git's objects live under another app's tracking id (a ``SharedResourceWarning``)
is refused the same way, as Argo CD refuses it (``controller/sync.go``): ``Failed``,
reason ``SharedResource``, "Shared resource found: <the condition's message>". Without
the option the sync applies it and says so (:mod:`gitops_ray.sync.engine`).

**Refused changes.** A sync that would write a change the API server's CRD rules or the
KubeRay operator refuse (:mod:`gitops_ray.diff.refusals`: ``spec.managedBy``,
``upgradeStrategy`` on a cluster a RayJob makes, ...) fails the same way before its first
write, reason ``ChangeRefused``, naming each object and field: no object of the app is
applied, not even those the change does not touch.

**Sync waves.** A sync whose wave is not healthy yet returns ``Running``
(:mod:`gitops_ray.sync.operation`); it is recorded as the app's running operation, and
``sync(..., resume=state)`` runs the next step at the recorded revision, prune flag and
resource selection. The controller calls it again when the watch reports a change;
:meth:`Reconciler.sync_until_done` is the in-process wait the CLI uses.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitops_ray.errors import GitOpsRayError
from gitops_ray.kube import LeaseExpired
from gitops_ray.reconcile.pipeline import Comparison, Pipeline
from gitops_ray.reconcile.project import (
    Cluster,
    Project,
    format_conditions,
    live_forbidden_reason,
    stops_sync,
)
from gitops_ray.reconcile.status import (
    RecordChange,
    save_failed_sync,
    save_operation,
    save_status,
)
from gitops_ray.reconcile.windows import for_app, verdict
from gitops_ray.render.apps import Application
from gitops_ray.sync.choices import FAIL_ON_SHARED
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.operation import OperationState
from gitops_ray.sync.reasons import Reason, reason_of
from gitops_ray.sync.records import AppRecord
from gitops_ray.sync.request import ResourceResult, SyncProgress, SyncRequest, SyncResult
from gitops_ray.types import ConditionType, ResourceAction, ResourceKey


@dataclass(frozen=True)
class SyncOutcome:
    """Before and after of one sync operation."""

    before: Comparison
    result: SyncResult
    after: Comparison | None
    unrecorded: GitOpsRayError | None = None  # why the operation could not be recorded
    record: AppRecord | None = None  # as the sync left it (None: dry run, or not written)


Note = Callable[[SyncResult, Comparison], RecordChange | None]
"""The caller's change to the record of a sync step, from its result and the comparison
its status is saved from (the one after the sync, or the one before when there is none).
Called right before the write, so what it decides is known before the record says it."""


class Reconciler:
    """Runs sync operations through a :class:`Pipeline` and a :class:`Syncer`."""

    def __init__(self, pipeline: Pipeline, syncer: Syncer, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.pipeline = pipeline
        self.syncer = syncer
        self.clock = clock  # what sync windows are evaluated at

    def protection(self, app: Application) -> Callable[[ResourceKey], str] | None:
        """What deleting ``app`` must leave alone: objects its AppProject forbids.

        Argo CD's resources finalizer deletes only what the project permits
        (``finalizeApplicationDeletion``); the rest is orphaned, as for prune.
        """
        return _protection(self.pipeline.project(app), self.pipeline.cluster_of(app))

    def sync(self, app: Application, *, revision: str | None = None, local: Path | None = None,
             prune: bool = False, dry_run: bool = False,
             only: frozenset[ResourceKey] | None = None,
             before: Comparison | None = None,
             resume: OperationState | None = None,
             progress: SyncProgress | None = None, note: Note | None = None) -> SyncOutcome:
        """Sync one app (``only``: just these resources, as self-heal does).

        ``resume``: run the next step of a sync that waited for a wave; its revision,
        prune flag and selection win over the arguments. ``progress`` hears each object
        as it is applied or pruned (the CLI's display). ``note``: see :data:`Note`.
        """
        if resume is not None:
            revision, prune, only = resume.revision, resume.prune, resume.only
        before = before or self.pipeline.compare(app, revision=revision, local=local)
        refused = _refusal(before, only)
        if refused is not None:
            return self._refused(before, refused, dry_run=dry_run, note=note)
        closed = None if dry_run or resume is not None else _closed(before, self.clock())
        if closed is not None:  # as argocd-server's Sync: refused, nothing recorded
            return SyncOutcome(before, closed, None)
        blocked = prune and bool(before.render_problems)
        request = SyncRequest(app, before.manifests(outlined=_outlined(before, only, resume)),
                              before.revision,
                              prune=prune and not blocked, dry_run=dry_run, only=only,
                              out_of_sync=before.out_of_sync, resume=resume,
                              protected=_protection(before.project,
                                                    self.pipeline.cluster_of(app)),
                              progress=progress, live=before.live, settled=before.settled,
                              inventory_with_record=True,
                              hooks=tuple(h.manifest() for h in before.hooks))
        result = self._sync(request)
        result.subject = self.subject(app, result.revision, local=local)
        if blocked:
            _explain_blocked_prune(result, before.render_problems)
        if dry_run:
            return SyncOutcome(before, result, None)
        after = self._compare_after(app, result, _untouched(before, result), local=local)
        done = after if isinstance(after, Comparison) else None
        record, unrecorded = self._record(result, after,
                                          note(result, done or before) if note else None)
        return SyncOutcome(before, result, done, unrecorded, record)

    def subject(self, app: Application, revision: str, *, local: Path | None = None) -> str:
        """The commit subject of ``revision`` for the history ("" for a local render).

        Read once per commit from the local mirror the render came from, so the history
        never needs git to be shown.
        """
        if local is not None or not revision:
            return ""
        return self.pipeline.source.subject(app.source.repo_url, revision)

    def _refused(self, before: Comparison, result: SyncResult, *, dry_run: bool,
                 note: Note | None) -> SyncOutcome:
        """Record a sync the AppProject refused; nothing changed, so ``before`` still holds."""
        if dry_run:
            return SyncOutcome(before, result, None)
        record, unrecorded = self._record(result, before,
                                          note(result, before) if note else None)
        return SyncOutcome(before, result, before, unrecorded, record)

    def _sync(self, request: SyncRequest) -> SyncResult:
        try:
            rules = self.pipeline.rules(request.app)
        except GitOpsRayError as e:  # an invalid ignore rule (compare would have said so)
            return SyncResult(request.app.name, request.revision).fail(
                str(e), reason_of(e), cause=e)
        return self.syncer.sync(request, rules)

    def _compare_after(self, app: Application, result: SyncResult,
                       untouched: frozenset[ResourceKey], *,
                       local: Path | None) -> Comparison | GitOpsRayError:
        """The comparison after the sync, or why it failed (the result fails too)."""
        try:
            return self.pipeline.compare(app, revision=result.revision, local=local,
                                         landed=result.landed, untouched=untouched,
                                         inventory=result.inventory)
        except LeaseExpired:
            raise
        except GitOpsRayError as e:
            result.fail(f"the comparison after the sync failed: {e}", Reason.COMPARE_FAILED,
                        cause=e)  # the step names it, whatever the stage (e.g. git)
            return e

    def _record(self, result: SyncResult, after: Comparison | GitOpsRayError,
                also: RecordChange | None) -> tuple[AppRecord | None, GitOpsRayError | None]:
        """Record the operation (and the caller's note on it).

        The record, or the error if it could not be written (the result says so too).
        """
        try:
            if isinstance(after, Comparison):
                return save_status(self.syncer.store, after, result, also), None
            return save_failed_sync(self.syncer.store, result, f"{after.stage}: {after}",
                                    also), None
        except LeaseExpired:
            raise
        except GitOpsRayError as e:
            result.fail(f"the operation could not be recorded: {e}", Reason.RECORD_FAILED,
                        cause=e)
            return None, e

    def sync_until_done(self, app: Application, *, timeout: float, poll: float,
                        revision: str | None = None, local: Path | None = None,
                        prune: bool = False, dry_run: bool = False,
                        sleep: Callable[[float], None] = time.sleep,
                        progress: SyncProgress | None = None) -> SyncOutcome:
        """Sync, and while a wave is not healthy, poll and continue, up to ``timeout``.

        For ``gitops-ray sync``: a one-shot command may hold its thread, the controller
        may not (it requeues instead). On timeout the operation is recorded as failed
        (``WaveTimeout``), so no running operation is left behind for a
        controller to pick up unannounced.
        """
        deadline = time.monotonic() + timeout
        outcome = self.sync(app, revision=revision, local=local, prune=prune, dry_run=dry_run,
                            progress=progress)
        while outcome.result.running:
            if time.monotonic() >= deadline:
                return self._give_up(outcome, timeout)
            sleep(poll)
            outcome = self.sync(app, local=local, resume=outcome.result.continuation(),
                                progress=progress)
        return outcome

    def _give_up(self, outcome: SyncOutcome, timeout: float) -> SyncOutcome:
        result = outcome.result
        result.fail(f"timed out after {timeout:g}s: {result.message}", Reason.WAVE_TIMEOUT)
        try:
            save_operation(self.syncer.store, result)
        except LeaseExpired:
            raise
        except GitOpsRayError as e:  # the result says it failed all the same
            return dataclasses.replace(outcome, unrecorded=e)
        return outcome


def _untouched(before: Comparison, result: SyncResult) -> frozenset[ResourceKey]:
    """Git's objects this step did not write: outside its selection, or settled.

    Their verdict from the comparison before the sync still holds, so the comparison
    after reads none of them (:meth:`Pipeline.compare`). A resumed step's earlier waves
    are not among them: they are compared as usual.
    """
    attempted = {r.key for r in result.resources} - result.settled
    earlier = {str(r.get("key", "")) for r in result.earlier}
    return frozenset(d.key for d in before.desired
                     if d.key not in attempted and str(d.key) not in earlier)


def _outlined(before: Comparison, only: frozenset[ResourceKey] | None,
              resume: OperationState | None) -> frozenset[ResourceKey]:
    """The objects a sync only needs the outline of: settled or outside the selection.

    The sync applies neither (:attr:`SyncRequest.settled`, ``only``). A resumed step's
    objects are all unpacked: its waves were compared before and its health re-checked.
    """
    if resume is not None:
        return frozenset()
    skipped = frozenset(d.key for d in before.desired if d.key not in only) \
        if only is not None else frozenset()
    return (before.settled - before.out_of_sync) | skipped


def _refusal(before: Comparison, only: frozenset[ResourceKey] | None) -> SyncResult | None:
    """The failed result of a sync refused before it starts, or ``None`` (see module doc).

    Argo CD's messages: its conditions formatted as ``Type: message`` (``;``-joined),
    or, per forbidden object, its sync's "resource g:K is not permitted in project p".
    A selective sync (self-heal) is refused only for the objects it selects.
    """
    result = SyncResult(before.app.name, before.revision)
    stopping = stops_sync(before.conditions)
    if stopping:
        return result.fail(format_conditions(stopping), Reason.PROJECT_FORBIDDEN)
    shared = [c for c in before.conditions if c.type is ConditionType.SHARED_RESOURCE]
    if shared and before.app.sync_policy.has_option(FAIL_ON_SHARED):
        return result.fail(f"Shared resource found: {shared[0].message}",
                           Reason.SHARED_RESOURCE)
    forbidden = sorted((key, why) for key, why in before.forbidden.items()
                       if only is None or key in only)
    if not forbidden:
        return _refused_change(before, only, result)
    result.resources = [ResourceResult(key, ResourceAction.FAILED, why)
                        for key, why in forbidden]
    return result.fail("one or more synchronization tasks are not valid: "
                       + "; ".join(why for _, why in forbidden), Reason.PROJECT_FORBIDDEN)


def _refused_change(before: Comparison, only: frozenset[ResourceKey] | None,
                    result: SyncResult) -> SyncResult | None:
    """A sync that writes a change the API server or the operator refuses fails first.

    Before its first write, whatever else the app holds: nothing half-applied
    (:mod:`gitops_ray.diff.refusals`).
    """
    refused = [r for r in before.diff.refusals if only is None or r.key in only]
    if not refused:
        return None
    result.resources = [ResourceResult(key, ResourceAction.FAILED,
                                       "; ".join(str(r) for r in refused if r.key == key))
                        for key in sorted({r.key for r in refused})]
    return result.fail("a change would be refused, nothing applied: "
                       + "; ".join(map(str, refused)), Reason.CHANGE_REFUSED)


def _closed(before: Comparison, now: float) -> SyncResult | None:
    """The refusal of a sync the app's sync windows do not allow (a manual one), or ``None``.

    Argo CD's server refuses ``argocd app sync`` the same way ("cannot sync: blocked by
    sync window"); the controller's automated syncs were held back before this.
    """
    project = before.project
    if project is None or not project.sync_windows:
        return None
    found = verdict(for_app(project.sync_windows, before.app), now, manual=True)
    if found.can_sync:
        return None
    return SyncResult(before.app.name, before.revision).fail(
        f"cannot sync: blocked by sync window ({found.message})", Reason.SYNC_WINDOW_CLOSED)


def _protection(project: Project | None, cluster: Cluster
                ) -> Callable[[ResourceKey], str] | None:
    """What prune must leave alone: live objects the project forbids (Argo CD: unseen).

    Matched against the project's destinations on the app's own ``cluster``.
    """
    if project is None:
        return None
    return lambda key: live_forbidden_reason(project, key, cluster)


def _explain_blocked_prune(result: SyncResult, problems: tuple[str, ...]) -> None:
    """Say in the result why prunes stayed pending (see the module docstring)."""
    why = f"not pruned: the render had problems ({'; '.join(problems)})"
    result.resources = [dataclasses.replace(r, message=why)
                        if r.action == ResourceAction.PENDING_PRUNE else r
                        for r in result.resources]
    if not result.message:
        result.message = why
