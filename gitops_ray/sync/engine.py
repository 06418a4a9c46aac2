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
import copy
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff.groupfields import keep_others, with_memory
from gitops_ray.errors import GitOpsRayError, SyncError
from gitops_ray.health import Health, HealthStatus, assess
from gitops_ray.health.queued import waits_for_admission
from gitops_ray.kube import AlreadyExists, Conflict, Kube, KubeError, LeaseExpired
from gitops_ray.kube.workloads import workloads_in
from gitops_ray.render.apps import Application
from gitops_ray.sync.events import post_event, post_summary
from gitops_ray.sync.hookrun import HookRun, HookRunner
from gitops_ray.sync.hooks import HookType
from gitops_ray.sync.merge import Path, keep_live_values
from gitops_ray.sync.operation import OperationState, only_field
from gitops_ray.sync.order import kind_groups, prune_order, sync_options, waves
from gitops_ray.sync.phases import HookSteps, Step, hook_action, plan, resumed_rank
from gitops_ray.sync.reasons import Reason, StepFailed, failing_as
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore
from gitops_ray.sync.takeover import (
    PREVIOUS_APPLIERS,
    needs_takeover,
    predicted_after_takeover,
    take_over,
)
from gitops_ray.sync.tracking import is_tracked_by, shared_message, shared_with, with_tracking
from gitops_ray.sync.validate import validate_ray_objects
from gitops_ray.types import Manifest, OperationPhase, ResourceAction, ResourceKey, SyncOption

MAX_CONFLICT_RETRIES = 5
FAIL_ON_SHARED = SyncOption.FAIL_ON_SHARED_RESOURCE
ABSENT_VERSION = "1"
"""The write precondition of an object believed absent: a version no object has.

etcd starts at revision 1 and every write makes a new revision, so no stored object
carries this one. The API server checks an apply's ``resourceVersion`` against what it
stores, and creates the object when nothing is stored (its version is then its own):
the apply creates an object that is still absent and gets 409 if one exists.
"""
PRUNE_CONFIRM_UNSUPPORTED = ("not pruned: Prune=confirm is not supported (gitops-ray has no "
                             "confirmation step), so it is treated as Prune=false; delete "
                             "the object by hand once you are sure")
log = structlog.get_logger(__name__)
_VOLATILE = ("managedFields", "resourceVersion", "generation")
STILL_DELETING = "deletion accepted; waiting for finalizers (e.g. foreground deletion)"
SETTLED = "not re-applied: live is as our last apply of this content left it"
KEPT_IN_INVENTORY = frozenset({ResourceAction.PRUNE_SKIPPED, ResourceAction.PENDING_PRUNE,
                               ResourceAction.FAILED, ResourceAction.DELETING})
"""Prune outcomes after which the object may still exist, so the app must still track it."""


class IgnoreRules(Protocol):
    """What sync needs from the diff stage's compiled ignore rules."""

    def ignored_paths(self, obj: Manifest, *, live: Manifest | None = None) -> list[Path]: ...


class SyncProgress(Protocol):
    """Hears a sync step as it goes (the CLI's progress display); see the module docstring.

    Called from the syncing thread; it must be quick and must not raise.
    """

    def planned(self, count: int) -> None:
        """Say that the step will apply or examine for pruning ``count`` more objects."""

    def done(self, key: ResourceKey, action: ResourceAction) -> None:
        """One object was applied or examined for pruning, with what happened to it."""


@dataclass(frozen=True)
class ResourceResult:
    """What happened to one object: created, configured, unchanged, pruned, ... ."""

    key: ResourceKey
    action: ResourceAction
    message: str = ""
    hook: HookRun | None = None  # a hook's run (:mod:`gitops_ray.sync.hookrun`)

    def as_dict(self) -> dict[str, Any]:
        """As recorded in the operation (``resources[]``)."""
        out: dict[str, Any] = {
            "key": str(self.key), "action": self.action.value, "message": self.message,
            "group": self.key.group, "kind": self.key.kind, "namespace": self.key.namespace,
            "name": self.key.name}
        return {**out, **self.hook.entry()} if self.hook is not None else out


@dataclass(frozen=True)
class Landed:
    """An apply's response: the object as our write left it (see the module docstring).

    ``created``: it did not exist before, so nothing else (Events, Pods) can be about it
    yet but what came after this write.
    """

    live: Manifest = field(repr=False)
    created: bool = False


