"""Sync one app: validate, apply in order, prune what left git, record the inventory.

The three promises, and where they are kept:

* **Never fight the autoscaler**: before each write, the live values at every ignored path
  are copied into git's object element by element (:mod:`gitops_ray.sync.merge`), so what
  we send equals live there.
* **Never clobber a concurrent writer**: each write carries the ``resourceVersion`` the
  decision was based on. On 409 we re-read, re-merge and retry, so an autoscaler patch
  that lands between our read and our write is kept, not overwritten.
* **Never prune by accident**: only objects in this app's inventory *and* carrying a
  tracking id that names this app and themselves are deleted, never when the render is
  empty (unless ``allowEmpty``), never with ``Prune=false`` (``Prune=confirm`` is treated
  the same, and says so: we have no confirmation flow), never after a failed apply, and
  with a ``uid`` precondition so a re-created object is left alone.

**Another app's object** (:mod:`gitops_ray.sync.tracking`): an object whose live
tracking id names another app is applied, as Argo CD applies it, and its result and the
operation's message say so (``SharedResourceWarning: ...``); with
``FailOnSharedResource=true`` it is not: the step fails, reason ``SharedResource`` (the
reconciler refuses such a sync before it starts; this is the same check on the object
as the apply finds it, so one that became shared since is refused too). Prune deletes
only an object whose tracking id names this app, with its ``uid`` *and*
``resourceVersion`` as preconditions: one that another app took (or anyone changed)
since prune read it is read again and decided again, never deleted unseen.

**Taking over** (:mod:`gitops_ray.sync.takeover`): before the first apply of an object
that ``kubectl apply`` or Argo CD applied, their managers' fields are moved to ours (as
client-go's ``csaupgrade``), so the apply removes what git dropped. ``status`` is never
applied (:func:`prepare`).

**Sync waves** (:mod:`gitops_ray.sync.operation`): objects are applied wave by wave
(``argocd.argoproj.io/sync-wave``, then kind order). Between waves the step checks the
health of the wave just applied; if it is not healthy yet the step ends ``Running`` with
that wave, and the next step (``SyncRequest.resume``) starts by re-checking it rather than
re-applying it. Pruning runs only once every wave is applied, as Argo CD's ``PruneLast``.

**Resource hooks** (:mod:`gitops_ray.sync.phases`): git's hooks are not among the objects
to apply (:attr:`SyncRequest.hooks`); the waves become steps of PreSync, Sync and PostSync,
each step's hooks run to their end before the next, prune comes before PostSync, and a
failed sync runs the SyncFail hooks before it ends ``Failed``.

**Progress** (:class:`SyncProgress`): a one-shot ``gitops-ray sync`` of many objects shows
how far each app got, so a request may carry a watcher that hears how many objects a step
will handle and each one as it is done. It is told, never asked: it cannot change the
sync, and the controller passes none.

**Parallel apply** (``sync.parallelism``): within a wave, objects of one kind-order
group (:func:`~gitops_ray.sync.order.kind_groups`: Namespaces, then ... , then custom
resources) are applied up to ``parallelism`` at a time, each with its own conflict
retries. Groups and waves stay sequential and prune stays last; an apply that fails
stops the group from starting more, and the step fails as a sequential one would. Each
worker runs in a copy of the caller's :mod:`contextvars` context, so the write fence
(:mod:`gitops_ray.kube.fence`) sees the leadership term the step was started under.
The objects the comparison found OutOfSync are applied first within their group, as a
batch of their own, so after a commit the changed ones land (and are reported) before
the rest are re-asserted.
Results are in the order the applies were started, whatever the order they landed in;
the progress watcher is told as each lands, one at a time.

**Settled objects are not re-asserted** (:attr:`SyncRequest.settled`): an object whose
live ``resourceVersion`` is the one our own apply of the same content left would come
back from another apply unchanged, so it is reported ``unchanged`` without a request.
Argo CD re-applies every object of a sync (unless ``ApplyOutOfSyncOnly``); the effect is
the same, without one no-op write per object on every commit: at 5,000 RayClusters in
100-object apps those writes were what a commit's change waited behind. An object anyone
else wrote since, or whose content or ignore rules changed, is applied as before. Objects
the sync will not apply (settled, or outside ``only``) may come outlined (identity and
sync wave only): they are ordered, kept in the inventory and health-checked by identity,
and not validated.

**What an apply costs**: the live object is what the comparison before the sync read
(:attr:`SyncRequest.live`: one LIST per kind and namespace in the CLI; in the controller
the OutOfSync objects it had to read, else the watch cache), so a new object costs one
write; a stale one costs a 409 and a re-read. Absence too: an object believed absent is
applied with :data:`ABSENT_VERSION` as its precondition, so if someone created it since
we looked, the apply is refused and the retry reads it and keeps its live values at
ignored paths instead of forcing git's over them. Each apply's response is kept
(:attr:`SyncResult.landed`): it is the live
object as our write left it, so the comparison after the sync reads nothing back.

**Events** (:mod:`gitops_ray.sync.events`): one per app and step that changed or failed
something, on the app's record, with the counts (``app_events``: the one-shot commands;
the controller posts its own); one per object only for what users look for on the object
itself: configured (a change to something that existed), pruned, and failed.

**A sync never raises** (the failure contract, :mod:`gitops_ray.sync.reasons`): every
failure, whichever step it happens in, is returned as a ``Failed`` result with a
:class:`~gitops_ray.sync.reasons.Reason`, so it is recorded as an operation and
auto-sync's retry limit and backoff apply to it. The only exception that escapes is
:class:`~gitops_ray.kube.LeaseExpired`: a replica that lost its lease records nothing.

**The inventory** is written before the first apply when the step adds objects to it
(so a crash cannot leave one untracked) and set to exactly what the step ends with (what
git has, and what prune kept) once it is done. A caller that records the result right
after (the reconciler, :attr:`SyncRequest.inventory_with_record`) gets that last one in
:attr:`SyncResult.inventory` and writes it with the status: one write per sync instead of
two (or a read when nothing changed). Until then the record may still list what the
step pruned, which is gone or going; the comparison after the sync is given the final
inventory, not the record's.

Two facts of the API server shape the rest. A deletion is accepted before the object is
gone (Foreground propagation and finalizers), so a pruned object that is still there is
reported as ``deleting`` (not ``pruned``) and kept in the inventory until it is: the
next comparison shows it OutOfSync "deleting", and ``wait`` is not done. And apps that
share a destination namespace with ``CreateNamespace=true`` race to create it: "already
exists" means the namespace is there, which is all we asked for.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.errors import GitOpsRayError, SyncError
from gitops_ray.health import Health, HealthStatus, assess
from gitops_ray.health.queued import waits_for_admission
from gitops_ray.kube import AlreadyExists, Conflict, Kube, KubeError, LeaseExpired
from gitops_ray.kube.workloads import workloads_in
from gitops_ray.sync import choices
from gitops_ray.sync.dryrun import prepare
from gitops_ray.sync.events import post_event, post_summary
from gitops_ray.sync.hookrun import HookRunner
from gitops_ray.sync.hooks import HookType
from gitops_ray.sync.order import kind_groups, sync_options, waves
from gitops_ray.sync.phases import HookSteps, Step, hook_action, plan, resumed_rank
from gitops_ray.sync.prune import (
    MAX_CONFLICT_RETRIES,
    prune,
)
from gitops_ray.sync.reasons import Reason, StepFailed, failing_as
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore
from gitops_ray.sync.request import (
    IgnoreRules,
    Landed,
    ResourceResult,
    SyncRequest,
    SyncResult,
    told,
)
from gitops_ray.sync.takeover import (
    PREVIOUS_APPLIERS,
    needs_takeover,
    predicted_after_takeover,
    take_over,
)
from gitops_ray.sync.tracking import with_tracking
from gitops_ray.sync.validate import validate_ray_objects
from gitops_ray.types import Manifest, OperationPhase, ResourceAction, ResourceKey, SyncOption

ABSENT_VERSION = "1"
"""The write precondition of an object believed absent: a version no object has.

