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

**Sync waves** (:mod:`gitops_ray.sync.operation`): objects are applied wave by wave
(``argocd.argoproj.io/sync-wave``, then kind order). Between waves the step checks the
health of the wave just applied; if it is not healthy yet the step ends ``Running`` with
that wave, and the next step (``SyncRequest.resume``) starts by re-checking it rather than
re-applying it. Pruning runs only once every wave is applied, as Argo CD's ``PruneLast``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.errors import SyncError
from gitops_ray.health import Health, HealthStatus, assess
from gitops_ray.kube import Conflict, Kube, KubeError, LeaseExpired
from gitops_ray.render.apps import Application
from gitops_ray.sync.events import post_event
from gitops_ray.sync.merge import Path, keep_live_values
from gitops_ray.sync.operation import OperationState, WaveReason, only_field
from gitops_ray.sync.order import apply_order, prune_order, sync_options, waves
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore
from gitops_ray.sync.tracking import is_tracked_by, with_tracking
from gitops_ray.sync.validate import validate_ray_objects
from gitops_ray.types import Manifest, OperationPhase, ResourceAction, ResourceKey

MAX_CONFLICT_RETRIES = 5
PRUNE_CONFIRM_UNSUPPORTED = ("not pruned: Prune=confirm is not supported (gitops-ray has no "
                             "confirmation step), so it is treated as Prune=false; delete "
                             "the object by hand once you are sure")
log = structlog.get_logger(__name__)
_VOLATILE = ("managedFields", "resourceVersion", "generation")


class IgnoreRules(Protocol):
    """What sync needs from the diff stage's compiled ignore rules."""

    def ignored_paths(self, obj: Manifest, *, live: Manifest | None = None) -> list[Path]: ...


@dataclass(frozen=True)
class ResourceResult:
    """What happened to one object: created, configured, unchanged, pruned, ... ."""

    key: ResourceKey
    action: ResourceAction
    message: str = ""


@dataclass
class SyncResult:
    """The outcome of one sync operation (Argo's phases: Succeeded, Failed)."""

    app: str
    revision: str
    phase: OperationPhase = OperationPhase.SUCCEEDED
    message: str = ""
    resources: list[ResourceResult] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float = 0.0
    reason: str = ""  # a WaveReason when waves decided the outcome
    state: dict[str, Any] = field(default_factory=dict)  # Running: what the next step needs
    earlier: list[dict[str, Any]] = field(default_factory=list)  # earlier steps' resources

    @property
    def ok(self) -> bool:
        return self.phase == OperationPhase.SUCCEEDED

    @property
    def running(self) -> bool:
        """Waiting for a wave to become healthy: continue with :meth:`continuation`."""
        return self.phase == OperationPhase.RUNNING

    def fail(self, message: str) -> SyncResult:
        self.phase, self.message, self.finished_at = OperationPhase.FAILED, message, time.time()
        return self

    def wait(self, request: SyncRequest, wave: int, message: str) -> SyncResult:
        """End this step ``Running``: ``wave`` is applied and not healthy yet."""
        self.phase, self.message = OperationPhase.RUNNING, message
        self.reason = WaveReason.PROGRESSING
        self.state = {"wave": wave, "prune": request.prune, "only": only_field(request.only)}
        return self

    def continuation(self, **extra: Any) -> OperationState:
        """The state a next step resumes from (only meaningful while :attr:`running`)."""
        return OperationState.parse({**self.as_operation(), **extra})

    def note(self, message: str) -> None:
        """Add ``message`` to the operation's message (once)."""
        if message not in self.message:
            self.message = f"{self.message}; {message}" if self.message else message

    def as_operation(self) -> dict[str, Any]:
        op: dict[str, Any] = {
            "revision": self.revision, "phase": self.phase.value, "message": self.message,
            "startedAt": self.started_at, "finishedAt": self.finished_at,
            "resources": self.earlier + [{"key": str(r.key), "action": r.action.value,
                                          "message": r.message} for r in self.resources]}
        if self.reason:
            op["reason"] = str(self.reason)
        return {**op, **self.state} if self.running else op


@dataclass(frozen=True)
class SyncRequest:
    """One sync: the app, git's rendered objects and how to treat them."""

    app: Application
    desired: list[Manifest]
    revision: str
    prune: bool = False
    dry_run: bool = False
    only: frozenset[ResourceKey] | None = None  # selective sync (self-heal)
    out_of_sync: frozenset[ResourceKey] | None = None  # for ApplyOutOfSyncOnly=true
    resume: OperationState | None = None  # continue a sync that waited for a wave

    def option(self, name: str) -> bool:
        return self.app.sync_policy.has_option(name)


LiveLookup = Callable[[Manifest], "Manifest | None"]


