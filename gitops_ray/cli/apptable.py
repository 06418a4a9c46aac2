"""``gitops-ray status`` as a table: ``argocd app list``'s columns, from the apps' records.

An Argo CD user reads NAME, NAMESPACE, REPO, PATH, SYNC, HEALTH, SYNCPOLICY and
CONDITIONS (the conditions' types, ``Type(count)``, or ``<none>``) at a glance, and
REVISION says which commit that state is about. ``-o wide`` adds what explains a state:
TARGET (the revision git was asked for), LAST SYNC (the last operation and when) and
MESSAGE (the health message, a running sync's wait, every condition's message), so a
"Progressing" comes with its reason. The conditions are :func:`app_conditions`, the
same ones the controller writes into an Argo CD Application's status.

Times are shown as people read them ("3m ago", older ones as ISO-8601 UTC), never as
the epoch seconds records keep. How the table fits a terminal is :mod:`.table`'s job;
here only the cells are decided, and pure, so unit tests see exactly what is printed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from gitops_ray.cli.table import Column, render
from gitops_ray.health import HealthStatus
from gitops_ray.moments import rfc3339
from gitops_ray.reconcile.argostatus import app_conditions
from gitops_ray.sync.operation import OPERATION_STATE
from gitops_ray.types import OperationPhase, SyncStatus

NONE = "<none>"  # argocd app list's word for an empty cell
SHORT_SHA = 7
AGES = ((60, 1, "s"), (3600, 60, "m"), (86400, 3600, "h"))
"""(below, unit size, unit) for :func:`human_time`; a day or older is a date instead."""
Status = Mapping[str, Any]


class Output(StrEnum):
    """``status -o``: tables for people, JSON and YAML (the recorded rows) for programs."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"


# shrink: the order in which columns give up width in a narrow terminal (see .table)
COLUMNS = (
    Column("NAME", shrink=7, minimum=16),
    Column("NAMESPACE", shrink=6, minimum=10),
    Column("REPO", shrink=2, minimum=8, keep_end=True),
    Column("PATH", shrink=3, minimum=8, keep_end=True),  # the end names the app's directory
    Column("SYNC"),
    Column("HEALTH"),
    Column("REVISION"),
    Column("SYNCPOLICY"),
    Column("CONDITIONS", shrink=4),
)
WIDE_COLUMNS = (
    *COLUMNS,
    Column("TARGET", shrink=5, minimum=8, detail=True),
    Column("LAST SYNC", detail=True),
    Column("MESSAGE", shrink=1, minimum=30, wrap=True, detail=True),
)


def table(statuses: Mapping[str, Status], *, wide: bool, width: int | None,
          now: float) -> list[str]:
    """The status table's lines, fitted to ``width`` (a terminal) or whole (piped)."""
    rows = [cells(name, statuses[name], wide=wide, short=width is not None, now=now)
            for name in sorted(statuses)]
    return render(WIDE_COLUMNS if wide else COLUMNS, rows, width)


def cells(name: str, status: Status, *, wide: bool, short: bool, now: float) -> list[str]:
    """One app's row; ``short``: the repository without scheme and ``.git`` (terminals)."""
    repo = str(status.get("repoURL") or "")
    row = [name, str(status.get("destinationNamespace") or ""),
           short_repo(repo) if short else repo, str(status.get("path") or ""),
           str(status.get("sync") or SyncStatus.UNKNOWN.value), health(status),
           str(status.get("revision") or "")[:SHORT_SHA], str(status.get("syncPolicy") or ""),
           conditions_summary(status)]
    if wide:
        row += [str(status.get("targetRevision") or ""), last_sync(status, now)]
    return [cell or NONE for cell in row] + ([message(status)] if wide else [])


def health(status: Status) -> str:
    """The health; ``(rollout pending)`` when Pods run an older template (see docs/ray.md)."""
    value = str(status.get("health") or HealthStatus.UNKNOWN.value)
    return f"{value} (rollout pending)" if status.get("rolloutPending") else value


def conditions_summary(status: Status) -> str:
    """The conditions' types as ``argocd app list`` shows them: ``Type(count)``, sorted."""
    counts: dict[str, int] = {}
    for kind, _ in app_conditions(status):
        counts[kind] = counts.get(kind, 0) + 1
    return ",".join(k if n == 1 else f"{k}({n})" for k, n in sorted(counts.items()))


def message(status: Status) -> str:
    """Why the app is in its state: health message, a waiting sync, the conditions."""
    warnings = len(status.get("renderWarnings") or ())
    parts = [str(status.get("healthMessage") or ""), str(_running(status).get("message", "")),
             *(f"{kind}: {text}" for kind, text in app_conditions(status)),
             f"{warnings} render warning(s) (-o yaml)" if warnings else ""]
    return "; ".join(dict.fromkeys(p for p in parts if p))


def last_phase(status: Status) -> str:
    """The last operation's phase, or ``Running (wave N)`` while a sync waits for a wave."""
    running = _running(status)
    if running:
        return f"{OperationPhase.RUNNING.value} (wave {running.get('wave')})"
    return str((status.get("operation") or {}).get("phase", ""))


def last_sync(status: Status, now: float) -> str:
    """The last operation (its phase and reason) and when it finished, or started if running."""
    running = _running(status)
    op = running or status.get("operation") or {}
    phase = last_phase(status)
    if op.get("reason"):
        phase += f" ({op['reason']})"
    when = human_time(op.get("startedAt" if running else "finishedAt"), now)
    return f"{phase} {when}".strip()


def human_time(at: object, now: float) -> str:
    """``at`` (epoch seconds) as "12s ago", "5m ago", "3h ago", else ISO-8601 UTC."""
    if not isinstance(at, (int, float)) or not at:
        return ""
    age = max(0, int(now - at))
    for below, size, unit in AGES:
        if age < below:
            return f"{age // size}{unit} ago"
    return rfc3339(at)


def short_repo(url: str) -> str:
    """A repository URL without what every one has: the scheme and ``.git``."""
    return re.sub(r"\.git/?$", "", re.sub(r"^[a-z+]+://", "", url))


def _running(status: Status) -> Mapping[str, Any]:
    running = status.get(OPERATION_STATE)
    if isinstance(running, Mapping) and running.get("phase") == OperationPhase.RUNNING:
        return running
    return {}
