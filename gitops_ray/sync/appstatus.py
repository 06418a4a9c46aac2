"""What an app's record says, as types: its status, operations, history entries, pause.

Why: the record's ``status`` is JSON in a ConfigMap, written by one module
(:mod:`gitops_ray.sync.statuswrites`) and read by every view (``status``, ``get``,
``history``, the web page, the Argo CD projection). Read as a bare dict, each view guessed
the keys and their types again; here they are named once, with the JSON key beside each
field, and :func:`decode_status` / :func:`encode_status` are the one codec between the
two.

**Any version's record reads.** A key this version does not know, or a known key holding
a value of another type (a hand edit, an older or newer version), is kept as it is in the
value's ``extra`` and written back unchanged, so ``encode_status(decode_status(d)) == d``
for every JSON object ``d`` (``tests/unit/test_record_codec.py`` checks it over records
the previous version wrote, ``tests/testdata/records/``). A field is ``None`` when its key
is absent: absent and empty stay apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitops_ray.moments import utc_text
from gitops_ray.types import OperationPhase, ResourceKey

PAUSE_KEY = "autoSyncPause"
OPERATION_STATE = "operationState"
"""The key of the running operation in an app record's status (absent when none runs)."""
MAX_UNTIL = 253402300799.0  # 9999-12-31T23:59:59Z: the last moment datetime can show

_NUMBER = (int, float)


def _key(name: str, kind: Any = str) -> Any:
    """A field stored under JSON key ``name``, of ``kind``.

    ``kind``: a scalar type (or a tuple of them), ``dict``, ``list``, a record class, or
    ``[cls]`` for a list of records (``[dict]``: of plain objects).
    """
    return field(default=None, metadata={"key": name, "kind": kind})