class Syncer:
    """Applies and prunes apps through one :class:`Kube` client."""

    def __init__(self, kube: Kube, store: RecordStore, *,
                 live_lookup: LiveLookup | None = None) -> None:
        self.kube = kube
        self.store = store
        self._live_lookup = live_lookup  # e.g. the controller's watch cache

    def sync(self, request: SyncRequest, rules: IgnoreRules) -> SyncResult:
        app = request.app
        result = SyncResult(app.name, request.revision)
        objs = [with_tracking(app.name, o) for o in request.desired]
        problems = validate_ray_objects(objs)
        if problems:
            return result.fail("invalid Ray objects, nothing applied: " + "; ".join(problems))
        if request.prune and not objs and not app.sync_policy.allow_empty:
            return result.fail(f"refusing to sync app {app.name!r}: the render is empty and "
                               "allowEmpty is not set, so pruning would delete everything")
        record = self.store.load(app.name)
        if request.resume is not None:
            result.started_at = request.resume.started_at
            result.earlier = [dict(r) for r in request.resume.resources]
        elif not request.dry_run:
            self._ensure_namespace(request)
            self._remember(app.name, [InventoryEntry.of(o) for o in objs])
        if not self._apply_waves(request, objs, rules, result):
            return result
        kept = self._prune(request, record, {ResourceKey.of(o) for o in objs}, result)
        if not request.dry_run:
            self._set_inventory(app.name, [InventoryEntry.of(o) for o in objs] + kept)
        result.finished_at = time.time()
        return result

    # -- waves -----------------------------------------------------------------------

    def _apply_waves(self, request: SyncRequest, objs: list[Manifest], rules: IgnoreRules,
                     result: SyncResult) -> bool:
        """Apply wave after wave; ``False`` when one failed or is not healthy yet.

        A resumed step skips the waves before the one it waited for and does not re-apply
        that one: it only re-checks its health. The last wave is not waited for (as in
        Argo CD: a sync that applied everything has succeeded, whatever health follows).
        """
        plan = waves(objs)
        resumed = request.resume.wave if request.resume is not None else None
        for number, members in plan:
            if resumed is not None and number < resumed:
                continue
            if number != resumed and not self._apply_all(request, members, rules, result):
                return False
            if number != plan[-1][0] and not self._wave_healthy(request, number, members,
                                                                result):
                return False
        return True

    def _wave_healthy(self, request: SyncRequest, wave: int, members: list[Manifest],
                      result: SyncResult) -> bool:
        """Whether every object of ``wave`` is healthy (no health check counts as healthy).

        Not healthy yet: the result becomes ``Running``. Degraded: the sync fails, as in
        gitops-engine, since waiting would not help.
        """
        if request.dry_run:
            return True
        verdicts = [(ResourceKey.of(o), assess(self._lookup(o))) for o in members]
        pending = [(k, h) for k, h in verdicts if h is not None and h.status
                   is not HealthStatus.HEALTHY]
        if not pending:
            return True
        key, health = max(pending, key=lambda pair: pair[1].status.rank)
        if health.status is HealthStatus.DEGRADED:
            result.fail(f"wave {wave}: {key} is {_said(health)}")
            result.reason = WaveReason.DEGRADED
            return False
        result.wait(request, wave, f"waiting for wave {wave} to be healthy: {key} is "
                                   f"{_said(health)}")
        log.info("sync_wave_waiting", app=request.app.name, wave=wave, resource=str(key),
                 health=health.status.value)
        return False

    # -- apply -----------------------------------------------------------------------

    def _apply_all(self, request: SyncRequest, objs: list[Manifest], rules: IgnoreRules,
                   result: SyncResult) -> bool:
        for obj in apply_order(objs):
            key = ResourceKey.of(obj)
            if self._skipped(request, key):
                continue
            try:
                result.resources.append(self._apply(request, obj, rules))
            except LeaseExpired:
                raise  # not leading any more: stop now, record nothing (kube.fence)
            except KubeError as e:
                result.resources.append(ResourceResult(key, ResourceAction.FAILED, str(e)))
                if not request.dry_run:
                    post_event(self.kube, obj, reason="SyncFailed", message=str(e), warning=True)
                result.fail(f"{key}: {e}")
                return False
        return True

    def _skipped(self, request: SyncRequest, key: ResourceKey) -> bool:
        if request.only is not None and key not in request.only:
            return True
        return (request.option("ApplyOutOfSyncOnly=true") and request.out_of_sync is not None
                and key not in request.out_of_sync)

    def _apply(self, request: SyncRequest, obj: Manifest, rules: IgnoreRules) -> ResourceResult:
        key = ResourceKey.of(obj)
        live = self._lookup(obj)
        replace = request.option("Replace=true") or "Replace=true" in sync_options(obj)
        for _ in range(MAX_CONFLICT_RETRIES):
            body = prepare(obj, live, rules)
            try:
                written = self._write(body, live, replace=replace, dry_run=request.dry_run)
            except Conflict:
                live = self._get(obj)  # someone wrote in between: re-read, re-decide
                continue
            action = _action(live, written)
            if action != ResourceAction.UNCHANGED and not request.dry_run:
                post_event(self.kube, written, reason=f"Resource{action.capitalize()}",
                           message=f"{action} by app {request.app.name} at revision "
                                   f"{request.revision[:12]}")
            log.info("resource_synced", app=request.app.name, resource=str(key), action=action,
                     dry_run=request.dry_run)
            return ResourceResult(key, action)
        raise SyncError(f"{key}: still conflicting after {MAX_CONFLICT_RETRIES} attempts")

    def _write(self, body: Manifest, live: Manifest | None, *, replace: bool,
               dry_run: bool) -> Manifest:
        if replace and live is None:
            return self.kube.create(body, field_manager=FIELD_MANAGER, dry_run=dry_run)
        if replace:
            return self.kube.replace(body, field_manager=FIELD_MANAGER, dry_run=dry_run)
        return self.kube.apply(body, field_manager=FIELD_MANAGER, force=True, dry_run=dry_run)

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
        if not (request.option("CreateNamespace=true") and ns):
            return
        if self.kube.get("v1", "Namespace", name=ns) is None:
            self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns}}, field_manager=FIELD_MANAGER)

    # -- prune -----------------------------------------------------------------------

    def _prune(self, request: SyncRequest, record: AppRecord, wanted: set[ResourceKey],
               result: SyncResult) -> list[InventoryEntry]:
        """Delete what left git; return the entries that must stay in the inventory."""
        stale = [e for e in record.inventory if e.key not in wanted]
        kept: list[InventoryEntry] = []
        for entry in prune_order([_stub(e) for e in stale]):
            outcome = self._prune_one(request, InventoryEntry.of(entry))
            if outcome.action in (ResourceAction.PRUNE_SKIPPED, ResourceAction.PENDING_PRUNE,
                                  ResourceAction.FAILED):
                kept.append(InventoryEntry.of(entry))
            if outcome.action != ResourceAction.GONE:
                result.resources.append(outcome)
            if outcome.action == ResourceAction.FAILED:
                result.fail(outcome.message)
            if outcome.message == PRUNE_CONFIRM_UNSUPPORTED:
                result.note(PRUNE_CONFIRM_UNSUPPORTED)
        return kept

    def _prune_one(self, request: SyncRequest, entry: InventoryEntry) -> ResourceResult:
        live = self.kube.get(entry.api_version, entry.kind, name=entry.name,
                             namespace=entry.namespace or None)
        if live is None:
            return ResourceResult(entry.key, ResourceAction.GONE)
        if not is_tracked_by(request.app.name, live):
            return ResourceResult(entry.key, ResourceAction.NOT_OURS,
                                  "not pruned: its tracking id does not name this app")
        if "Prune=false" in sync_options(live) or request.option("Prune=false"):
            return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED, "ignored (Prune=false)")
        if "Prune=confirm" in sync_options(live) or request.option("Prune=confirm"):
            return ResourceResult(entry.key, ResourceAction.PRUNE_SKIPPED,
                                  PRUNE_CONFIRM_UNSUPPORTED)
        if not request.prune:
            return ResourceResult(entry.key, ResourceAction.PENDING_PRUNE,
                                  "not in git; prune is off")
        return self._delete(request, live, entry)

    def _delete(self, request: SyncRequest, live: Manifest, entry: InventoryEntry
                ) -> ResourceResult:
        policy = _propagation(request)
        try:
            if not request.dry_run:
                post_event(self.kube, live, reason="ResourcePruned",
                           message=f"pruned by app {request.app.name}: no longer in git")
            self.kube.delete(entry.api_version, entry.kind, name=entry.name,
                             namespace=entry.namespace or None,
                             propagation_policy=policy, uid=live["metadata"]["uid"],
                             dry_run=request.dry_run)
        except LeaseExpired:
            raise
        except KubeError as e:
            return ResourceResult(entry.key, ResourceAction.FAILED, f"prune failed: {e}")
        return ResourceResult(entry.key, ResourceAction.PRUNED)

    # -- records ---------------------------------------------------------------------

    def _remember(self, app: str, entries: Iterable[InventoryEntry]) -> None:
        """Add entries before applying, so a crash mid-sync cannot leak untracked objects."""
        new = set(entries)
        self.store.update(app, lambda r: setattr(r, "inventory", sorted(set(r.inventory) | new)))

    def _set_inventory(self, app: str, entries: list[InventoryEntry]) -> None:
        self.store.update(app, lambda r: setattr(r, "inventory", sorted(set(entries))))


def prepare(obj: Manifest, live: Manifest | None, rules: IgnoreRules) -> Manifest:
    """The body to write for ``obj`` given ``live``.

    That is git's object with the live values at ignored paths, carrying live's
    ``resourceVersion`` as the write precondition.
    """
    if live is None:
        return obj
    body = keep_live_values(obj, live, live_paths=rules.ignored_paths(live, live=live),
                            desired_paths=rules.ignored_paths(obj, live=live))
    body.setdefault("metadata", {})["resourceVersion"] = live["metadata"]["resourceVersion"]
    return body


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


def _propagation(request: SyncRequest) -> str:
    for option in request.app.sync_policy.sync_options:
        if option.startswith("PrunePropagationPolicy="):
            return option.split("=", 1)[1].capitalize()
    return "Foreground"


def _stub(entry: InventoryEntry) -> Manifest:
    return {"apiVersion": entry.api_version, "kind": entry.kind,
            "metadata": {"name": entry.name, "namespace": entry.namespace or None}}