@dataclass
class SyncResult:
    """The outcome of one sync operation, or of one step of it (Argo's phases).

    ``Running``: the step applied a wave that is not healthy yet; :meth:`continuation` is
    what the next step resumes from (see :mod:`gitops_ray.sync.operation`).
    """

    app: str
    revision: str
    phase: OperationPhase = OperationPhase.SUCCEEDED
    message: str = ""
    reason: Reason | None = None  # why it failed (None while it has not)
    resources: list[ResourceResult] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float = 0.0
    cause: GitOpsRayError | None = field(default=None, repr=False, compare=False)
    """The error behind the failure, if any (not recorded: e.g. readiness asks if it is a 403)."""
    state: dict[str, Any] = field(default_factory=dict)  # Running: what the next step needs
    earlier: list[dict[str, Any]] = field(default_factory=list)  # earlier steps' resources
    subject: str = ""  # the revision's commit subject, for the history (one bounded line)
    landed: dict[ResourceKey, Landed] = field(default_factory=dict, repr=False, compare=False)
    """Apply responses of this step (server-side applies only), for the comparison after."""
    settled: set[ResourceKey] = field(default_factory=set, repr=False, compare=False)
    """Objects of :attr:`SyncRequest.settled` this step reported unchanged without a write."""
    inventory: list[InventoryEntry] | None = field(default=None, repr=False, compare=False)
    """The app's inventory after the step, for the caller to record
    (:attr:`SyncRequest.inventory_with_record`); ``None``: nothing left to record."""

    @property
    def ok(self) -> bool:
        return self.phase == OperationPhase.SUCCEEDED

    @property
    def running(self) -> bool:
        """Waiting for a wave to become healthy: continue with :meth:`continuation`."""
        return self.phase == OperationPhase.RUNNING

    @property
    def deleting(self) -> list[ResourceKey]:
        """Objects whose deletion was accepted but which are not gone yet."""
        return [r.key for r in self.resources if r.action == ResourceAction.DELETING]

    def fail(self, message: str, reason: Reason, *,
             cause: GitOpsRayError | None = None) -> SyncResult:
        """Mark the operation failed.

        The first failure names it (later ones are in :attr:`resources`): the root cause
        is what a user must fix first.
        """
        if self.phase != OperationPhase.FAILED:
            self.phase, self.message, self.reason = OperationPhase.FAILED, message, reason
            self.cause, self.state = cause, {}
        self.finished_at = time.time()
        return self

    def wait(self, request: SyncRequest, wave: int, message: str, *,
             phase: HookType = HookType.SYNC, **more: str) -> SyncResult:
        """End this step ``Running``: ``wave`` (of ``phase``) is applied and not done yet."""
        self.phase, self.message = OperationPhase.RUNNING, message
        self.state = {"wave": wave, "prune": request.prune, "only": only_field(request.only),
                      "syncPhase": phase.value, **more}
        return self

    def continuation(self, **extra: Any) -> OperationState:
        """The state a next step resumes from (only meaningful while :attr:`running`)."""
        return OperationState.parse({**self.as_operation(), **extra})

    def note(self, message: str) -> None:
        """Add ``message`` to the operation's message (once)."""
        if message not in self.message:
            self.message = f"{self.message}; {message}" if self.message else message

    def as_operation(self) -> dict[str, Any]:
        op = {"revision": self.revision, **({"subject": self.subject} if self.subject else {}),
              "phase": self.phase.value, "message": self.message,
              "reason": self.reason.value if self.reason else "",
              "startedAt": self.started_at, "finishedAt": self.finished_at,
              "resources": self.earlier + [r.as_dict() for r in self.resources]}
        return {**op, **self.state} if self.running else op


