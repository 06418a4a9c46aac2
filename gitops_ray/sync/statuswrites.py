"""The only code that changes an app record's status: every write of it, named.

Why one writer: the status was changed from a dozen places in six modules, each setting
keys by hand, so what a record could say was whatever the last writer made up, and a
change of shape (a new key, the history's numbering) had to be found in all of them.
Each function here is one thing that happens to an app (compared, a sync step, an
operation finished, paused, resumed, a failed refresh, torn down) and changes the record
passed in; callers hand them to :meth:`gitops_ray.sync.records.RecordStore.update`, which
owns the read-modify-write. ``tests/unit/test_record_writers.py`` checks that no other
product module changes ``.status``.

Operations are written as the codec's records (:class:`~gitops_ray.sync.appstatus.
Operation`, :func:`~gitops_ray.sync.appstatus.encode_operation`) or as
:meth:`gitops_ray.sync.request.SyncResult.as_operation` gives them; the history's bounds
and ids are :mod:`gitops_ray.sync.history`'s rules, applied here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitops_ray.sync import history
from gitops_ray.sync.appstatus import (
    OPERATION_STATE,
    PAUSE_KEY,
    AutoSync,
    Operation,
    Pause,
    encode_operation,
)
from gitops_ray.types import SyncStatus

if TYPE_CHECKING:
    from gitops_ray.sync.records import AppRecord

Status = dict[str, Any]


def compared(record: AppRecord, fields: Mapping[str, Any]) -> None:
    """What a comparison says (:func:`gitops_ray.reconcile.status.status_of`'s fields)."""
    record.status.update(fields)


def sync_step(record: AppRecord, operation: Mapping[str, Any], *, running: bool) -> None:
    """A sync step's operation: the running one (a wave waits), or a finished one."""
    if running:
        record.status[OPERATION_STATE] = dict(operation)
    else:
        finished(record, operation)


def finished(record: AppRecord, operation: Operation | Mapping[str, Any]) -> None:
    """A finished operation: the last one, newest in the history (it ends a running one)."""
    push_history(record.status, operation)


def note_operation(record: AppRecord, fields: Mapping[str, Any], *, running: bool) -> None:
    """The controller's facts of a step's operation (trigger, counters, who asked).

    Added to the running operation, or to the newest finished one, which they may make
    a deployment or not one (:func:`revise_newest`).
    """
    running_op = record.status.get(OPERATION_STATE)
    if running and isinstance(running_op, dict):
        running_op.update(fields)
    elif not running:
        revise_newest(record.status, fields)


def auto_sync(record: AppRecord, decision: AutoSync) -> None:
    """What auto-sync does next (a retry after backoff, blocked, paused, ...)."""
    record.status["autoSync"] = auto_sync_fields(decision)


def auto_sync_fields(decision: AutoSync) -> dict[str, Any]:
    """``autoSync`` as recorded (also part of a comparison's fields the controller saves)."""
    return {"action": decision.action, "reason": decision.reason, **decision.extra}


def mark_rollback(record: AppRecord, started_at: float, fields: Mapping[str, Any]) -> None:
    """Mark the operation that started at ``started_at`` with the rollback's ``fields``."""
    newest = record.status.get("operation")
    if isinstance(newest, dict) and newest.get("startedAt") == started_at:
        revise_newest(record.status, fields)


def pause(record: AppRecord, paused: Pause) -> None:
    """Automated sync paused (a rollback)."""
    record.status[PAUSE_KEY] = paused.to_record()


def resume(record: AppRecord, ended: Pause | None = None) -> Pause | None:
    """End the pause (only ``ended``, when given: not a newer one); the pause removed."""
    current = Pause.of(record.status)
    if ended is not None and current != ended:
        return None
    record.status.pop(PAUSE_KEY, None)
    return current


def failed(record: AppRecord, error: str, *, at: float | None = None,
           extra: Mapping[str, Any] | None = None) -> None:
    """A refresh, sync or deletion that failed: sync status ``Unknown`` and why."""
    record.status.update({"sync": SyncStatus.UNKNOWN.value, "error": error,
                          "comparedAt": time.time() if at is None else at, **(extra or {})})


def app_source(record: AppRecord, origin: Mapping[str, Any]) -> None:
    """Where the app's Application came from (``sync --repo --apps``: removed apps go)."""
    record.status["appSource"] = dict(origin)


# -- the history (its rules: sync.history) -------------------------------------------------

def push_history(status: Status, operation: Operation | Mapping[str, Any]) -> None:
    """Record ``operation`` as the last one, numbered and bounded (:mod:`.history`).

    A finished operation ends the running one, if any (see :mod:`gitops_ray.sync.operation`).
    """
    op = encode_operation(operation) if isinstance(operation, Operation) else dict(operation)
    status.pop(OPERATION_STATE, None)
    status["operation"] = op
    status["history"] = [op, *status.get("history", [])]
    settle(status)


def revise_newest(status: Status, fields: Mapping[str, Any]) -> None:
    """Add ``fields`` to the newest finished operation (and its history entry), then settle.

    The controller learns some facts of an operation after it was recorded (who asked
    for it, which resources): they can make it a deployment, or not one.
    """
    for op in (status.get("operation"), *status.get("history", [])[:1]):
        if isinstance(op, dict):
            op.update(fields)
    settle(status)


def settle(status: Status) -> None:
    """Give the newest entry its id (or take it back), then bound the history."""
    entries = status.get("history") or []
    if entries and isinstance(entries[0], dict):
        _number(status, entries[0])
    status["history"] = history.bounded(entries)


def _number(status: Status, newest: dict[str, Any]) -> None:
    current = history.entry_id(newest)
    last = history.last_id(status)
    if history.is_deployment(newest) and current is None:
        _set_id(status, newest, last + 1)
        status[history.LAST_ID] = last + 1
    elif not history.is_deployment(newest) and current is not None:
        _set_id(status, newest, None)
        if current == last:  # nobody can have been given a later one: reuse it
            status[history.LAST_ID] = last - 1


def _set_id(status: Status, newest: dict[str, Any], value: int | None) -> None:
    operation = status.get("operation")
    for op in (newest, operation if isinstance(operation, dict) else None):
        if op is None:
            continue
        if value is None:
            op.pop("id", None)
        else:
            op["id"] = value