@dataclass(frozen=True)
class ResourceHealth:
    """A resource row's health (``{"status", "message"}``)."""

    status: str | None = _key("status")
    message: str | None = _key("message")
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceRow:
    """One resource of the last comparison: its sync status, health, git's replicas."""

    key: str | None = _key("key")
    status: str | None = _key("status")
    reason: str | None = _key("reason")
    group: str | None = _key("group")
    version: str | None = _key("version")
    kind: str | None = _key("kind")
    namespace: str | None = _key("namespace")
    name: str | None = _key("name")
    health: ResourceHealth | None = _key("health", ResourceHealth)  # noqa: RUF009
    git_replicas: Mapping[str, Any] | None = _key("gitReplicas", dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def resource_key(self) -> ResourceKey:
        return ResourceKey(self.group or "", self.kind or "", self.namespace or "",
                           self.name or "")

    @property
    def api_version(self) -> str:
        group, version = self.group or "", self.version or ""
        return f"{group}/{version}" if group else version


@dataclass(frozen=True)
class Operation:
    """One recorded operation: the last one, a history entry, or the running one.

    A history entry is an operation too, perhaps trimmed to its summary
    (:func:`gitops_ray.sync.history.summary`: ``resources`` gone, ``resourceCount``
    instead). A running one (``operationState``) also has the wave it waits for.
    """

    id: int | None = _key("id", int)
    revision: str | None = _key("revision")
    subject: str | None = _key("subject")
    phase: str | None = _key("phase")
    reason: str | None = _key("reason")
    message: str | None = _key("message")
    started_at: float | None = _key("startedAt", _NUMBER)
    finished_at: float | None = _key("finishedAt", _NUMBER)
    resources: tuple[Mapping[str, Any], ...] | None = _key("resources", [dict])
    resource_count: int | None = _key("resourceCount", int)
    trigger: str | None = _key("trigger")
    automated: bool | None = _key("automated", bool)
    initiated_by: str | None = _key("initiatedBy")
    dry_run: bool | None = _key("dryRun", bool)
    rollback_of: int | None = _key("rollbackOf", int)
    controller: str | None = _key("controller")
    source_key: str | None = _key("sourceKey")
    self_heal_attempts: int | None = _key("selfHealAttempts", int)
    attempt: int | None = _key("attempt", int)
    retrying: bool | None = _key("retrying", bool)
    argocd_operation: Mapping[str, Any] | None = _key("argocdOperation", dict)
    wave: int | None = _key("wave", int)
    sync_phase: str | None = _key("syncPhase")
    prune: bool | None = _key("prune", bool)
    only: tuple[Any, ...] | None = _key("only", list)
    failure: str | None = _key("failure")
    failure_reason: str | None = _key("failureReason")
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> float:
        """When it finished (or started, for an entry without an end; 0: unknown)."""
        return float(self.finished_at or self.started_at or 0.0)

    @property
    def deployment(self) -> bool:
        """A successful sync of the whole app, not a dry run: a deployment with an id.

        Argo CD records no partial sync (``controller/sync.go``: ``len(syncOp.Resources)
        == 0``): an operation Argo CD asked for on some resources is none.
        """
        sync = (self.argocd_operation or {}).get("sync")
        partial = isinstance(sync, Mapping) and bool(sync.get("resources"))
        return (self.phase == OperationPhase.SUCCEEDED and bool(self.started_at)
                and not self.dry_run and not partial)


@dataclass(frozen=True)
class AutoSync:
    """What auto-sync does next, as the controller last decided (``autoSync``)."""

    action: str | None = _key("action")
    reason: str | None = _key("reason")
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Condition:
    """An app condition the last comparison or decision raised (``{"type", "message"}``)."""

    type: str | None = _key("type")
    message: str | None = _key("message")
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pause:
    """Automated sync paused since ``since``, until ``until`` (``None``: until resumed).

    Recorded under :data:`PAUSE_KEY` (see :mod:`gitops_ray.reconcile.pause`); not one of
    the codec's generic records because a malformed pause must read as none at all.
    """

    since: float
    until: float | None = None
    rollback_id: int | None = None  # the history entry rolled back to
    revision: str = ""  # the revision rolled back to
    by: str = ""  # who paused it (the CLI's user name, if known)

    def active(self, now: float) -> bool:
        return self.until is None or now < self.until

    def remaining(self, now: float) -> float:
        """Seconds until the pause ends by itself (0: it does not, or it has)."""
        return max(self.until - now, 0.0) if self.until is not None else 0.0

    @property
    def message(self) -> str:
        """``automated sync paused until … (rollback to #ID)``: status, condition, Event."""
        until = utc_text(self.until) if self.until is not None else "resumed"
        why = f" (rollback to #{self.rollback_id})" if self.rollback_id is not None else ""
        return f"automated sync paused until {until}{why}"

    def to_record(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "rollbackId": self.rollback_id,
                "revision": self.revision, "by": self.by}

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Pause | None:
        """The pause recorded in a record's status, if any (a malformed one counts as none)."""
        return cls.parse(status.get(PAUSE_KEY))

    @classmethod
    def parse(cls, raw: object) -> Pause | None:
        """A recorded pause (the value of :data:`PAUSE_KEY`); ``None`` when malformed."""
        if not isinstance(raw, Mapping):
            return None
        try:
            until = raw.get("until")
            rollback = raw.get("rollbackId")
            end = float(until) if until is not None else None
            if end is not None and not 0 <= end < MAX_UNTIL:  # inf, NaN, year 10000
                return None
            return cls(since=float(raw.get("since") or 0.0), until=end,
                       rollback_id=int(rollback) if rollback is not None else None,
                       revision=str(raw.get("revision") or ""), by=str(raw.get("by") or ""))
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class AppStatus:
    """An app record's ``status``: the last comparison, operations, history, pause."""

    revision: str | None = _key("revision")
    sync: str | None = _key("sync")
    health: str | None = _key("health")
    health_message: str | None = _key("healthMessage")
    rollout_pending: tuple[str, ...] | None = _key("rolloutPending", list)
    resources: tuple[ResourceRow, ...] | None = _key("resources", [ResourceRow])
    conditions: tuple[Condition, ...] | None = _key("conditions", [Condition])
    images: tuple[str, ...] | None = _key("images", list)
    warnings: tuple[str, ...] | None = _key("warnings", list)
    conflicts: tuple[Any, ...] | None = _key("conflicts", list)
    render_warnings: tuple[Any, ...] | None = _key("renderWarnings", list)
    refusals: tuple[Any, ...] | None = _key("refusals", list)  # what a sync would refuse
    repo_url: str | None = _key("repoURL")
    path: str | None = _key("path")
    chart: str | None = _key("chart")
    target_revision: str | None = _key("targetRevision")
    sync_policy: str | None = _key("syncPolicy")
    self_heal: bool | None = _key("selfHeal", bool)
    destination_namespace: str | None = _key("destinationNamespace")
    destination_name: str | None = _key("destinationName")
    destination_server: str | None = _key("destinationServer")
    compared_at: float | None = _key("comparedAt", _NUMBER)
    error: str | None = _key("error")
    error_reason: str | None = _key("errorReason")
    operation: Operation | None = _key("operation", Operation)  # noqa: RUF009
    history: tuple[Operation, ...] | None = _key("history", [Operation])
    last_history_id: int | None = _key("lastHistoryId", int)
    running: Operation | None = _key(OPERATION_STATE, Operation)  # noqa: RUF009
    auto_sync: AutoSync | None = _key("autoSync", AutoSync)  # noqa: RUF009
    pause_record: Mapping[str, Any] | None = _key(PAUSE_KEY, dict)
    app_source: Mapping[str, Any] | None = _key("appSource", dict)
    impact: tuple[Mapping[str, Any], ...] | None = _key("impact", [dict])  # health.impact
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pause(self) -> Pause | None:
        """The recorded pause of automated sync (``None``: none, or malformed)."""
        return Pause.parse(self.pause_record)

    @property
    def entries(self) -> tuple[Operation, ...]:
        """The history, newest first (empty when there is none)."""
        return self.history or ()

    @property
    def rows(self) -> tuple[ResourceRow, ...]:
        """The resource rows, the objects among them even from a list with malformed ones."""
        if self.resources is not None:
            return self.resources
        return tuple(decode_row(r) for r in _objects(self.extra.get("resources")))

    @property
    def impacts(self) -> tuple[Mapping[str, Any], ...]:
        """The recorded impact entries that are objects (``health.impact``'s ``as_dict``).

        A list with a malformed entry does not fit the typed field (the codec keeps it as
        stored, in ``extra``): its well-formed entries still read.
        """
        return self.impact if self.impact is not None else _objects(self.extra.get("impact"))

    @property
    def current(self) -> Operation | None:
        """The running operation (a sync waiting for a wave), else the last finished one."""
        running = self.running
        return running if running is not None and running.phase == OperationPhase.RUNNING \
            else self.operation


def _objects(stored: object) -> tuple[Mapping[str, Any], ...]:
    """The objects in a stored list (none when it is no list)."""
    return tuple(e for e in stored if isinstance(e, Mapping)) if isinstance(stored, list) \
        else ()


HEAVY = frozenset({"resources", "history", "impact"})
"""What grows with the app (a row per object, 50 history entries): a headline skips it."""


def decode_status(raw: Mapping[str, Any], *, headline: bool = False) -> AppStatus:
    """The typed status of a record's ``status`` object (see the module docstring).

    ``headline``: without the :data:`HEAVY` keys (neither decoded nor kept), for a view
    that shows many apps a line each (the status table, the web page's list): its cost
    stays a few fields per app, whatever their size. Such a copy is never encoded back.
    """
    if headline:
        raw = {k: v for k, v in raw.items() if k not in HEAVY}
    status: AppStatus = _decode(AppStatus, raw)
    return status


def encode_status(status: AppStatus) -> dict[str, Any]:
    """The JSON object of ``status``: what :func:`decode_status` read, given back."""
    return _encode(status)


def encode(record: Any) -> dict[str, Any]:
    """The JSON object of any record value (a condition, a resource row, an operation)."""
    return _encode(record)


def decode_row(raw: Mapping[str, Any]) -> ResourceRow:
    """A resource row (the record's, or a fresh comparison's ``resources_of``)."""
    row: ResourceRow = _decode(ResourceRow, raw)
    return row


def decode_operation(raw: Mapping[str, Any]) -> Operation:
    op: Operation = _decode(Operation, raw)
    return op


def encode_operation(op: Operation) -> dict[str, Any]:
    return _encode(op)


_FIELDS: dict[type, tuple[tuple[str, str, Any], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, JSON key, kind) of each stored field of a record class."""
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = tuple((f.name, f.metadata["key"], f.metadata["kind"])
                                     for f in dataclasses.fields(cls) if "key" in f.metadata)
    return known


def _decode(cls: Any, raw: Mapping[str, Any]) -> Any:
    values: dict[str, Any] = {}
    used: set[str] = set()
    for attr, key, kind in _fields(cls):
        if key in raw and (value := _value(kind, raw[key])) is not _UNFIT:
            values[attr] = value
            used.add(key)
    extra = {k: v for k, v in raw.items() if k not in used} if len(used) < len(raw) else {}
    return cls(**values, extra=extra)


_UNFIT = object()


def _value(kind: Any, value: Any) -> Any:
    """``value`` as a ``kind`` field holds it, or :data:`_UNFIT` (then kept in ``extra``).

    Scalars first: most of a record's fields, and all of a resource row's but its health.
    """
    if kind is str:
        return value if isinstance(value, str) else _UNFIT
    if isinstance(kind, list):
        fits = isinstance(value, list) and all(isinstance(v, Mapping) for v in value)
        return tuple(v if kind[0] is dict else _decode(kind[0], v) for v in value) \
            if fits else _UNFIT
    if kind in _SCALARS:
        fits = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        return value if fits else _UNFIT  # JSON's true is no number
    if kind is list:
        return tuple(value) if isinstance(value, list) else _UNFIT
    if not isinstance(value, Mapping):  # dict, or a record class
        return _UNFIT
    return value if kind is dict else _decode(kind, value)


_SCALARS = frozenset({int, bool, _NUMBER})


def _encode(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, key, kind in _fields(type(record)):
        value = getattr(record, attr)
        if value is not None:
            out[key] = _plain(kind, value)
    out.update(record.extra)
    return out


def _plain(kind: Any, value: Any) -> Any:
    if isinstance(kind, list):
        return [v if kind[0] is dict else _encode(v) for v in value]
    if kind is list:
        return list(value)
    if dataclasses.is_dataclass(kind):
        return _encode(value)
    return value