@dataclass(frozen=True)
class SyncRequest:
    """One sync: the app, git's rendered objects and how to treat them."""

    app: Application
    desired: list[Manifest]  # those it will not apply may be outlined (module docstring)
    revision: str
    prune: bool = False
    dry_run: bool = False
    only: frozenset[ResourceKey] | None = None  # selective sync (self-heal)
    out_of_sync: frozenset[ResourceKey] | None = None  # for ApplyOutOfSyncOnly=true
    resume: OperationState | None = None  # continue a sync that waited for a wave
    hooks: tuple[Manifest, ...] = ()  # git's resource hooks (sync.hooks): run, not applied
    protected: Callable[[ResourceKey], str] | None = None
    """Why an object may not be pruned (``""``: it may), e.g. its AppProject forbids it."""
    progress: SyncProgress | None = field(default=None, compare=False)
    """Told as objects are applied and pruned (the CLI's display); the controller has none."""
    live: Mapping[ResourceKey, Manifest | None] | None = field(default=None, compare=False,
                                                              repr=False)
    """Live objects the comparison before the sync read (``None`` at a key: absent)."""
    settled: frozenset[ResourceKey] = field(default=frozenset(), compare=False, repr=False)
    """In sync and live as our last apply of the same content left them: not re-applied."""
    inventory_with_record: bool = False
    """The caller records the result right after (the reconciler does): the inventory the
    step ends with is left in :attr:`SyncResult.inventory` for that write, not written on
    its own (module docstring, "The inventory")."""

    def option(self, name: SyncOption) -> bool:
        return self.app.sync_policy.has_option(name)


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
            kept = self._prune(request, record, {ResourceKey.of(o) for o in objs}, result)
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
            result.fail(f"wave {wave}: {key} is {_said(health)}", Reason.WAVE_DEGRADED)
            return False
        result.wait(request, wave, f"waiting for wave {wave} to be healthy: {key} is "
                                   f"{_said(health)}")
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
            settled = [k for k in map(ResourceKey.of, todo) if _is_settled(request, k)]
            for batch in _changed_first(request, todo, leaving=frozenset(settled)):
                for outcome in self._apply_group(request, batch, rules):
                    _settle(outcome, result)
                if result.phase == OperationPhase.FAILED:
                    return False
            for key in settled:
                result.settled.add(key)
                result.resources.append(_told(request, ResourceResult(
                    key, ResourceAction.UNCHANGED, SETTLED)))
        return True

    def _apply_group(self, request: SyncRequest, objs: list[Manifest],
                     rules: IgnoreRules) -> list[_Outcome]:
        """Apply ``objs`` (up to :attr:`parallelism` at a time); their outcomes in order.

        Once one fails, no more are started (those in flight finish): the outcomes stop
        at the objects that were attempted.
        """
        stop, told = threading.Event(), threading.Lock()

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
            with told:  # the watcher hears one object at a time, as each lands
                _told(request, outcome.resource)
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
        return not self._skipped(request, key) and not _is_settled(request, key)

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
            shared = _shared(request, obj, live)
            try:
                live = self._take_over(live, replace=replace, dry_run=request.dry_run)
                body = prepare(obj, live, rules)
                written = self._write(body, live, replace=replace, dry_run=request.dry_run)
            except Conflict:
                live = self._get(obj)  # someone wrote in between: re-read, re-decide
                continue
            if request.dry_run and live is not None and not replace:
                written = predicted_after_takeover(written, body=body, live=live)
            action = _action(live, written)
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
        if not (request.option(SyncOption.CREATE_NAMESPACE) and ns) or _seen_in(request, ns):
            return
        if self.kube.get("v1", "Namespace", name=ns) is not None:
            return
        with contextlib.suppress(AlreadyExists):  # another app (or anyone) created it first
            self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns}}, field_manager=FIELD_MANAGER)

    # -- prune -----------------------------------------------------------------------

    def _prune(self, request: SyncRequest, record: AppRecord, wanted: set[ResourceKey],
               result: SyncResult) -> list[InventoryEntry]:
        """Delete what left git; return the entries that must stay in the inventory."""
        stale = [e for e in record.inventory if e.key not in wanted]
        kept: list[InventoryEntry] = []
        for entry in prune_order([_stub(e) for e in stale]):
            outcome = _told(request, self._prune_one(request, InventoryEntry.of(entry)))
            if outcome.action in KEPT_IN_INVENTORY:
                kept.append(InventoryEntry.of(entry))
            if outcome.action != ResourceAction.GONE:
                result.resources.append(outcome)
            if outcome.action == ResourceAction.FAILED:
                result.fail(outcome.message, Reason.PRUNE_FAILED)
            if outcome.message == PRUNE_CONFIRM_UNSUPPORTED:
                result.note(PRUNE_CONFIRM_UNSUPPORTED)
        return kept

    def _prune_one(self, request: SyncRequest, entry: InventoryEntry) -> ResourceResult:
        """Read, decide, delete; again when it changed in between (module docstring)."""
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                live = self.kube.get(entry.api_version, entry.kind, name=entry.name,
                                     namespace=entry.namespace or None)
            except LeaseExpired:
                raise
            except KubeError as e:  # e.g. RBAC denies the GET: cannot check it is ours
                return ResourceResult(entry.key, ResourceAction.FAILED,
                                      f"prune failed: cannot read it: {e}")
            if live is None:
                return ResourceResult(entry.key, ResourceAction.GONE)
            outcome = _protected(request, entry) or _not_pruned(request, live, entry) \
                or self._delete(request, live, entry)
            if outcome is not None:
                return outcome
        return ResourceResult(entry.key, ResourceAction.FAILED, "prune failed: it kept "
                              f"changing; still there after {MAX_CONFLICT_RETRIES} attempts")

    def _delete(self, request: SyncRequest, live: Manifest, entry: InventoryEntry
                ) -> ResourceResult | None:
        """Delete ``live`` as read; ``None`` when it changed since (read it again)."""
        policy = _propagation(request)
        try:
            self.kube.delete(entry.api_version, entry.kind, name=entry.name,
                             namespace=entry.namespace or None,
                             propagation_policy=policy, uid=live["metadata"]["uid"],
                             resource_version=live["metadata"]["resourceVersion"],
                             dry_run=request.dry_run)
            if not request.dry_run:
                post_event(self.kube, live, reason="ResourcePruned",
                           message=f"pruned by app {request.app.name}: no longer in git")
            if not request.dry_run and still_there(self.kube, entry, live["metadata"]["uid"]):
                return ResourceResult(entry.key, ResourceAction.DELETING, STILL_DELETING)
        except LeaseExpired:
            raise
        except Conflict:
            return None
        except KubeError as e:
            return ResourceResult(entry.key, ResourceAction.FAILED, f"prune failed: {e}")
        return ResourceResult(entry.key, ResourceAction.PRUNED)

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


