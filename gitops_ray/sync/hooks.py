"""Resource hooks: which rendered objects are hooks, of which phase, and how they end.

Why: Argo CD runs an object annotated ``argocd.argoproj.io/hook`` (or Helm's
``helm.sh/hook``) at its phase of a sync instead of applying it with everything else: a
``PreSync`` Job migrates a schema before a RayService upgrade, a ``PostSync`` RayJob
smoke-tests it, a ``SyncFail`` Job tells someone. A hook is not one of the app's
resources: it is not compared, not in the inventory and never pruned; it is created
when its phase comes, it decides by its health whether the phase may go on, and it is
deleted by its ``hook-delete-policy``.

This module is pure (the rules); :mod:`gitops_ray.sync.hookrun` creates, watches and
deletes hooks, and :mod:`gitops_ray.sync.engine` runs the phases. The rules follow
gitops-engine (``argoproj/argo-cd:gitops-engine/pkg/sync/hook``, ``.../hook/helm``,
``pkg/sync/syncwaves``, ``pkg/sync/sync_context.go``):

* ``argocd.argoproj.io/hook`` is a comma list of ``PreSync``, ``Sync``, ``PostSync``,
  ``SyncFail``, ``PostDelete``, ``PreDelete``, ``Skip``; unknown words are ignored. Only
  when it names none are Helm's hooks read: ``pre-install``/``pre-upgrade`` are
  ``PreSync``, ``post-install``/``post-upgrade`` ``PostSync``; other Helm hooks
  (``test``, ``pre-delete``, ...) are not hooks to Argo CD and are applied as resources.
* An object whose only hook type is ``Skip`` is neither applied nor compared.
* Delete policies (``argocd.argoproj.io/hook-delete-policy`` and Helm's
  ``helm.sh/hook-delete-policy``, both read): ``HookSucceeded``, ``HookFailed``,
  ``BeforeHookCreation`` (the default when none is given).
* A hook with ``generateName`` gets the name ``<generateName><rev[:7]>-<phase>-<started>``
  (lower case; ``started``: the operation's start in Unix seconds), so every step of
  one operation finds the same object and the next operation makes a new one.
* A hook's phase is its health: Healthy is ``Succeeded``, Degraded or Unknown
  ``Failed``, Progressing or Suspended ``Running``; a kind without a health check has
  succeeded once it exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gitops_ray.health import Health, HealthStatus
from gitops_ray.types import Manifest, OperationPhase, ResourceKey

HOOK_ANNOTATION = "argocd.argoproj.io/hook"
DELETE_POLICY_ANNOTATION = "argocd.argoproj.io/hook-delete-policy"
HELM_HOOK_ANNOTATION = "helm.sh/hook"
HELM_DELETE_POLICY_ANNOTATION = "helm.sh/hook-delete-policy"
HOOK_FINALIZER = "argocd.argoproj.io/hook-finalizer"
"""Held on a hook while it runs, so nothing (a Job's TTL) deletes it before its end is read."""


class HookType(StrEnum):
    """A value of ``argocd.argoproj.io/hook`` (Argo CD's ``HookType``)."""

    PRE_SYNC = "PreSync"
    SYNC = "Sync"
    POST_SYNC = "PostSync"
    SYNC_FAIL = "SyncFail"
    POST_DELETE = "PostDelete"
    PRE_DELETE = "PreDelete"
    SKIP = "Skip"


class DeletePolicy(StrEnum):
    """A value of ``argocd.argoproj.io/hook-delete-policy``."""

    HOOK_SUCCEEDED = "HookSucceeded"
    HOOK_FAILED = "HookFailed"
    BEFORE_HOOK_CREATION = "BeforeHookCreation"


SYNC_PHASES = (HookType.PRE_SYNC, HookType.SYNC, HookType.POST_SYNC)
"""The phases of a sync, in order (``SyncFail`` runs only when one of them failed)."""

_HELM_TYPES = {"pre-install": HookType.PRE_SYNC, "pre-upgrade": HookType.PRE_SYNC,
               "post-install": HookType.POST_SYNC, "post-upgrade": HookType.POST_SYNC}
_HELM_POLICIES = {"before-hook-creation": DeletePolicy.BEFORE_HOOK_CREATION,
                  "hook-succeeded": DeletePolicy.HOOK_SUCCEEDED,
                  "hook-failed": DeletePolicy.HOOK_FAILED}


def _annotations(obj: Manifest) -> Mapping[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _csv(obj: Manifest, key: str) -> list[str]:
    return [part.strip() for part in str(_annotations(obj).get(key) or "").split(",")
            if part.strip()]


def hook_types(obj: Manifest) -> tuple[HookType, ...]:
    """The object's hook types, Argo CD's annotation first, else Helm's (module docstring)."""
    known = HookType._value2member_map_
    types = [HookType(t) for t in _csv(obj, HOOK_ANNOTATION) if t in known]
    if not types:
        types = [_HELM_TYPES[t] for t in _csv(obj, HELM_HOOK_ANNOTATION) if t in _HELM_TYPES]
    return tuple(dict.fromkeys(types))


def is_skipped(obj: Manifest) -> bool:
    """``Skip`` is its only hook type: neither applied nor compared."""
    return hook_types(obj) == (HookType.SKIP,)


def is_hook(obj: Manifest) -> bool:
    """Whether ``obj`` is a hook (gitops-engine's ``IsHook``): not a resource of the app."""
    if HOOK_ANNOTATION in _annotations(obj):
        return not is_skipped(obj)
    return bool(hook_types(obj))


def delete_policies(obj: Manifest) -> frozenset[DeletePolicy]:
    """The hook's delete policies (``BeforeHookCreation`` when it names none)."""
    known = DeletePolicy._value2member_map_
    policies = {DeletePolicy(p) for p in _csv(obj, DELETE_POLICY_ANNOTATION) if p in known}
    policies |= {_HELM_POLICIES[p] for p in _csv(obj, HELM_DELETE_POLICY_ANNOTATION)
                 if p in _HELM_POLICIES}
    return frozenset(policies or {DeletePolicy.BEFORE_HOOK_CREATION})


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
