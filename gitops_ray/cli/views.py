"""How the read-only commands show things to people: times, consoles, worker-group tables.

Shared by ``get`` and ``diff`` (and free for ``status``): one place decides how a time, a
writer of ``replicas`` or a worker group reads, so the commands cannot drift apart.

* Times are recorded as epoch seconds; people read ``2026-08-20 10:15:03 UTC (3m ago)``
  and machines RFC 3339 (:func:`iso`), never a float.
* A table fits the terminal it is printed on (:mod:`gitops_ray.cli.table`, the one
  renderer); piped into a file or ``grep`` it is plain text (no colour, no wrapping at
  80 columns), as ``kubectl get`` prints.
* The live ``replicas``' writer is named as the API server records it, with what it is
  when we know (``python-requests`` is the Ray autoscaler: it patches without a
  ``fieldManager``, see :mod:`gitops_ray.health.workergroups`).
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Sequence
from typing import IO, cast

from rich.console import Console
from rich.text import Text

from gitops_ray.cli.table import Cell, Column, Table, show
from gitops_ray.health.workergroups import WorkerGroupView
from gitops_ray.moments import ago, rfc3339, utc_text

PLAIN_WIDTH = 1000
"""Columns of output that is not a terminal: wide enough that no table row wraps."""
UNBOUNDED = 2**31 - 1
"""KubeRay's default ``maxReplicas`` (int32 max): no upper bound."""


def console(stream: IO[str] | None = None) -> Console:
    """A console for ``stream`` (stdout): the terminal's width, else plain and unwrapped."""
    out = stream if stream is not None else sys.stdout
    if out.isatty():
        return Console(file=out, highlight=False)
    return Console(file=cast(IO[str], _Trimmed(out)), width=PLAIN_WIDTH, highlight=False,
                   color_system=None, soft_wrap=False)


class _Trimmed(io.TextIOBase):
    """Writes whole lines without the trailing spaces a table pads its cells with."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.pending = out, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.out.write(self.pending.rstrip(" "))
            self.pending = ""
        self.out.flush()


def stderr_console() -> Console:
    return console(sys.stderr)


# -- times --------------------------------------------------------------------------------

def _moment(epoch: object) -> float | None:
    return float(epoch) if isinstance(epoch, int | float) and not isinstance(epoch, bool) \
        and epoch > 0 else None


def iso(epoch: object) -> str:
    """RFC 3339 in UTC (``2026-08-20T10:15:03Z``), ``""`` when not a time."""
    moment = _moment(epoch)
    return "" if moment is None else rfc3339(moment)


def human_time(epoch: object, now: float | None = None) -> str:
    """``2026-08-20 10:15:03 UTC (3m ago)``, ``""`` when not a time.

    ``get``'s summary and ``history``'s DATE column; the ago is :func:`gitops_ray.moments.ago`.
    """
    moment = _moment(epoch)
    if moment is None:
        return ""
    return f"{utc_text(moment)} ({ago((time.time() if now is None else now) - moment)})"


def duration(seconds: float) -> str:
    """``<0.1s``, ``0.4s``, ``12s``, ``3m4s``, ``2h5m``, ``3d4h``: two units at most (kubectl)."""
    if seconds < 0.1:
        return "<0.1s"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for size, unit, smaller, small_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m"),
                                            (60, "m", 1, "s")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size}{unit}" + (f"{rest}{small_unit}" if rest else "")
    return f"{whole}s"


# -- the worker-group view ------------------------------------------------------------------

GROUP_COLUMNS = (Column("GROUP", shrink=3, wrap=True), Column("GIT"), Column("LIVE"),
                 Column("SET BY", shrink=2, wrap=True), Column("MIN"), Column("MAX"),
                 Column("READY"), Column("TO DELETE", shrink=1, wrap=True), Column("STALE"))
"""On a narrow terminal the long cells wrap under themselves, never the headers."""


def _count(value: int | None) -> str:
    if value is None:
        return "-"
    return "unbounded" if value >= UNBOUNDED else str(value)


def group_row(view: WorkerGroupView, *, wide: bool = False) -> list[Cell]:
    """One table row of the view (see :data:`GROUP_COLUMNS`)."""
    live = Text(_count(view.live_replicas), style="yellow" if view.drifted else "")
    deleting = ",".join(view.workers_to_delete) if wide else str(len(view.workers_to_delete))
    name = view.group + ("" if view.live else " (not live yet)") \
        + ("" if view.in_git else " (not in git)")
    return [name, _count(view.git_replicas), live, view.writer,
            _count(view.min_replicas), _count(view.max_replicas),
            f"{view.ready_pods}/{view.total_pods}" if view.live else "-",
            deleting or "0", str(view.stale_pods)]


def groups_table(views: Sequence[WorkerGroupView], *, wide: bool = False,
                 title: str = "") -> Table:
    """The worker-group view of one Ray object as a table, under ``title``."""
    return Table(GROUP_COLUMNS, [group_row(view, wide=wide) for view in views], title=title)


def print_groups(out: Console, title: str, views: Sequence[WorkerGroupView], *,
                 wide: bool = False) -> None:
    """``title`` (e.g. ``RayCluster ray/prod worker groups:``) and its table."""
    show(out, groups_table(views, wide=wide, title=title))
