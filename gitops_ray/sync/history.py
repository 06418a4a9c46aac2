"""An app's deployment history: stable ids, and a record that stays small however long it runs.

Why ids: ``gitops-ray rollback APP ID`` and ``argocd app rollback APP ID`` name a past
deployment by a number that must not move when newer ones arrive or older ones go. As in
Argo CD (``RevisionHistory.ID``), only a *deployment* gets one: a successful sync of the
whole app that wrote something (not a dry run, not an Argo CD operation on some
resources). Failed operations stay in the history, without an id, so the history shows
what went wrong but a rollback can only go back to something that once worked. Ids count
up from 0 and are never reused: ``lastHistoryId`` in the status remembers the largest
one given, even after its entry was dropped. The Argo CD projection
(:func:`gitops_ray.reconcile.argostatus.history`) writes the same ids into the
Application's ``status.history``.

The changes of the history (push, revise, numbering) are made by the record's one
writer, :mod:`gitops_ray.sync.statuswrites`, by these rules.

Why a byte budget: the history lives in the app's record ConfigMap, which the API server
caps at 1 MiB (etcd's request limit is 1.5 MiB), and which the controller rewrites on
every status change and keeps in its watch cache. The record also holds the inventory,
the last comparison's resource rows and the last operation, each of which grows with the
app (roughly 100 to 250 bytes per object), so the history gets a quarter of the cap,
:data:`HISTORY_BUDGET` (256 KiB), leaving the rest to an app of a few thousand objects.
Within it:

* at least :data:`HISTORY_LIMIT` (50) entries are kept, newest first;
* only the newest :data:`DETAILED` entries keep their per-resource results (what a user
  reads right after a sync); older ones are trimmed to their summary (revision, commit
  subject, phase, reason, message, times, and what auto-sync's backoff reads), with a
  ``resourceCount``;
* if that is still over budget (an app of thousands of objects), the detailed entries
  are trimmed too, then the oldest entries dropped, never the newest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gitops_ray.sync.appstatus import decode_operation

HISTORY_LIMIT = 50
"""Entries kept per app (Argo CD keeps ``revisionHistoryLimit``, default 10, of its own)."""
DETAILED = 3
"""The newest entries that keep their per-resource results."""
HISTORY_BUDGET = 256 * 1024
"""Bytes of JSON the history may take in the record (see the module docstring)."""
MAX_MESSAGE = 1000
"""Characters of an operation's message kept in a trimmed entry."""
LAST_ID = "lastHistoryId"
SUMMARY_KEYS = ("id", "revision", "subject", "phase", "reason", "message", "startedAt",
                "finishedAt", "trigger", "automated", "initiatedBy", "dryRun",
                "selfHealAttempts", "attempt", "sourceKey", "controller", "rollbackOf",
                "resourceCount")
"""What a trimmed entry keeps: what ``history`` shows and what auto-sync decides from."""


def is_deployment(op: object) -> bool:
    """A recorded operation that is a deployment (:attr:`Operation.deployment`)."""
    return isinstance(op, Mapping) and decode_operation(op).deployment


def entry_id(op: Mapping[str, Any]) -> int | None:
    """The history id of an entry (``None``: not a deployment, or recorded before ids)."""
    value = op.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def last_id(status: Mapping[str, Any]) -> int:
    """The largest id ever given in this record (-1: none yet)."""
    recorded = status.get(LAST_ID)
    known = [i for e in status.get("history") or () if isinstance(e, Mapping)
             if (i := entry_id(e)) is not None]
    floor = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else -1
    return max([floor, *known])


def bounded(entries: Sequence[Any], *, budget: int = HISTORY_BUDGET,
            limit: int = HISTORY_LIMIT, detailed: int = DETAILED) -> list[dict[str, Any]]:
    """The newest ``limit`` entries, details trimmed, within ``budget`` bytes of JSON."""
    kept = [dict(e) for e in entries[:limit] if isinstance(e, Mapping)]
    out = [e if i < detailed else summary(e) for i, e in enumerate(kept)]
    sizes = [_size(e) for e in out]
    for i in reversed(range(min(detailed, len(out)))):  # oldest detailed first
        if sum(sizes) + len(out) <= budget:
            break
        out[i] = summary(out[i])
        sizes[i] = _size(out[i])
    while len(out) > 1 and sum(sizes) + len(out) > budget:
        out.pop()
        sizes.pop()
    return out


def summary(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry without its per-resource results (see :data:`SUMMARY_KEYS`)."""
    out = {k: entry[k] for k in SUMMARY_KEYS if k in entry}
    if "resources" in entry:
        out["resourceCount"] = len(entry.get("resources") or ())
    if isinstance(out.get("message"), str):
        out["message"] = out["message"][:MAX_MESSAGE]
    return out


def _size(entry: Mapping[str, Any]) -> int:
    return len(json.dumps(entry, sort_keys=True)) + 2  # as records.py writes it, ", "


def deployments(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The entries that carry an id, newest first."""
    return [e for e in status.get("history") or ()
            if isinstance(e, Mapping) and entry_id(e) is not None]


def find(status: Mapping[str, Any], wanted: int) -> Mapping[str, Any] | None:
    """The history entry with id ``wanted``, if the record still has it."""
    return next((e for e in deployments(status) if entry_id(e) == wanted), None)


def known_ids(status: Mapping[str, Any]) -> str:
    """The ids a rollback can name, as a range (``3-12``) or a list, for messages."""
    ids = sorted(i for e in deployments(status) if (i := entry_id(e)) is not None)
    if not ids:
        return "none"
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])
    return ", ".join(str(i) for i in ids)
