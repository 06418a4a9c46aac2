"""Which objects are resource hooks (Argo CD's annotations and Helm's): the rules alone.

Why a module of its own, outside the pipeline stages: the render stage must know a hook
when it sees one (a hook may use ``metadata.generateName``, which no resource may: it is
applied by name), and the sync stage runs them (:mod:`gitops_ray.sync.hooks`,
:mod:`gitops_ray.sync.phases`). The rules are gitops-engine's
(``argoproj/argo-cd:gitops-engine/pkg/sync/hook``, ``.../hook/helm``):

* ``argocd.argoproj.io/hook`` is a comma list of ``PreSync``, ``Sync``, ``PostSync``,
  ``SyncFail``, ``PostDelete``, ``PreDelete``, ``Skip``; unknown words are ignored. Only
  when it names none are Helm's hooks read: ``pre-install``/``pre-upgrade`` are
  ``PreSync``, ``post-install``/``post-upgrade`` ``PostSync``; other Helm hooks
  (``test``, ``pre-delete``, ...) are not hooks to Argo CD and are applied as resources.
* An object whose only hook type is ``Skip`` is neither applied nor compared.
* Delete policies (``argocd.argoproj.io/hook-delete-policy`` and Helm's
  ``helm.sh/hook-delete-policy``, both read): ``HookSucceeded``, ``HookFailed``,
  ``BeforeHookCreation`` (the default when none is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from gitops_ray.types import Manifest

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
