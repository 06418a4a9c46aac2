"""Value objects shared by every stage.

Kept tiny and dependency-free so that pure stages (``diff``, ``health``, ``render``) can
share vocabulary without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Manifest = dict[str, Any]
"""A Kubernetes object as decoded JSON."""


MANAGED_ANNOTATION = "gitops-ray.io/managed"
"""With :data:`SKIP_RECONCILE_ANNOTATION`, on an Application or on an Argo CD cluster
Secret: gitops-ray reconciles the app (every app of the cluster) in Argo CD's place."""
SKIP_RECONCILE_ANNOTATION = "argocd.argoproj.io/skip-reconcile"

class SyncStatus(StrEnum):
    """Argo CD's sync status of an app or resource (``SyncStatusCode`` in Argo CD's API).

    A ``StrEnum`` compares equal to its string, so records and JSON keep the plain words.
    """

    SYNCED = "Synced"
    OUT_OF_SYNC = "OutOfSync"
    UNKNOWN = "Unknown"  # the last comparison failed, or there was none yet


class OperationPhase(StrEnum):
    """The phase of a sync operation (Argo CD's ``OperationPhase``).

    Running: a sync with waves waits for a wave to become healthy
    (:mod:`gitops_ray.sync.operation`); it is recorded as the app's running operation,
    never in the history. Argo CD also has Terminating and Error, which we do not use.
    """

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ResourceAction(StrEnum):
    """What a sync, prune or app deletion did to one object."""

    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    PRUNED = "pruned"  # deleted and gone (in a dry run: would be deleted)
    DELETING = "deleting"  # deletion accepted, but finalizers still hold the object
    DELETED = "deleted"  # app deletion (sync.teardown)
    FAILED = "failed"
    GONE = "gone"  # already deleted by somebody else: not reported
    NOT_OURS = "not-ours"  # its tracking id names another app: left alone
    PRUNE_SKIPPED = "prune-skipped"  # Prune=false (or Prune=confirm, which we lack)
    PENDING_PRUNE = "pending-prune"  # left git, but prune is off
    ORPHANED = "orphaned"  # kept on app deletion (Delete=false)


class ConditionType(StrEnum):
    """An Application condition's type, in Argo CD's words (``ApplicationConditionType``).

    Errors stop a sync (Argo CD's ``IsError``: the type ends in ``Error``); warnings are shown.
    """

    INVALID_SPEC = "InvalidSpecError"  # e.g. an AppProject forbids the source or destination
    COMPARISON = "ComparisonError"  # the render or the comparison failed
    SYNC = "SyncError"  # the last sync failed (or was refused)
    UNKNOWN = "UnknownError"
    SHARED_RESOURCE = "SharedResourceWarning"
    ORPHANED_RESOURCE = "OrphanedResourceWarning"
    REPEATED_RESOURCE = "RepeatedResourceWarning"
    AUTO_SYNC_PAUSED = "AutoSyncPaused"
    """gitops-ray's own: a rollback paused automated sync (Argo CD refuses such a
    rollback instead). Argo CD's UI shows a type ending neither in Error nor in Warning
    as information."""
    SYNC_WINDOW_CLOSED = "SyncWindowClosed"
    """gitops-ray's own: an AppProject sync window holds back an automated sync or a
    requested operation (Argo CD only logs "Sync prevented by sync window")."""

    @property
    def is_error(self) -> bool:
        return self.value.endswith("Error")


@dataclass(frozen=True, order=True)
class AppCondition:
    """One condition of an app (``status.conditions[]`` of an Argo CD Application)."""

    type: ConditionType
    message: str


def split_api_version(api_version: str) -> tuple[str, str]:
    """Return ``(group, version)``; the core group is ``""``."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True, order=True)
class ResourceKey:
    """Identity of an object across git and the cluster: group, kind, namespace, name.

    The version is left out on purpose: the same object served at two versions is one object.
    """

    group: str
    kind: str
    namespace: str
    name: str
    # Keys index every per-object map of a comparison (memo, marks, health, rows): the
    # generated __hash__ built and hashed a tuple each time; now done once per key
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.group, self.kind, self.namespace,
                                                self.name)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def of(cls, obj: Manifest) -> ResourceKey:
        """Key of a manifest (missing fields become empty strings)."""
        meta = obj.get("metadata") or {}
        group, _ = split_api_version(str(obj.get("apiVersion", "")))
        return cls(group, str(obj.get("kind", "")), str(meta.get("namespace") or ""),
                   str(meta.get("name", "")))

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.group}/{self.kind}:{ns}{self.name}" if self.group else \
            f"{self.kind}:{ns}{self.name}"


class SourceReason(StrEnum):
    """Why a source could not be fetched: the machine-readable word of a ComparisonError.

    Recorded as the status's ``errorReason`` next to the message, which starts with it, so
    alerts and scripts match on the word and people read the sentence.
    """

    UNREACHABLE = "RepositoryUnreachable"  # connection refused, DNS, a 5xx, not a repository
    TIMEOUT = "RepositoryTimeout"  # no answer within the source timeout
    AUTH_FAILED = "AuthenticationFailed"  # 401/403, or credentials asked for and none given
    REVISION_NOT_FOUND = "RevisionNotFound"  # no branch/tag/commit, or no chart version matches
    CHART_NOT_FOUND = "ChartNotFound"  # the repository has no chart of that name
    TOO_LARGE = "SourceTooLarge"  # an index, manifest or chart archive over its bound
    DIGEST_MISMATCH = "DigestMismatch"  # a chart archive is not what the index/manifest says
    INVALID_CHART = "InvalidChart"  # an index or archive that cannot be read as one
    HOST_NOT_ALLOWED = "HostNotAllowed"  # the settings' allowed source hosts exclude it
