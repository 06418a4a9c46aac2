"""Running one hook: create it (after ``BeforeHookCreation``), read its end, delete it.

Why a module of its own: a hook is not applied like a resource. It is *created* when its
phase comes (a live one of the same name is deleted first under ``BeforeHookCreation``,
the default), carries Argo CD's hook finalizer while it runs so nothing deletes it before
its end is read, decides by its health whether the sync goes on, and is deleted by its
delete policy once the operation has ended. The rules are in :mod:`gitops_ray.sync.hooks`;
this is the part that talks to the API server (through :class:`~gitops_ray.kube.Kube`).

Every step of one operation finds the same object: a hook's name is stable within an
operation (``generateName`` included), and the ``uid`` it was created with is recorded
with its result, so a hook that someone deleted and re-created is not mistaken for ours.

Nothing here raises but :class:`~gitops_ray.kube.LeaseExpired` (and the caller's
:func:`~gitops_ray.sync.reasons.failing_as`): an API error is the hook's ``Failed`` phase
with the error as its message (the failure contract, :mod:`gitops_ray.sync.reasons`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.health import assess
from gitops_ray.kube import AlreadyExists, Kube, KubeError, LeaseExpired
from gitops_ray.sync.hooks import HOOK_FINALIZER, DeletePolicy, HookTask, HookType, phase_of
from gitops_ray.types import Manifest, OperationPhase

log = structlog.get_logger(__name__)
HOOK_PROPAGATION = "Background"
"""How a hook is deleted: at once, its Pods left to the garbage collector (a foreground
deletion would keep a replaced hook's name taken until they are gone)."""
PREVIOUS_PENDING = "waiting for the previous hook of this name to be deleted"


@dataclass(frozen=True)
class HookRun:
    """Where one hook of one operation stands (recorded with its result between steps)."""

    task: HookTask
    phase: OperationPhase | None  # None: listed by a dry run, not run
    message: str = ""
    uid: str = ""  # "" while not created (a previous one of its name is being deleted)
    api_version: str = ""
    created: bool = False  # created by this step (not found already running)

    @property
    def done(self) -> bool:
        return self.phase is not OperationPhase.RUNNING

    @property
    def policies(self) -> frozenset[DeletePolicy]:
        return self.task.policies

    def entry(self) -> dict[str, Any]:
        """What is recorded of the run with its result (and read back by the next step)."""
        key = self.task.key
        return {"key": str(key), "group": key.group, "kind": key.kind,
                "namespace": key.namespace, "name": key.name,
                "hookType": self.task.phase.value,
                "hookPhase": self.phase.value if self.phase else "",
                "syncPhase": self.task.phase.value, "uid": self.uid,
                "version": self.api_version.rpartition("/")[2],
                "deletePolicies": sorted(p.value for p in self.policies)}


@dataclass
class HookRunner:
    """Creates, follows and deletes hooks through one client."""

    kube: Kube
    app: str

    def advance(self, task: HookTask, uid: str) -> HookRun:
        """Start ``task`` (``uid`` ""), or read how the one created with ``uid`` stands."""
        try:
            return self._check(task, uid) if uid else self._start(task)
        except LeaseExpired:
            raise
        except KubeError as e:
            return HookRun(task, OperationPhase.FAILED, f"{task.key}: {e}", uid)

    def delete_entry(self, entry: Mapping[str, Any]) -> str:
        """Delete a finished hook as recorded (its delete policy says so); the error, or ""."""
        group, version = str(entry.get("group") or ""), str(entry.get("version") or "")
        api_version = f"{group}/{version}" if group else version
        key = f"{entry.get('kind')}/{entry.get('name')}"
        try:
            self._release_uid(api_version, entry, str(entry["uid"]))
            self.kube.delete(api_version, str(entry["kind"]), name=str(entry["name"]),
                             namespace=str(entry.get("namespace") or "") or None,
                             propagation_policy=HOOK_PROPAGATION, uid=str(entry["uid"]))
        except LeaseExpired:
            raise
        except KubeError as e:
            return f"deleting hook {key} failed: {e}"
        log.info("hook_deleted", app=self.app, hook=key)
        return ""

    def _release_uid(self, api_version: str, entry: Mapping[str, Any], uid: str) -> None:
        task = HookTask({"apiVersion": api_version, "kind": str(entry["kind"]),
                         "metadata": {"namespace": entry.get("namespace") or None}},
                        HookType(str(entry.get("hookType") or "Sync")), str(entry["name"]))
        self._release(task, uid)

    def _start(self, task: HookTask) -> HookRun:
        live = self._get(task)
        if live is not None and DeletePolicy.BEFORE_HOOK_CREATION in task.policies:
            self._replace_previous(task, live)
            live = self._get(task)
            if live is not None:
                return HookRun(task, OperationPhase.RUNNING, PREVIOUS_PENDING)
        if live is not None:  # kept from an earlier run: applied as Argo CD does
            written = self.kube.apply(task.body(), field_manager=FIELD_MANAGER, force=True)
        else:
            try:
                written = self.kube.create(task.body(), field_manager=FIELD_MANAGER)
            except AlreadyExists:  # created meanwhile (a previous leader's step)
                return HookRun(task, OperationPhase.RUNNING, PREVIOUS_PENDING)
        log.info("hook_created", app=self.app, hook=str(task.key), phase=task.phase.value)
        return self._read(task, written, created=True)

    def _replace_previous(self, task: HookTask, live: Manifest) -> None:
        """``BeforeHookCreation``: the previous object of this name goes first."""
        uid = str(live["metadata"].get("uid") or "")
        self._release(task, uid, live=live)
        if not live["metadata"].get("deletionTimestamp"):
            self.kube.delete(task.manifest["apiVersion"], task.key.kind, name=task.name,
                             namespace=task.key.namespace or None,
                             propagation_policy=HOOK_PROPAGATION, uid=uid)

    def _check(self, task: HookTask, uid: str) -> HookRun:
        live = self._get(task)
        if live is None or live["metadata"].get("uid") != uid:
            return HookRun(task, OperationPhase.FAILED, "deleted before it completed", uid)
        return self._read(task, live, created=False)

    def _read(self, task: HookTask, live: Manifest, *, created: bool) -> HookRun:
        phase, message = phase_of(assess(live))
        uid = str(live["metadata"].get("uid") or "")
        if phase is not OperationPhase.RUNNING:
            self._release(task, uid, live=live)
        return HookRun(task, phase, message, uid, str(live.get("apiVersion") or ""), created)

    def _release(self, task: HookTask, uid: str, *, live: Manifest | None = None) -> None:
        """Remove :data:`HOOK_FINALIZER` from the hook (if it still has it)."""
        live = live if live is not None else self._get(task)
        if live is None or live["metadata"].get("uid") != uid:
            return
        finalizers = list(live["metadata"].get("finalizers") or ())
        if HOOK_FINALIZER not in finalizers:
            return
        index = finalizers.index(HOOK_FINALIZER)
        try:
            self.kube.patch(task.manifest["apiVersion"], task.key.kind, name=task.name,
                            namespace=task.key.namespace or None,
                            patch=[{"op": "test", "path": "/metadata/uid", "value": uid},
                                   {"op": "test", "path": f"/metadata/finalizers/{index}",
                                    "value": HOOK_FINALIZER},
                                   {"op": "remove", "path": f"/metadata/finalizers/{index}"}])
        except LeaseExpired:
            raise
        except KubeError as e:  # changed meanwhile: the next look (or deletion) retries
            log.info("hook_finalizer_kept", app=self.app, hook=str(task.key), error=str(e))

    def _get(self, task: HookTask) -> Manifest | None:
        return self.kube.get(str(task.manifest["apiVersion"]), task.key.kind, name=task.name,
                             namespace=task.key.namespace or None)
