"""What the controller remembers of each app between refreshes, in one place.

Why one object per app: the controller used to keep a dozen maps by app name, each with
its own locking, and deleting an app forgot only some of them, so an app re-added under
the same name inherited the old one's waiting sync (recorded as superseded in its fresh
history). Now every field lives in one :class:`AppMemory`, and :meth:`Memories.forget`
drops all of it at once; a field added later is forgotten with the rest.

One lock discipline: every read or write of an app's memory holds the lock passed in (the
controller's condition, reentrant), briefly, through :meth:`Memories.of` or the
whole-map methods; nothing blocking (an API request) runs under it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

from gitops_ray.reconcile.argostatus import ManualOperation
from gitops_ray.reconcile.autosync import LastOperation
from gitops_ray.reconcile.pause import Pause
from gitops_ray.render.apps import Application
from gitops_ray.sync.operation import OperationState


@dataclasses.dataclass
class AppMemory:
    """One app's memory (see the module docstring); every field's default is "nothing"."""

    last_op: LastOperation | None = None  # what backoff and self-heal are decided from
    running: OperationState | None = None  # a sync waiting for a wave
    written: dict[str, Any] | None = None  # fingerprint of the status last written
    status: dict[str, Any] | None = None  # last record written, for Argo CD
    gone: Application | None = None  # removed from git, not deleted yet
    unwritable: bool = False  # its last record write failed (logged once)
    op_attempts: int = 0  # a requested operation's retries so far
    after_operation: bool = False  # the next refresh resolves the revision anew
    pause: Pause | None = None  # automated sync paused (a rollback)
    seen_pause: Pause | None = None  # the pause in the last record event
    requested: ManualOperation | None = None  # by the web page, not run yet

    def forget_leadership(self) -> None:
        """Drop what a (new) term of writing this app reloads from its record."""
        self.last_op = self.running = self.written = self.requested = None


class Memories:
    """Every app's :class:`AppMemory`, by name, under one lock."""

    def __init__(self, lock: threading.Condition) -> None:
        self._lock = lock
        self._apps: dict[str, AppMemory] = {}

    @contextlib.contextmanager
    def of(self, name: str) -> Iterator[AppMemory]:
        """The app's memory (made empty when there is none), with the lock held."""
        with self._lock:
            yield self._apps.setdefault(name, AppMemory())

    def peek(self, name: str) -> AppMemory:
        """A copy of the app's memory, read under the lock (empty when there is none)."""
        with self._lock:
            memory = self._apps.get(name)
            return dataclasses.replace(memory) if memory is not None else AppMemory()

    def each(self, wanted: Callable[[str], bool] = lambda name: True
             ) -> Iterator[tuple[str, AppMemory]]:
        """The ``wanted`` apps' memories; the caller holds the lock while it iterates."""
        return iter([(n, m) for n, m in self._apps.items() if wanted(n)])

    def forget(self, name: str) -> None:
        """Forget everything about the app (it was deleted): a re-added one starts clean."""
        with self._lock:
            self._apps.pop(name, None)
