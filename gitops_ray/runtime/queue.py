"""Work scheduling for app refreshes: a bounded, per-app-exclusive pool.

Why not just call ``refresh(app)`` from wherever a trigger comes from (poll, webhook,
watch event, backoff timer): a RayCluster being scaled produces bursts of watch events,
a slow repository can take minutes, and two refreshes of one app must never sync at the
same time. So:

* Delayed triggers ("refresh app X at time T": a watch event's debounce, a backoff) are
  deadlines of the runtime's one APScheduler (:mod:`gitops_ray.runtime.scheduling`):
  the earliest request for an app wins, so a burst of events becomes one refresh.
* :class:`WorkQueue` runs refreshes on a fixed number of worker threads. An app is
  never refreshed twice at once: a request for an app that is running is remembered and
  runs once more right after (so no trigger is lost), and requests for an app already
  waiting are merged. A slow or failing app occupies one worker; the others go on.
  Urgent requests are served first, and while one runs, normal ones wait, then take at
  most one worker (see :class:`WorkQueue`); a refresh whose urgent part is done says so
  (:func:`relax`) and counts as normal work from then on.
* With sharding, a request for an app of another replica's shard is *standby* work (it
  prepares the app for a takeover, see :meth:`~gitops_ray.runtime.controller.Controller.
  refresh`): it runs only when the queue is otherwise idle, one at a time, so it never
  slows this replica's own apps.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import structlog

from gitops_ray.types import ResourceAction, ResourceKey

log = structlog.get_logger(__name__)
Clock = Callable[[], float]
PATIENCE = 2.0
"""Seconds a normal refresh waits while urgent work runs before it may run beside it."""


URGENT, NORMAL, SOON, STANDBY = 0, 1, 2, 3
"""Priorities, first to last. ``SOON``: standby work asked for urgently (a silent owner's
apps, see :mod:`gitops_ray.runtime.shards`): alone too, but before other standby work."""


@dataclass
class _Slot:
    reason: str
    priority: int
    running: bool = False
    again: tuple[str, int] | None = None  # a request that arrived while running
    running_as: int = NORMAL  # the priority it counts as while running (see relax)
    since: float = 0.0  # when it was queued (a normal one's patience counts from here)


_current: contextvars.ContextVar[tuple[WorkQueue, _Slot] | None] = contextvars.ContextVar(
    "gitops_ray_refresh", default=None)
"""The queue and slot of the running refresh; a context variable, so the threads a sync
applies on (which run in a copy of the refresh's context) see it too."""


def relax() -> None:
    """Called inside a refresh: what is left of it is normal work, whatever started it.

    An auto-sync after a commit is urgent until the objects the commit changed have
    landed; re-asserting the others after them is not, and must not hold back the next
    push's refresh. Outside a worker thread (the CLI), nothing happens.
    """
    current = _current.get()
    if current is not None:
        current[0]._relax(current[1])


class WorkQueue:
    """A bounded pool that runs ``work(app, reason)``, never twice at once for one app.

    Urgent requests (drift seen by a watch, a due backoff, an app a push touched) go
    before normal ones (polls, bulk refreshes), so a webhook that refreshes a hundred apps
    does not delay the self-heal of the one that drifted. Standby requests (``standby``
    says which apps' are) go last of all and start only on an idle queue; urgent ones
    among them (a silent owner's apps) before the others.

    Going first is not enough on its own: refreshes are CPU work under one GIL, so an
    urgent refresh running beside seven normal ones gets an eighth of the CPU (measured:
    the one app a commit changed was compared last of the 50 a push refreshed), and
    beside one it still gets half (measured: a commit's app of 100 RayClusters took
    0.26 s of CPU to render and 0.69 s to do it, beside the push's other apps). So while
    an urgent refresh runs, a normal one waits until it has waited ``patience`` seconds;
    then at most one runs beside the urgent ones, the others wait for them to end. One
    keeps going after ``patience``, so a stream of urgent work (a flapping app's drift)
    delays normal work but never starves it.
    """

    def __init__(self, work: Callable[[str, str], None], *, workers: int,
                 standby: Callable[[str], bool] | None = None,
                 patience: float = PATIENCE, clock: Clock = time.monotonic) -> None:
        self._work = work
        self._standby = standby
        self._patience = patience
        self._clock = clock
        self._slots: dict[str, _Slot] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._running = {URGENT: 0, NORMAL: 0, SOON: 0, STANDBY: 0}
        for i in range(workers):
            threading.Thread(target=self._worker, name=f"refresh-{i}", daemon=True).start()

    def submit(self, app: str, reason: str, *, urgent: bool = False) -> None:
        """Ask for a refresh of ``app`` (merged with a waiting one, queued after a running one)."""
        priority = URGENT if urgent else NORMAL
        if self._standby is not None and self._standby(app):
            priority = SOON if urgent else STANDBY
        with self._cond:
            if self._closed:
                return
            slot = self._slots.get(app)
            if slot is None:
                self._slots[app] = _Slot(reason, priority, since=self._clock())
                self._push(priority, app)
            elif slot.running:
                slot.again = min(slot.again or (reason, priority), (reason, priority),
                                 key=lambda r: r[1])
            elif priority < slot.priority:
                slot.reason, slot.priority = reason, priority
                self._push(priority, app)  # the older entry is skipped when popped

    def busy(self) -> set[str]:
        """Apps queued or running."""
        with self._cond:
            return set(self._slots)

    def _push(self, priority: int, app: str) -> None:
        heapq.heappush(self._heap, (priority, next(self._order), app))
        self._cond.notify()

    def _next(self) -> tuple[str, _Slot] | None:
        """The most urgent waiting app (called with the lock held); ``None`` when closed."""
        while not self._closed:
            wait: float | None = None
            while self._heap:
                wait = self._wait_for(self._heap[0])
                if wait != 0.0:
                    break
                priority, _, app = heapq.heappop(self._heap)
                slot = self._slots.get(app)
                if slot is not None and not slot.running and slot.priority == priority:
                    slot.running, slot.running_as = True, priority
                    self._running[priority] += 1
                    return app, slot
            self._cond.wait(wait)
        return None

    def _wait_for(self, head: tuple[int, int, str]) -> float | None:
        """How long the head of the heap must still wait: 0 none, ``None`` for an event.

        Urgent work starts at once; normal work at once when no urgent work runs, else
        on one worker once it has waited ``patience``; standby work alone.
        """
        priority = head[0]
        if priority >= SOON:
            return None if any(self._running.values()) else 0.0
        if priority == URGENT or not self._running[URGENT]:
            return 0.0
        if self._running[NORMAL]:
            return None
        slot = self._slots.get(head[2])
        waited = self._clock() - slot.since if slot is not None else self._patience
        return max(0.0, self._patience - waited)

    def _worker(self) -> None:
        while True:
            with self._cond:
                picked = self._next()
            if picked is None:
                return
            app, slot = picked
            token = _current.set((self, slot))
            try:
                self._work(app, slot.reason)
            except Exception:  # a bug in one refresh must not kill the worker
                log.exception("refresh_crashed", app=app)
            finally:
                _current.reset(token)
                self._finish(app, slot)

    def _relax(self, slot: _Slot) -> None:
        with self._cond:
            if slot.running and slot.running_as == URGENT:
                self._running[URGENT] -= 1
                self._running[NORMAL] += 1
                slot.running_as = NORMAL
                self._cond.notify_all()

    def _finish(self, app: str, slot: _Slot) -> None:
        with self._cond:
            self._running[slot.running_as] -= 1
            if slot.again and not self._closed:
                reason, priority = slot.again
                self._slots[app] = _Slot(reason, priority, since=self._clock())
                self._push(priority, app)
            else:
                del self._slots[app]
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Stop accepting work and wait up to ``timeout`` for running refreshes to end."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while any(s.running for s in self._slots.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


class UrgentUntilLanded:
    """A sync's progress listener that :func:`relax`-es the refresh once ``keys`` landed.

    ``keys``: the objects the comparison found OutOfSync. The sync engine applies them
    first (:mod:`gitops_ray.sync.engine`) and tells us as each lands; from then on the
    sync only re-asserts objects that were in sync. With nothing OutOfSync (a re-sync),
    nothing in it is urgent.
    """

    def __init__(self, keys: Iterable[ResourceKey]) -> None:
        self._left = set(keys)
        self._lock = threading.Lock()
        if not self._left:
            relax()

    def planned(self, count: int) -> None:
        """Nothing to do: the count does not matter here."""

    def done(self, key: ResourceKey, action: ResourceAction) -> None:
        with self._lock:
            if not self._left:
                return
            self._left.discard(key)
            landed = not self._left
        if landed:
            relax()


def across_clusters(names: Iterable[str], cluster: Callable[[str], Hashable]) -> list[str]:
    """``names`` taken round-robin by ``cluster``, each cluster's in their order.

    A takeover queues every app of the shards it gained at once; in name order the
    workers would write to one cluster's API server at a time (a fleet names its apps by
    cluster), leaving the others idle. Round-robin spreads its writes over all of them.
    """
    by: dict[Hashable, list[str]] = {}
    for name in names:
        by.setdefault(cluster(name), []).append(name)
    rounds = itertools.zip_longest(*by.values())
    return [name for batch in rounds for name in batch if name is not None]
