"""Resource hooks in a sync: which rendered objects are hooks, and how each one ends.

Why: Argo CD runs an object annotated ``argocd.argoproj.io/hook`` (or Helm's
``helm.sh/hook``) at its phase of a sync instead of applying it with everything else: a
``PreSync`` Job migrates a schema before a RayService upgrade, a ``PostSync`` RayJob
smoke-tests it, a ``SyncFail`` Job tells someone. A hook is not one of the app's
resources: it is not compared, not in the inventory and never pruned; it is created
when its phase comes, it decides by its health whether the phase may go on, and it is
deleted by its ``hook-delete-policy``.

Which objects are hooks is :mod:`gitops_ray.hooks` (shared with the render stage); this
module is the sync's pure part, :mod:`gitops_ray.sync.hookrun` creates, watches and
deletes hooks, and :mod:`gitops_ray.sync.phases` runs the phases. As gitops-engine
(``pkg/sync/sync_context.go``):

* A hook with ``generateName`` gets the name ``<generateName><rev[:7]>-<phase>-<started>``
  (lower case; ``started``: the operation's start in Unix seconds), so every step of
  one operation finds the same object and the next operation makes a new one.
* A hook's phase is its health: Healthy is ``Succeeded``, Degraded or Unknown
  ``Failed``, Progressing or Suspended ``Running``; a kind without a health check has
  succeeded once it exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gitops_ray.health import Health, HealthStatus
from gitops_ray.hooks import (
    HOOK_FINALIZER,
    DeletePolicy,
    HookType,
    delete_policies,
    hook_types,
    is_hook,
    is_skipped,
)
from gitops_ray.types import Manifest, OperationPhase, ResourceKey

__all__ = ["HOOK_FINALIZER", "SYNC_PHASES", "DeletePolicy", "HookTask", "HookType",
           "delete_policies", "hook_name", "hook_types", "is_hook", "is_skipped",
           "phase_of", "split", "tasks"]

SYNC_PHASES = (HookType.PRE_SYNC, HookType.SYNC, HookType.POST_SYNC)
"""The phases of a sync, in order (``SyncFail`` runs only when one of them failed)."""


def split(objs: Iterable[Manifest]) -> tuple[list[Manifest], list[Manifest]]:
    """Rendered objects as (the app's resources, its hooks); ``Skip`` objects in neither."""
    resources: list[Manifest] = []
    hooks: list[Manifest] = []
    for obj in objs:
        if is_hook(obj):
            hooks.append(obj)
        elif not is_skipped(obj):
            resources.append(obj)
    return resources, hooks


def hook_name(obj: Manifest, *, revision: str, phase: HookType, started_at: float) -> str:
    """The name the hook runs under in this operation (``generateName`` made stable)."""
    meta = obj.get("metadata") or {}
    if meta.get("name"):
        return str(meta["name"])
    suffix = f"{revision[:7]}-{phase.value}-{int(started_at)}".lower()
    return f"{meta.get('generateName') or ''}{suffix}"


def phase_of(health: Health | None) -> tuple[OperationPhase, str]:
    """A hook's phase and message from its health (module docstring)."""
    if health is None:
        return OperationPhase.SUCCEEDED, ""
    if health.status is HealthStatus.HEALTHY:
        return OperationPhase.SUCCEEDED, health.message
    if health.status in (HealthStatus.PROGRESSING, HealthStatus.SUSPENDED):
        return OperationPhase.RUNNING, health.message
    if health.status is HealthStatus.MISSING:
        return OperationPhase.FAILED, "deleted before it completed"
    return OperationPhase.FAILED, health.message or f"hook is {health.status.value}"


@dataclass(frozen=True)
class HookTask:
    """One hook to run in one phase of one operation, under the name it runs as."""

    manifest: Manifest
    phase: HookType
    name: str

    @property
    def key(self) -> ResourceKey:
        return ResourceKey.of({**self.manifest, "metadata": {
            **(self.manifest.get("metadata") or {}), "name": self.name}})

    @property
    def policies(self) -> frozenset[DeletePolicy]:
        return delete_policies(self.manifest)

    def body(self) -> Manifest:
        """The object to create: named, and carrying :data:`HOOK_FINALIZER`."""
        meta = {k: v for k, v in (self.manifest.get("metadata") or {}).items()
                if k != "generateName"}
        finalizers = [f for f in meta.get("finalizers") or () if f != HOOK_FINALIZER]
        meta.update(name=self.name, finalizers=[*finalizers, HOOK_FINALIZER])
        return {k: v for k, v in {**self.manifest, "metadata": meta}.items() if k != "status"}


def tasks(hooks: Iterable[Manifest], phase: HookType, *, revision: str,
          started_at: float) -> list[HookTask]:
    """The hooks of ``phase``, each under its name in this operation."""
    return [HookTask(h, phase, hook_name(h, revision=revision, phase=phase,
                                         started_at=started_at))
            for h in hooks if phase in hook_types(h)]