def prepare(obj: Manifest, live: Manifest | None, rules: IgnoreRules) -> Manifest:
    """The body to write for ``obj`` given ``live``.

    That is git's object with the live values at ignored paths and the fields other
    writers put in its Ray groups (:mod:`gitops_ray.diff.groupfields`), carrying live's
    ``resourceVersion`` as the write precondition, and never a ``status``: on a kind
    without the status subresource (Argo CD's Application is one) applying it would make
    us an owner of another writer's status, whose next apply then conflicts; and what an
    ignore rule on ``/status`` copies from live is exactly that writer's status. (Argo
    CD's ``RespectIgnoreDifferences`` drops ``status`` the same way.)
    """
    if live is None:
        return with_memory(_without_status(obj), obj)
    body = keep_live_values(obj, live, live_paths=rules.ignored_paths(live, live=live),
                            desired_paths=rules.ignored_paths(obj, live=live))
    body = with_memory(keep_others(body, live), obj)
    body.pop("status", None)
    body.setdefault("metadata", {})["resourceVersion"] = live["metadata"]["resourceVersion"]
    return body


def _with_version(obj: Manifest, version: str) -> Manifest:
    """A copy of ``obj`` whose ``metadata.resourceVersion`` is ``version``."""
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": version}}


def _without_status(obj: Manifest) -> Manifest:
    return {k: v for k, v in obj.items() if k != "status"} if "status" in obj else obj


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


def still_there(kube: Kube, entry: InventoryEntry, uid: str) -> bool:
    """Whether the object we asked to delete still exists (deletion is asynchronous)."""
    live = kube.get(entry.api_version, entry.kind, name=entry.name,
                    namespace=entry.namespace or None)
    return live is not None and live["metadata"].get("uid") == uid


def is_deleting(obj: Manifest) -> bool:
    """Whether the API server has accepted a deletion of ``obj`` (it waits on finalizers)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


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
    elif outcome.resource.message.startswith(SHARED_WARNING):
        result.note(outcome.resource.message)


SHARED_WARNING = "SharedResourceWarning: "


def _shared(request: SyncRequest, obj: Manifest, live: Manifest | None) -> str:
    """``""``, or the warning that ``live`` is another app's; refused with the option."""
    other = shared_with(obj, live)
    if not other:
        return ""
    message = shared_message(ResourceKey.of(obj), request.app.name, other)
    if request.option(FAIL_ON_SHARED):
        raise StepFailed(Reason.SHARED_RESOURCE, f"Shared resource found: {message}")
    return SHARED_WARNING + message


