"""Keep CPython's full garbage collections off the controller's hot paths.

Why: the controller holds a large, long-lived heap (render memos, verdicts, app records,
the watch cache's indexes) and makes almost no reference cycles: at 5,000 RayClusters,
full collections found nothing to free, yet each walked the whole heap for ~0.6 s with
every thread stopped. CPython starts one after ten young-generation collections once a
quarter of the old generation's size has been promoted since the last, and a render's
or a sync's objects, alive for a fraction of a second, are promoted: during start-up that
was a fifth of the controller's wall time, and after it one landed in most commit ->
applied samples (timing hooks; ``bench/README.md``, issue 18, tenth round).

Two settings, measured there (commit -> applied at 5,000 RayClusters, p50 1.32 s with
CPython's defaults, 0.93 s with the freeze alone, 0.75 s with both):

* :meth:`Heap.settle` runs at start and then every :data:`SETTLE_EVERY_S` seconds on the
  scheduler (a one-shot command's by work done: :func:`settling`): it collects what is
  not frozen yet (what was made since the last settle) and freezes the survivors
  (:func:`gc.freeze`), so later collections walk only what is new;
* :data:`THRESHOLDS` (:func:`gc.set_threshold`): a young collection per 10,000 net new
  objects instead of 700, so most of a render's objects are freed before a collection
  sees them, and a collection of everything not frozen only after 100 middle-generation
  ones instead of 10; the settles do that work on their own schedule.

Frozen objects are still freed by reference counting, as nearly all of ours are; what a
frozen object can leak is a reference cycle it joins after being frozen, so every
:data:`THAW_EVERY` settles (about an hour) the heap is unfrozen and collected whole once,
then frozen again: one full pause an hour instead of several a minute. A runtime that
stops restores CPython's settings (:meth:`Heap.release`): what matters in tests, which
run controllers inside one long-lived process. One-shot commands that render and compare
many apps (``sync``, ``diff``) use the same policy for their duration (:func:`settling`):
so this module is at the package's top level, below both the runtime and the CLI.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)

SETTLE_EVERY_S = 30.0
"""Seconds between settles: what was made since the last one is collected and frozen."""

THAW_EVERY = 120
"""Settles between full collections of the whole heap (120 x 30 s: once an hour)."""

THRESHOLDS = (10_000, 10, 100)
""":func:`gc.set_threshold` while the runtime runs (CPython's defaults: 700, 10, 10)."""


@dataclass(frozen=True)
class Settled:
    """What one settle did: collected unreachable objects, frozen count, full or not."""

    collected: int
    frozen: int
    full: bool
    seconds: float


class Heap:
    """The freeze/collect policy (see the module docstring); thread-safe."""

    def __init__(self, *, thaw_every: int = THAW_EVERY) -> None:
        self._thaw_every = thaw_every
        self._settles = 0
        self._freezes = 0
        self._lock = threading.Lock()
        self._restore: tuple[int, ...] | None = None

    @property
    def settles(self) -> int:
        """How many settles have run."""
        return self._settles

    def tune(self) -> None:
        """Use :data:`THRESHOLDS` until :meth:`release` (remembering the settings before)."""
        with self._lock:
            if self._restore is None:
                self._restore = gc.get_threshold()
            gc.set_threshold(*THRESHOLDS)

    def settle(self) -> Settled:
        """Collect what is not frozen (all, every ``thaw_every`` calls), freeze the rest."""
        with self._lock:
            self._settles += 1
            full = self._settles % self._thaw_every == 0
            started = time.monotonic()
            if full:
                gc.unfreeze()
            collected = gc.collect()
            gc.freeze()
            done = Settled(collected, gc.get_freeze_count(), full, time.monotonic() - started)
        log.debug("heap_settled", collected=done.collected, frozen=done.frozen,
                  full=done.full, seconds=round(done.seconds, 4))
        return done

    def freeze_survivors(self) -> None:
        """Freeze what is not frozen, right after the collector's own full collection.

        :meth:`settle` without its collection (the collector just did it); every
        ``thaw_every``-th call also unfreezes and collects the whole heap first, as the
        settles do (see the module docstring), for a long one-shot command.
        """
        with self._lock:
            self._freezes += 1
            if self._freezes % self._thaw_every == 0:
                gc.unfreeze()
                gc.collect()
            gc.freeze()

    @property
    def freezes(self) -> int:
        """How many times :meth:`freeze_survivors` has run."""
        return self._freezes

    def release(self) -> None:
        """Give every frozen object back to the collector, restore the thresholds."""
        with self._lock:
            gc.unfreeze()
            if self._restore is not None:
                gc.set_threshold(*self._restore)
                self._restore = None


@contextlib.contextmanager
def settling() -> Iterator[Heap]:
    """The same policy for a one-shot command (``sync``, ``diff``) while the block runs.

    Tuned at once and settled on a thread at once; after that by work done, not by the
    clock: each time CPython's own collector has collected the whole unfrozen heap (a
    full collection, which :data:`THRESHOLDS` make come every ~10 million net new
    objects), the thread freezes what survived it (:meth:`Heap.freeze_survivors`), which
    is what a settle would have left, without collecting again. Released when the block
    ends. Measured on ``gitops-ray sync`` of 2,000 RayClusters: 36 s of its 120 s were
    collections (30 s of them full ones), all of it on the CPU the API server needs.
    A settle every 30 s of wall time, as the controller's, made a slow run on a loaded
    machine pay for more of them than a quick one (``bench/README.md``, issue 41).
    """
    heap, due, stop = Heap(), threading.Event(), threading.Event()

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            due.set()  # no work in the collector's callback: the thread does it

    def loop() -> None:
        heap.settle()  # its own collection sets `due`: one freeze more, a cheap one
        while not stop.is_set():
            due.wait()
            if stop.is_set():
                return
            due.clear()
            heap.freeze_survivors()

    heap.tune()
    gc.callbacks.append(collected)
    thread = threading.Thread(target=loop, name="heap", daemon=True)
    thread.start()
    try:
        yield heap
    finally:
        gc.callbacks.remove(collected)
        stop.set()
        due.set()
        thread.join()
        heap.release()


__all__ = ["SETTLE_EVERY_S", "THAW_EVERY", "THRESHOLDS", "Heap", "Settled", "settling"]
