"""Why a sync operation failed, as one machine-readable word: the failure contract.

Why one vocabulary: a sync used to return a failed result for some errors and raise for
others (a record conflict, a namespace it could not create, the prune's GET, the
comparison after the sync). The raising ones were never recorded as an operation, so
auto-sync's retry limit and backoff never applied and every watch event re-ran the same
failing sync. Now a sync never raises: every failure is a recorded ``Failed`` operation
whose ``reason`` is one of :class:`Reason` (as Flux names its conditions:
``ApplyFailed``, ``PruneFailed``, ...). The reason is what alerts and scripts match on;
the message is for people and may change.

The reason names the *step* that failed, not the exception's class: a 403 on a GET is a
``PruneFailed`` while pruning and an ``ApplyFailed`` while applying. The steps of
:class:`~gitops_ray.sync.engine.Syncer` wrap themselves in :func:`failing_as`, and the
comparison after a sync is a ``CompareFailed`` whatever broke in it. Only errors raised
before the sync could start (fetching, rendering, comparing: ``gitops-ray sync``) are
mapped from their stage by :func:`reason_of`.

The one exception that is never turned into a reason is
:class:`~gitops_ray.kube.LeaseExpired`: a replica that lost its lease must stop at once
and record nothing (:mod:`gitops_ray.kube.fence`), so it passes through.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum

from gitops_ray.errors import ChildMemoryExceeded, GitOpsRayError, SystemSettingsError
from gitops_ray.kube import LeaseExpired


class Reason(StrEnum):
    """Why a sync operation failed (``reason`` of the recorded operation)."""

    ARTIFACT_FAILED = "ArtifactFailed"  # the git source could not be fetched or read
    CONFIG_INVALID = "ConfigInvalid"  # the Application or its ignore rules are invalid
    RENDER_FAILED = "RenderFailed"  # manifests could not be rendered
    VALIDATION_FAILED = "ValidationFailed"  # a Ray object is invalid: nothing applied
    CHANGE_REFUSED = "ChangeRefused"  # the API server or the KubeRay operator would refuse a
    # change git makes (diff/refusals.py): nothing of the app applied
    EMPTY_RENDER = "EmptyRender"  # prune on, nothing rendered, allowEmpty off: refused
    INVENTORY_FAILED = "InventoryFailed"  # the app's inventory could not be read/written
    NAMESPACE_FAILED = "NamespaceFailed"  # CreateNamespace=true could not create it
    APPLY_FAILED = "ApplyFailed"  # an object could not be written
    PRUNE_FAILED = "PruneFailed"  # an object that left git could not be read or deleted
    COMPARE_FAILED = "CompareFailed"  # git and the cluster could not be compared
    RECORD_FAILED = "RecordFailed"  # the operation could not be recorded
    WAVE_DEGRADED = "WaveDegraded"  # a sync wave before the last went Degraded
    WAVE_TIMEOUT = "WaveTimeout"  # ``gitops-ray sync`` gave up waiting for a wave
    SUPERSEDED = "Superseded"  # a new revision replaced a sync waiting for a wave
    PROJECT_FORBIDDEN = "ProjectForbidden"  # the AppProject forbids the app or an object
    TERMINATED = "Terminated"  # ``argocd app terminate-op`` ended a sync waiting for a wave
    HOOK_FAILED = "HookFailed"  # a resource hook ended Failed (or could not be created)
    SYNC_WINDOW_CLOSED = "SyncWindowClosed"  # an AppProject sync window refuses a manual sync
    SHARED_RESOURCE = "SharedResource"  # FailOnSharedResource=true: another app's object
    MEMORY_LIMIT_EXCEEDED = "MemoryLimitExceeded"  # a child (helm, kustomize) went over
    # childMemoryLimit (gitops_ray.childproc) and was stopped; its app alone failed
    SYSTEM_SETTINGS_INVALID = SystemSettingsError.reason  # an argocd-cm key that cannot be
    # read governs one of the app's objects: nothing compared, synced or pruned


_BY_STAGE = {
    "source": Reason.ARTIFACT_FAILED,
    "config": Reason.CONFIG_INVALID,
    "render": Reason.RENDER_FAILED,
    "diff": Reason.COMPARE_FAILED,
}


def reason_of(error: GitOpsRayError, default: Reason = Reason.COMPARE_FAILED) -> Reason:
    """The reason for an error raised outside a sync step, from the error's stage.

    ``default`` covers the stages that do not name a step by themselves (an API error
    while comparing is a ``CompareFailed``).
    """
    if isinstance(error, StepFailed):
        return error.reason
    if isinstance(error, ChildMemoryExceeded):
        return Reason.MEMORY_LIMIT_EXCEEDED
    if isinstance(error, SystemSettingsError):
        return Reason.SYSTEM_SETTINGS_INVALID
    return _BY_STAGE.get(error.stage, default)


class StepFailed(GitOpsRayError):
    """A sync step failed; carries the step's :class:`Reason` up to the operation."""

    stage = "sync"

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@contextlib.contextmanager
def failing_as(reason: Reason) -> Iterator[None]:
    """Raise any project error from inside as a :class:`StepFailed` naming ``reason``.

    :class:`LeaseExpired` passes through unchanged (see the module docstring), and so
    does a :class:`StepFailed` from an inner step: the innermost step names the failure.
    """
    try:
        yield
    except (LeaseExpired, StepFailed):
        raise
    except GitOpsRayError as e:
        raise StepFailed(reason, str(e)) from e