def _changed_first(request: SyncRequest, objs: list[Manifest], *,
                   leaving: frozenset[ResourceKey] = frozenset()) -> list[list[Manifest]]:
    """``objs`` as batches: those the comparison found OutOfSync, then the rest.

    Objects in ``leaving`` (the settled ones) are in neither: they are not applied. The
    second batch starts once the first has landed, so a commit's change does not wait
    behind (nor share the API server with) re-asserting what was in sync.
    """
    changed = request.out_of_sync or frozenset()
    first = [o for o in objs if ResourceKey.of(o) in changed]
    not_rest = changed | leaving
    rest = [o for o in objs if ResourceKey.of(o) not in not_rest]
    return [batch for batch in (first, rest) if batch]


def _seen_in(request: SyncRequest, namespace: str) -> bool:
    """Whether the comparison before the sync found a live object in ``namespace``.

    Then the namespace exists (a settled object is live as our last apply left it), and
    ``CreateNamespace`` need not ask. One deleted since, with all it held, fails this
    step's applies; the retry's comparison finds nothing live there and creates it.
    """
    live = request.live or {}
    return any(k.namespace == namespace for k in request.settled) or any(
        k.namespace == namespace and obj is not None for k, obj in live.items())


def _is_settled(request: SyncRequest, key: ResourceKey) -> bool:
    """Whether ``key`` is not re-applied: live is as our last apply left it (module doc)."""
    return key in request.settled and key not in (request.out_of_sync or frozenset())


def _told(request: SyncRequest, outcome: ResourceResult) -> ResourceResult:
    """``outcome``, after telling the request's progress watcher about it (if any)."""
    if request.progress is not None:
        request.progress.done(outcome.key, outcome.action)
    return outcome


def _said(health: Health) -> str:
    return f"{health.status.value} ({health.message})" if health.message \
        else health.status.value


def _action(live: Manifest | None, written: Manifest) -> ResourceAction:
    if live is None:
        return ResourceAction.CREATED
    if _comparable(live) == _comparable(written):
        return ResourceAction.UNCHANGED
    return ResourceAction.CONFIGURED


def _comparable(obj: Manifest) -> Manifest:
    out = copy.copy(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items()
                       if k not in _VOLATILE}
    out.pop("status", None)
    return out


def _protected(request: SyncRequest, entry: InventoryEntry) -> ResourceResult | None:
    """Skip the prune of an object the request protects (e.g. its AppProject forbids it)."""
    why = request.protected(entry.key) if request.protected is not None else ""
    return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, f"not pruned: {why}") \
        if why else None


def _not_pruned(request: SyncRequest, live: Manifest,
                entry: InventoryEntry) -> ResourceResult | None:
    """Why a live object that left git is not deleted now, or ``None``: delete it."""
    if not is_tracked_by(request.app.name, live):
        return ResourceResult(entry.key, ResourceAction.NOT_OURS,
                              "not pruned: its tracking id does not name this app")
    if is_deleting(live):
        return ResourceResult(entry.key, ResourceAction.DELETING, STILL_DELETING)
    if sync_options(live).has(SyncOption.PRUNE_FALSE) or request.option(SyncOption.PRUNE_FALSE):
        return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, "ignored (Prune=false)")
    if sync_options(live).has(SyncOption.PRUNE_CONFIRM) or \
            request.option(SyncOption.PRUNE_CONFIRM):
        return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, PRUNE_CONFIRM_UNSUPPORTED)
    if not request.prune:
        return ResourceResult(entry.key, ResourceAction.PENDING_PRUNE,
                              "not in git; prune is off")
    return None


def _propagation(request: SyncRequest) -> str:
    return request.app.sync_policy.options.prune_propagation().capitalize()


def _stub(entry: InventoryEntry) -> Manifest:
    return {"apiVersion": entry.api_version, "kind": entry.kind,
            "metadata": {"name": entry.name, "namespace": entry.namespace or None}}
