"""Render problems that were tolerated, so whoever syncs the render knows it is partial.

A render may go on past a problem when failing would be worse for everyone else: a YAML
file with a syntax error that does not look like a manifest is skipped (as Argo CD
does), and a broken shared ``patches.yaml`` is ignored by apps it cannot concern. Each
such skip is *tolerated*, not silent: it is logged, and collected for the render that
is running (a context variable, so concurrent renders in worker threads do not mix).

Why collect them: a skipped file may have held objects. The reconcile stage never
prunes after a render with tolerated problems (an object that vanished because its file
was skipped must not be deleted from the cluster) and shows them in the app's status.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

log = logging.getLogger(__name__)  # stdlib: see render.manifests

_current: ContextVar[list[str] | None] = ContextVar("gitops_ray_render_notes", default=None)


def tolerate(message: str) -> None:
    """Record that the running render skipped something (``message`` names the file)."""
    log.warning("%s", message)
    notes = _current.get()
    if notes is not None:
        notes.append(message)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Collect what renders inside the ``with`` block tolerate."""
    notes: list[str] = []
    token = _current.set(notes)
    try:
        yield notes
    finally:
        _current.reset(token)