etcd starts at revision 1 and every write makes a new revision, so no stored object
carries this one. The API server checks an apply's ``resourceVersion`` against what it
stores, and creates the object when nothing is stored (its version is then its own):
the apply creates an object that is still absent and gets 409 if one exists.
"""
log = structlog.get_logger(__name__)
SETTLED = "not re-applied: live is as our last apply of this content left it"



LiveLookup = Callable[[Manifest], "Manifest | None"]


class Syncer:
    """Applies and prunes apps through one :class:`Kube` client."""

    def __init__(self, kube: Kube, store: RecordStore, *,
                 live_lookup: LiveLookup | None = None, parallelism: int = 1,
                 app_events: bool = False) -> None:
        self.kube = kube
        self.store = store
        self._live_lookup = live_lookup  # e.g. the controller's watch cache
        self.parallelism = max(1, parallelism)  # settings: sync.parallelism
        self.app_events = app_events
        """Post the app's Event of each step (the one-shot commands; the controller posts
        its own, which also says what triggered the sync)."""

    def sync(self, request: SyncRequest, rules: IgnoreRules) -> SyncResult:
        """Sync one app; never raises but :class:`LeaseExpired` (see the module docstring)."""
        result = SyncResult(request.app.name, request.revision)
        if request.resume is not None:
            result.started_at = request.resume.started_at
            result.earlier = [dict(r) for r in request.resume.resources]
        hooks = self._hook_steps(request)
        resume = request.resume
        failing = resume is not None and resume.sync_phase == HookType.SYNC_FAIL.value
        try:
            if resume is not None and failing:
                hooks.sync_fail(request, result, again=True, failure=resume.failure,
                                reason=resume.failure_reason)
            else:
                self._sync(request, rules, result, hooks)
        except StepFailed as e:
            cause = e.__cause__ if isinstance(e.__cause__, GitOpsRayError) else e
            result.fail(str(e), e.reason, cause=cause)
        if result.phase == OperationPhase.FAILED and not failing:
            hooks.sync_fail(request, result, again=False, failure=result.message,
                            reason=result.reason.value if result.reason else "")
        hooks.finish(request, result)
        if not result.running and not result.finished_at:
            result.finished_at = time.time()
        if self.app_events and not request.dry_run:
            post_summary(self.kube, self.store.namespace, app=result.app,
                         revision=result.revision, phase=result.phase,
                         message=result.message, actions=[r.action for r in result.resources])
        return result

    def _hook_steps(self, request: SyncRequest) -> HookSteps:
        return HookSteps(HookRunner(self.kube, request.app.name),
                         lambda run: ResourceResult(run.task.key, hook_action(run),
                                                    run.message, run))

    def _sync(self, request: SyncRequest, rules: IgnoreRules, result: SyncResult,
              hooks: HookSteps) -> None:
        app = request.app
        objs = [with_tracking(app.name, o) for o in request.desired]
        problems = validate_ray_objects(o for o in objs if self._applies(request, o))
        if problems:
            result.fail("invalid Ray objects, nothing applied: " + "; ".join(problems),
                        Reason.VALIDATION_FAILED)
            return
        if request.prune and not objs and not app.sync_policy.allow_empty:
            result.fail(f"refusing to sync app {app.name!r}: the render is empty and "
                        "allowEmpty is not set, so pruning would delete everything",
                        Reason.EMPTY_RENDER)
            return
        with failing_as(Reason.INVENTORY_FAILED):
            record = self.store.load(app.name)
        if request.progress is not None:
            request.progress.planned(self._planned(request, objs, record))
        if request.resume is None and not request.dry_run:
            with failing_as(Reason.NAMESPACE_FAILED):
                self._ensure_namespace(request)
            with failing_as(Reason.INVENTORY_FAILED):
                self._remember(app.name, record, [InventoryEntry.of(o) for o in objs])
        steps = plan(objs, [with_tracking(app.name, h) for h in request.hooks]
                     if request.only is None else [],
                     revision=request.revision, started_at=result.started_at)
        with failing_as(Reason.APPLY_FAILED):
            if not self._run_steps(request, steps, rules, result, hooks, post=False):
                return
        with failing_as(Reason.PRUNE_FAILED):
            kept = prune(self.kube, request, record, {ResourceKey.of(o) for o in objs}, result)
        if request.dry_run:
            self._run_steps(request, steps, rules, result, hooks, post=True)
            return
        final = [InventoryEntry.of(o) for o in objs] + kept
        if request.inventory_with_record:
            result.inventory = final
        else:
            with failing_as(Reason.INVENTORY_FAILED):
                self._set_inventory(app.name, final)
        with failing_as(Reason.HOOK_FAILED):
            self._run_steps(request, steps, rules, result, hooks, post=True)

    def _planned(self, request: SyncRequest, objs: list[Manifest], record: AppRecord) -> int:
        """How many objects this step applies (waves not applied yet) or examines to prune."""
        resumed = request.resume.wave if request.resume is not None else None
        applied = sum(1 for number, members in waves(objs)
                      if resumed is None or number > resumed
                      for obj in members if not self._skipped(request, ResourceKey.of(obj)))
        wanted = {ResourceKey.of(o) for o in objs}
        return applied + sum(1 for e in record.inventory if e.key not in wanted)

    # -- waves -----------------------------------------------------------------------

    def _run_steps(self, request: SyncRequest, steps: list[Step], rules: IgnoreRules,
                   result: SyncResult, hooks: HookSteps, *, post: bool) -> bool:
        """Run the steps before PostSync (``post``: the PostSync ones); ``False``: stopped.

        A step applies its wave's resources and runs its hooks (:mod:`.phases`); it stops
        the sync when one fails, or when a hook still runs or (but for the last step) a
        resource is not healthy yet. A resumed step skips the steps before the one it
        waited at and does not re-apply that one: it re-checks it. The last step is not
        waited for (as in Argo CD: a sync that applied everything has succeeded, whatever
        health follows), unless it has hooks, which always run to their end.
        """
        resume = request.resume
        resumed = resumed_rank(resume.sync_phase, resume.wave) if resume is not None else None
        for i, step in enumerate(steps):
            if (step.phase is HookType.POST_SYNC) != post or \
                    (resumed is not None and step.rank < resumed):
                continue
            again = step.rank == resumed
            if not again and step.resources and \
                    not self._apply_all(request, step.resources, rules, result):
                return False
            if not hooks.run(request, step, result, again=again):
                return False
            if i != len(steps) - 1 and step.resources and \
                    not self._wave_healthy(request, step.wave, step.resources, result):
                return False
        return True

    def _wave_healthy(self, request: SyncRequest, wave: int, members: list[Manifest],
                      result: SyncResult) -> bool:
        """Whether every object of ``wave`` is healthy (no health check counts as healthy).

        Not healthy yet: the result becomes ``Running``. Degraded: the sync fails
        (``WaveDegraded``), as in gitops-engine, since waiting would not help.
        """
        if request.dry_run:
            return True
        verdicts = [(ResourceKey.of(o), self._assess(self._lookup(o))) for o in members]
        pending = [(k, h) for k, h in verdicts
                   if h is not None and h.status is not HealthStatus.HEALTHY]
        if not pending:
            return True
        key, health = max(pending, key=lambda pair: pair[1].status.rank)
        if health.status is HealthStatus.DEGRADED:
            result.fail(f"wave {wave}: {key} is {choices.said(health)}", Reason.WAVE_DEGRADED)
            return False
        result.wait(request, wave, f"waiting for wave {wave} to be healthy: {key} is "
                                   f"{choices.said(health)}")
        log.info("sync_wave_waiting", app=request.app.name, wave=wave, resource=str(key),
                 health=health.status.value)
        return False

    def _assess(self, live: Manifest | None) -> Health | None:
        """Health of a wave's member; a queued one reads its Kueue Workload.

        Suspended waits, as in gitops-engine (only Healthy lets the next wave start): a
        RayCluster waiting in a Kueue queue holds the later waves until it is admitted.
        """
        if live is None or not waits_for_admission(live):
            return assess(live)
        namespace = str((live.get("metadata") or {}).get("namespace") or "")
        return assess(live, workloads=workloads_in(self.kube, namespace))

    # -- apply -----------------------------------------------------------------------

    def _apply_all(self, request: SyncRequest, objs: list[Manifest], rules: IgnoreRules,
                   result: SyncResult) -> bool:
        """Apply one wave, kind group after kind group; ``False`` when an apply failed."""
        for group in kind_groups(objs):
            todo = [o for o in group if not self._skipped(request, ResourceKey.of(o))]
            settled = [k for k in map(ResourceKey.of, todo) if choices.is_settled(request, k)]
            for batch in choices.changed_first(request, todo, leaving=frozenset(settled)):
                for outcome in self._apply_group(request, batch, rules):
                    _settle(outcome, result)
                if result.phase == OperationPhase.FAILED:
                    return False
            for key in settled:
                result.settled.add(key)
                result.resources.append(told(request, ResourceResult(
                    key, ResourceAction.UNCHANGED, SETTLED)))
        return True

    def _apply_group(self, request: SyncRequest, objs: list[Manifest],
                     rules: IgnoreRules) -> list[_Outcome]:
        """Apply ``objs`` (up to :attr:`parallelism` at a time); their outcomes in order.

        Once one fails, no more are started (those in flight finish): the outcomes stop
        at the objects that were attempted.
        """
        stop, telling = threading.Event(), threading.Lock()

        def one(obj: Manifest) -> _Outcome | None:
            if stop.is_set():
                return None
            try:
                outcome = self._attempt(request, obj, rules)
            except BaseException:
                stop.set()
                raise
            if outcome.error is not None:
                stop.set()
            with telling:  # the watcher hears one object at a time, as each lands
                told(request, outcome.resource)
            return outcome

        if self.parallelism == 1 or len(objs) < 2:
            outcomes = [one(obj) for obj in objs]
        else:
            with ThreadPoolExecutor(min(self.parallelism, len(objs)),
                                    thread_name_prefix="apply") as pool:
                futures = [pool.submit(contextvars.copy_context().run, one, obj)
                           for obj in objs]
                outcomes = [f.result() for f in futures]
        return [o for o in outcomes if o is not None]

    def _attempt(self, request: SyncRequest, obj: Manifest, rules: IgnoreRules) -> _Outcome:
        """Apply one object; a failure is an outcome, only :class:`LeaseExpired` raises."""
        try:
            resource, landed = self._apply(request, obj, rules)
        except LeaseExpired:
            raise  # not leading any more: stop now, record nothing (kube.fence)
        except GitOpsRayError as e:  # KubeError, conflicts exhausted, an ignore rule
            key = ResourceKey.of(obj)
            if not request.dry_run:
                post_event(self.kube, obj, reason="SyncFailed", message=str(e), warning=True)
            return _Outcome(ResourceResult(key, ResourceAction.FAILED, str(e)), None, e)
        return _Outcome(resource, landed, None)

    def _applies(self, request: SyncRequest, obj: Manifest) -> bool:
        """Whether this sync may apply ``obj``: not skipped, not settled.

        Only those are validated: the others may come outlined (identity and wave only,
        :meth:`~gitops_ray.reconcile.pipeline.DesiredObject.outline`).
        """
        key = ResourceKey.of(obj)
        return not self._skipped(request, key) and not choices.is_settled(request, key)

    def _skipped(self, request: SyncRequest, key: ResourceKey) -> bool:
        if request.only is not None and key not in request.only:
            return True
        only_drift = request.option(SyncOption.APPLY_OUT_OF_SYNC_ONLY)
        return (only_drift and request.out_of_sync is not None
                and key not in request.out_of_sync)

    def _apply(self, request: SyncRequest, obj: Manifest, rules: IgnoreRules
               ) -> tuple[ResourceResult, Landed | None]:
        key = ResourceKey.of(obj)
        live = self._known(request, obj)
        replace = request.option(SyncOption.REPLACE) or \
            sync_options(obj).has(SyncOption.REPLACE)
        for _ in range(MAX_CONFLICT_RETRIES):
            shared = choices.shared(request, obj, live)
            try:
                live = self._take_over(live, replace=replace, dry_run=request.dry_run)
                body = prepare(obj, live, rules)
                written = self._write(body, live, replace=replace, dry_run=request.dry_run)
            except Conflict:
                live = self._get(obj)  # someone wrote in between: re-read, re-decide
                continue
            if request.dry_run and live is not None and not replace:
                written = predicted_after_takeover(written, body=body, live=live)
            action = choices.action(live, written)
            if action == ResourceAction.CONFIGURED and not request.dry_run:
                post_event(self.kube, written, reason="ResourceConfigured",
                           message=f"configured by app {request.app.name} at revision "
                                   f"{request.revision[:12]}")
            log.info("resource_synced", app=request.app.name, resource=str(key), action=action,
                     dry_run=request.dry_run)
            landed = None if request.dry_run or replace else \
                Landed(written, action == ResourceAction.CREATED)
            return ResourceResult(key, action, shared), landed
        raise SyncError(f"{key}: still conflicting after {MAX_CONFLICT_RETRIES} attempts")

    def _take_over(self, live: Manifest | None, *, replace: bool,
                   dry_run: bool) -> Manifest | None:
        """``live`` after moving a previous applier's fields to us (:mod:`.takeover`).

        Not for a replace (it writes the whole object, nothing is left behind) nor a
        dry run (it writes nothing; the prediction shows the takeover instead).
        """
        if live is None or replace or dry_run or not needs_takeover(live):
            return live
        try:
            return take_over(self.kube, live)
        except (Conflict, LeaseExpired):
            raise
        except KubeError as e:
            raise SyncError(f"{ResourceKey.of(live)}: taking over the fields of "
                            f"{', '.join(PREVIOUS_APPLIERS)} failed: {e}") from e

    def _write(self, body: Manifest, live: Manifest | None, *, replace: bool,
               dry_run: bool) -> Manifest:
        """Write ``body``; 409 (:class:`Conflict`) if ``live`` is not what is there now."""
        if replace and live is None:  # a create is refused if the object exists
            return self.kube.create(body, field_manager=FIELD_MANAGER, dry_run=dry_run)
        if replace:
            return self.kube.replace(_with_live_status(body, live), field_manager=FIELD_MANAGER,
                                     dry_run=dry_run)
        if live is None:
            body = _with_version(body, ABSENT_VERSION)
        return self.kube.apply(body, field_manager=FIELD_MANAGER, force=True, dry_run=dry_run)

    def _known(self, request: SyncRequest, obj: Manifest) -> Manifest | None:
        """The live object as the comparison before the sync read it, else a lookup.

        Stale is safe: the write carries its ``resourceVersion``, and a 409 re-reads.
        """
        key = ResourceKey.of(obj)
        if request.live is not None and key in request.live:
            return request.live[key]
        return self._lookup(obj)

    def _lookup(self, obj: Manifest) -> Manifest | None:
        if self._live_lookup is not None:
            return self._live_lookup(obj)
        return self._get(obj)

    def _get(self, obj: Manifest) -> Manifest | None:
        meta = obj.get("metadata") or {}
        return self.kube.get(str(obj["apiVersion"]), str(obj["kind"]), name=str(meta["name"]),
                             namespace=meta.get("namespace"))

    def _ensure_namespace(self, request: SyncRequest) -> None:
        ns = request.app.destination.namespace
        if not (request.option(SyncOption.CREATE_NAMESPACE) and ns) or choices.seen_in(request, ns):
            return
        if self.kube.get("v1", "Namespace", name=ns) is not None:
            return
        with contextlib.suppress(AlreadyExists):  # another app (or anyone) created it first
            self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns}}, field_manager=FIELD_MANAGER)

    # -- records ---------------------------------------------------------------------

    def _remember(self, app: str, record: AppRecord, entries: Iterable[InventoryEntry]) -> None:
        """Add entries before applying, so a crash mid-sync cannot leak untracked objects.

        Nothing is read or written when the record just loaded lists them all already
        (the usual sync after a commit): the inventory is set from the API server's copy
        when the sync ends either way.
        """
        new = set(entries)
        if new <= set(record.inventory):
            return
        self.store.update(app, lambda r: setattr(r, "inventory", sorted(set(r.inventory) | new)))

    def _set_inventory(self, app: str, entries: list[InventoryEntry]) -> None:
        self.store.update(app, lambda r: setattr(r, "inventory", sorted(set(entries))))


def _with_version(obj: Manifest, version: str) -> Manifest:
    """A copy of ``obj`` whose ``metadata.resourceVersion`` is ``version``."""
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": version}}


def _with_live_status(body: Manifest, live: Manifest | None) -> Manifest:
    """A replace (PUT) writes the whole object: it keeps live's status as it is.

    And live's finalizers: others add them (the operator's GCS cleanup, Kueue's), and a
    replace without them would remove them; a server-side apply leaves them alone already.
    """
    if not live:
        return body
    out = {**body, "status": live["status"]} if "status" in live else dict(body)
    theirs = (live.get("metadata") or {}).get("finalizers") or []
    meta = out.get("metadata") or {}
    mine = meta.get("finalizers") or []
    missing = [f for f in theirs if f not in mine]
    if missing:
        out["metadata"] = {**meta, "finalizers": [*mine, *missing]}
    return out


@dataclass(frozen=True)
class _Outcome:
    """One apply: what happened, its response, and the error if it failed."""

    resource: ResourceResult
    landed: Landed | None
    error: GitOpsRayError | None


def _settle(outcome: _Outcome, result: SyncResult) -> None:
    """Add one apply's outcome to the result (the first failure names the step's)."""
    result.resources.append(outcome.resource)
    if outcome.landed is not None:
        result.landed[outcome.resource.key] = outcome.landed
    if outcome.error is not None:
        reason = outcome.error.reason if isinstance(outcome.error, StepFailed) \
            else Reason.APPLY_FAILED
        result.fail(f"{outcome.resource.key}: {outcome.error}", reason, cause=outcome.error)
    elif outcome.resource.message.startswith(choices.SHARED_WARNING):
        result.note(outcome.resource.message)
