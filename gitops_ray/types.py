"""Value objects shared by every stage.

Kept tiny and dependency-free so that pure stages (``diff``, ``health``, ``render``) can
share vocabulary without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable
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


IGNORE_RULE_FIELDS = ("group", "kind", "name", "namespace", "jsonPointers",
                      "jqPathExpressions", "managedFieldsManagers")
"""The fields of an ``ignoreDifferences`` entry, as users write them (Argo CD's names)."""
OVERRIDE_FIELDS = IGNORE_RULE_FIELDS[4:]
"""The fields of an ``argocd-cm`` override's ``ignoreDifferences`` (Argo CD's
``OverrideIgnoreDiff``): its scope is the settings key's, not the value's."""


class RuleError(ValueError):
    """An ``ignoreDifferences`` entry that is not one (its message names where)."""


@dataclass(frozen=True)
class IgnoreRule:
    """One ``ignoreDifferences`` entry, parsed once where the Application is parsed.

    The text users wrote, typed: hashable, so the compiled rules of an app are kept per
    rule set (:meth:`gitops_ray.reconcile.pipeline.Pipeline.rules`) and compiled once per
    sync, not per pass; :meth:`as_spec` gives back what was written (Argo CD's names).
    Whether a glob, pointer or jq expression is valid is the diff stage's to say
    (:func:`gitops_ray.diff.compile_rules`).
    """

    kind: str
    group: str = ""
    name: str = ""
    namespace: str = ""
    json_pointers: tuple[str, ...] = ()
    jq_path_expressions: tuple[str, ...] = ()
    managed_fields_managers: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: object, label: str) -> IgnoreRule:
        """The rule ``spec`` (decoded YAML/JSON); :class:`RuleError` naming ``label`` if not one."""
        if not isinstance(spec, dict):
            raise RuleError(f"{label}: expected a mapping, got {type(spec).__name__}")
        unknown = sorted(set(spec) - set(IGNORE_RULE_FIELDS))
        if unknown:
            raise RuleError(f"{label}: unknown field(s) {', '.join(map(str, unknown))}; "
                            f"known fields: {', '.join(IGNORE_RULE_FIELDS)}")
        kind = _rule_string(spec, "kind", label)
        if not kind:
            raise RuleError(f"{label}: 'kind' is required (use \"*\" for any kind)")
        return cls(kind, _rule_string(spec, "group", label), _rule_string(spec, "name", label),
                   _rule_string(spec, "namespace", label),
                   _rule_strings(spec, "jsonPointers", label),
                   _rule_strings(spec, "jqPathExpressions", label),
                   _rule_strings(spec, "managedFieldsManagers", label))

    @classmethod
    def of_override(cls, spec: object, *, group: str, kind: str,
                    label: str) -> IgnoreRule | None:
        """An ``argocd-cm`` override's value (decoded), scoped to ``group``/``kind``.

        None when it ignores nothing (no value, or no field set); :class:`RuleError`
        naming ``label`` if it is not one (the value is never quoted).
        """
        if spec is None:
            return None
        if not isinstance(spec, dict):
            raise RuleError(f"{label}: expected a mapping of {', '.join(OVERRIDE_FIELDS)}")
        unknown = sorted(set(spec) - set(OVERRIDE_FIELDS))
        if unknown:
            raise RuleError(f"{label}: unknown field(s) {', '.join(map(str, unknown))[:200]}")
        rule = cls(kind, group, json_pointers=_rule_strings(spec, "jsonPointers", label),
                   jq_path_expressions=_rule_strings(spec, "jqPathExpressions", label),
                   managed_fields_managers=_rule_strings(spec, "managedFieldsManagers",
                                                         label))
        ignores = rule.json_pointers or rule.jq_path_expressions
        return rule if ignores or rule.managed_fields_managers else None

    def as_spec(self) -> dict[str, Any]:
        """The entry as Argo CD spells it, only the fields that are set."""
        values = (self.group, self.kind, self.name, self.namespace, list(self.json_pointers),
                  list(self.jq_path_expressions), list(self.managed_fields_managers))
        return {k: v for k, v in zip(IGNORE_RULE_FIELDS, values, strict=True) if v}


def _rule_string(spec: dict[str, Any], name: str, label: str) -> str:
    value = spec.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RuleError(f"{label}.{name}: expected a string, got {type(value).__name__}")
    return value


def _rule_strings(spec: dict[str, Any], name: str, label: str) -> tuple[str, ...]:
    value = spec.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuleError(f"{label}.{name}: expected a list of strings")
    return tuple(value)


class SyncOption(StrEnum):
    """The sync options gitops-ray acts on, exactly as written.

    In Argo CD's ``syncOptions`` and the per-resource ``argocd.argoproj.io/sync-options``.
    """

    APPLY_OUT_OF_SYNC_ONLY = "ApplyOutOfSyncOnly=true"
    CREATE_NAMESPACE = "CreateNamespace=true"
    DELETE_FALSE = "Delete=false"
    FAIL_ON_SHARED_RESOURCE = "FailOnSharedResource=true"
    PRUNE_CONFIRM = "Prune=confirm"
    PRUNE_FALSE = "Prune=false"
    REPLACE = "Replace=true"


PRUNE_PROPAGATION_POLICY = "PrunePropagationPolicy"
"""The sync option naming a prune's propagation policy (``PrunePropagationPolicy=orphan``)."""


@dataclass(frozen=True)
class SyncOptions:
    """A list of sync options, parsed once where the list is read.

    Where an Application, an object's annotation or an operation
    (``.operation.sync.syncOptions``) is parsed.

    ``written`` keeps them as written (what the record and Argo CD's status show);
    :meth:`has` asks whether one is given, exactly as Argo CD's ``HasOption`` does, and
    :meth:`value` gives a name's value (the first one of that name).
    """

    written: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def parse(cls, options: Iterable[str]) -> SyncOptions:
        """The options of a list (``syncOptions``), each ``Name=value``."""
        written = tuple(o for o in options if o)
        return cls(written, tuple((name, value) for name, _, value in
                                  (o.partition("=") for o in written)))

    @classmethod
    def of_annotation(cls, raw: object) -> SyncOptions:
        """A resource's ``argocd.argoproj.io/sync-options``: comma-separated, each trimmed."""
        return cls.parse(part.strip() for part in str(raw or "").split(","))

    def has(self, option: SyncOption | str) -> bool:
        """Whether ``option`` (``Name=value``) is one of them."""
        return option in self.written

    def value(self, name: str) -> str | None:
        """The value of the first option called ``name`` (None: none is)."""
        return next((value for key, value in self.pairs if key == name), None)

    def prune_propagation(self) -> str:
        """``PrunePropagationPolicy``'s value, as written (``foreground`` if not given)."""
        policy = self.value(PRUNE_PROPAGATION_POLICY)
        return "foreground" if policy is None else policy

    def __bool__(self) -> bool:
        """Whether any option is given."""
        return bool(self.written)

    def overridden_by(self, extra: SyncOptions) -> SyncOptions:
        """These options with ``extra`` (an operation's) in place of those of their names."""
        if not extra:
            return self
        names = {name for name, _ in extra.pairs}
        return SyncOptions.parse((*(o for o, (name, _) in zip(self.written, self.pairs,
                                                               strict=True)
                                    if name not in names), *extra.written))
