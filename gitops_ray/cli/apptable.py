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

from gitops_ray.cli.table import Column, render
from gitops_ray.health import HealthStatus
from gitops_ray.moments import ago, rfc3339
from gitops_ray.reconcile.argostatus import app_conditions
from gitops_ray.sync.appstatus import AppStatus, Operation
from gitops_ray.types import OperationPhase, SyncStatus

NONE = "<none>"  # argocd app list's word for an empty cell
SHORT_SHA = 7
DATE_AFTER = 86400.0
"""A time this many seconds old or older is shown as a date, not as :func:`ago`."""


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


def table(statuses: Mapping[str, AppStatus], *, wide: bool, width: int | None,
          now: float) -> list[str]:
    """The status table's lines, fitted to ``width`` (a terminal) or whole (piped).

    ``statuses``: the records' statuses, typed (a headline is enough:
    :func:`~gitops_ray.sync.appstatus.decode_status`'s ``headline``).
    """
    rows = [cells(name, statuses[name], wide=wide, short=width is not None, now=now)
            for name in sorted(statuses)]
    return render(WIDE_COLUMNS if wide else COLUMNS, rows, width)


def cells(name: str, status: AppStatus, *, wide: bool, short: bool, now: float) -> list[str]:
    """One app's row; ``short``: the repository without scheme and ``.git`` (terminals)."""
    repo = status.repo_url or ""
    row = [name, status.destination_namespace or "", short_repo(repo) if short else repo,
           status.path or "", status.sync or SyncStatus.UNKNOWN.value, health(status),
           (status.revision or "")[:SHORT_SHA], status.sync_policy or "",
           conditions_summary(status)]
    if wide:
        row += [status.target_revision or "", last_sync(status, now)]
    return [cell or NONE for cell in row] + ([message(status)] if wide else [])


def health(status: AppStatus) -> str:
    """The health; ``(rollout pending)`` when Pods run an older template (see docs/ray.md)."""
    value = status.health or HealthStatus.UNKNOWN.value
    return f"{value} (rollout pending)" if status.rollout_pending else value


def conditions_summary(status: AppStatus) -> str:
    """The conditions' types as ``argocd app list`` shows them: ``Type(count)``, sorted."""
    counts: dict[str, int] = {}
    for kind, _ in app_conditions(status):
        counts[kind] = counts.get(kind, 0) + 1
    return ",".join(k if n == 1 else f"{k}({n})" for k, n in sorted(counts.items()))


def message(status: AppStatus) -> str:
    """Why the app is in its state: health message, a waiting sync, the conditions."""
    running = _running(status)
    warnings = len(status.render_warnings or ())
    parts = [status.health_message or "", (running.message or "") if running else "",
             *(f"{kind}: {text}" for kind, text in app_conditions(status)),
             f"{warnings} render warning(s) (-o yaml)" if warnings else ""]
    return "; ".join(dict.fromkeys(p for p in parts if p))


def last_phase(status: AppStatus) -> str:
    """The last operation's phase, or ``Running (wave N)`` while a sync waits for a wave."""
    running = _running(status)
    if running is not None:
        return f"{OperationPhase.RUNNING.value} (wave {running.wave})"
    return (status.operation.phase or "") if status.operation is not None else ""


def last_sync(status: AppStatus, now: float) -> str:
    """The last operation (its phase and reason) and when it finished, or started if running."""
    running = _running(status)
    op = running or status.operation or Operation()
    phase = last_phase(status)
    if op.reason:
        phase += f" ({op.reason})"
    when = human_time(op.started_at if running else op.finished_at, now)
    return f"{phase} {when}".strip()


def human_time(at: object, now: float) -> str:
    """``at`` (epoch seconds) as "12s ago", "5m ago", "3h ago", else ISO-8601 UTC."""
    if not isinstance(at, (int, float)) or not at:
        return ""
    age = max(0.0, now - at)
    return ago(age) if age < DATE_AFTER else rfc3339(at)


def short_repo(url: str) -> str:
    """A repository URL without what every one has: the scheme and ``.git``."""
    return re.sub(r"\.git/?$", "", re.sub(r"^[a-z+]+://", "", url))


def _running(status: AppStatus) -> Operation | None:
    running = status.running
    return running if running is not None and running.phase == OperationPhase.RUNNING else None
