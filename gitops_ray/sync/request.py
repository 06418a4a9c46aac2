"""What a sync is asked and what it answers: SyncRequest, SyncResult, ResourceResult, Landed.

Why apart from :mod:`gitops_ray.sync.engine`: the views of an operation (the record's
history, the CLI's results, Argo CD's ``operationState``, hook phases) read these values
without needing the engine that produces them, and the engine's own module is then only
how a sync runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gitops_ray.errors import GitOpsRayError
from gitops_ray.render.apps import Application
from gitops_ray.sync.hookrun import HookRun
from gitops_ray.sync.hooks import HookType
from gitops_ray.sync.merge import Path
from gitops_ray.sync.operation import OperationState, only_field
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.records import InventoryEntry
from gitops_ray.types import Manifest, OperationPhase, ResourceAction, ResourceKey, SyncOption


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


def told(request: SyncRequest, outcome: ResourceResult) -> ResourceResult:
    """``outcome``, after telling the request's progress watcher about it (if any)."""
    if request.progress is not None:
        request.progress.done(outcome.key, outcome.action)
    return outcome
