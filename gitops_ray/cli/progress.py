"""``gitops-ray sync``'s progress: a live display on stderr, results streamed as apps finish.

Why: a sync of 200 RayClusters showed one spinner for seconds and then every result at
once, and the spinner's text ran into the first result line (stdout and stderr were
written without knowing of each other). Now, when stderr is an interactive terminal, a
rich ``Progress`` shows one line per app being synced, its objects done out of planned
(the engine's :class:`~gitops_ray.sync.request.SyncProgress`) and the object just
handled, under an overall count of apps; each app's result lines are printed the moment
it finishes.

Nothing is ever half display, half result: lines for the terminal that shows the display
(stdout on the same terminal, warnings, log lines) go through the display's console,
which erases the display, prints them above it and redraws it. Every write to the
terminal (those lines, and each redraw of the display, from a refresher thread of our
own rather than rich's) holds one lock: the console erases as many lines as the display
had when it was last drawn, so a redraw with an app fewer must not come between a
printer's erase and its write (a result line was lost that way, on a busy machine).
A stdout elsewhere (a file, a pipe) is written directly and never disturbs the display.
When stderr is not interactive (rich's rule: a TTY, unless ``TTY_INTERACTIVE``/
``TTY_COMPATIBLE`` say otherwise) there is no display and no control sequence at all:
the result lines come one by one on stdout, warnings and the summary plainly on stderr.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from gitops_ray.types import ResourceAction, ResourceKey

OVERALL = "apps"
REFRESH_SECONDS = 0.1  # how often the display is redrawn (rich's default is 10 a second)


@dataclass(frozen=True)
class Line:
    """One line of results: its text and, for a terminal, its colour (``""``: none)."""

    text: str
    color: str = ""


class AppProgress:
    """One app's line in the display; what the sync engine tells as it goes."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress, self._task = progress, task
        self._done = 0

    def planned(self, count: int) -> None:
        self._update(total=self._done + count, doing="applying")

    def done(self, key: ResourceKey, action: ResourceAction) -> None:
        self._done += 1
        self._update(completed=self._done, doing=f"{action} {key}")

    def _update(self, *, doing: str, total: int | None = None,
                completed: int | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, completed=completed, doing=doing)


class SyncDisplay:
    """The live display of a sync of ``apps`` apps, and where its results are printed."""

    def __init__(self, apps: int, *, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.live = self.console.is_interactive
        self._progress = _progress(self.console) if self.live else None
        self._overall: TaskID | None = None
        self._apps = apps
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.RLock()  # every write to the terminal (see the module doc)
        self._stack = contextlib.ExitStack()
        self._stop = threading.Event()

    def __enter__(self) -> SyncDisplay:
        if self._progress is not None:
            self._overall = self._progress.add_task(OVERALL, total=self._apps, doing="")
            self._stack.enter_context(self._progress)
            self._stack.enter_context(_logs_above(self))
            refresher = threading.Thread(target=self._refresh, name="sync-display",
                                         daemon=True)
            refresher.start()
            self._stack.callback(refresher.join)
            self._stack.callback(self._stop.set)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stack.close()

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH_SECONDS):
            with self._lock:
                if self._progress is not None:
                    self._progress.refresh()

    def start(self, app: str) -> AppProgress:
        """The app's sync begins: its line appears (from the syncing thread)."""
        if self._progress is None:
            return AppProgress(None, None)
        task = self._progress.add_task(app, total=None, doing="comparing")
        with self._lock:
            self._tasks[app] = task
        return AppProgress(self._progress, task)

    def finish(self, app: str, lines: list[Line], *, failed: int) -> None:
        """The app is done: its line goes, its results are printed, the count moves on."""
        with self._lock:
            if self._progress is not None and self._overall is not None:
                task = self._tasks.pop(app, None)
                if task is not None:
                    self._progress.remove_task(task)
                self._progress.update(self._overall, advance=1,
                                      doing=f"{failed} failed" if failed else "")
            for line in lines:
                self.result(line)

    def result(self, line: Line) -> None:
        """A line of results on stdout (above the display when they share a terminal)."""
        if self.live and _shares_terminal():
            self.above(Text(line.text, style=line.color))
        else:
            click.secho(line.text, fg=line.color or None)

    def above(self, text: Text) -> None:
        """Print ``text`` on stderr above the display (erase, print, redraw: one write)."""
        with self._lock:
            self.console.print(text, soft_wrap=True)

    def warn(self, message: str) -> None:
        """A warning on stderr (above the display, if there is one)."""
        if self.live:
            self.above(Text(message, style="yellow"))
        else:
            click.secho(message, fg="yellow", err=True)


def _progress(console: Console) -> Progress:
    """One line per app syncing: spinner, name, bar, objects done/planned, what it does."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}",
                   table_column=Column(no_wrap=True, overflow="ellipsis", max_width=32)),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[doing]}",
                   table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
        console=console, transient=True, expand=True, redirect_stdout=False,
        auto_refresh=False)  # redrawn by SyncDisplay._refresh, under its lock


def _shares_terminal() -> bool:
    """Whether stdout is the terminal stderr is: lines must then go through the display."""
    try:
        out, err = sys.stdout.fileno(), sys.stderr.fileno()
        return os.isatty(out) and os.path.samestat(os.fstat(out), os.fstat(err))
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def _logs_above(display: SyncDisplay) -> Iterator[None]:
    """Log lines (stderr handlers) go above the display while it runs, not through it."""
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and _is_stderr(h.stream)]
    previous = [h.setStream(_Above(display)) for h in handlers]
    try:
        yield
    finally:
        for handler, stream in zip(handlers, previous, strict=True):
            if stream is not None:
                handler.setStream(stream)


class _Above(io.TextIOBase):
    """A stream whose whole lines are printed above the display (a log handler's)."""

    def __init__(self, display: SyncDisplay) -> None:
        self._display, self._pending = display, ""

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            self._display.above(Text(line))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._display.above(Text(self._pending))
            self._pending = ""


def _is_stderr(stream: TextIO) -> bool:
    try:
        return stream.fileno() == sys.__stderr__.fileno()  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        return False
