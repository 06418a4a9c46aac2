"""The runtime's one scheduler: interval polls and per-key one-shot deadlines, by APScheduler.

Why one APScheduler for both: the polls (an interval per app, the heap settle) were
APScheduler jobs already, and sync windows' cron schedules are APScheduler's
``CronTrigger`` (:mod:`gitops_ray.reconcile.windows`); a second, hand-written timer thread
beside it for the deadlines was two ways of doing one thing.

A *deadline* is "fire ``key`` at time T": a watch event asks for ``now + debounce``, a
backoff or a sync window that reopens for ``now + wait``. The **earliest request for a
key wins** and later ones are absorbed, so a burst of events becomes one refresh
(trailing edge, at most ``debounce`` after the first event) and a watch event during a
minute-long backoff still refreshes soon. Each is a ``DateTrigger`` job with ``id=key`` in
a job store of their own (so a key may also be a poll's job id).

Threading: every job runs on the scheduler's own thread (APScheduler's ``DebugExecutor``),
as jobs only hand work to the :class:`~gitops_ray.runtime.queue.WorkQueue` or settle the
heap (which holds the GIL anyway). A thread pool would only add a hand-off: a fired
deadline would look done (its job removed) before its work was queued, and a pool's job
could still run after shutdown. Inline, a deadline stays :meth:`~Scheduler.pending` until
its job has run (APScheduler removes it after, under its job-store lock, which a caller of
``schedule`` or ``pending`` waits for meanwhile), and :meth:`~Scheduler.stop` waits for
the job running, if any, then ends that thread (``shutdown(wait=False)``: no pool to
wait for): no job runs after it returns. So a job must be quick and must not call
:meth:`~Scheduler.schedule` (it runs holding APScheduler's lock; ``schedule`` takes its
own, then APScheduler's).

APScheduler keeps time by the wall clock (``datetime.now``), so a step of the node's clock
moves the deadlines as it moves the polls (the hand-written timers used a monotonic one);
the deadlines are computed from ``clock`` (the same by default). Tests pass a clock they
move and start the scheduler ``paused`` (nothing is due while paused), then
:meth:`~Scheduler.resume` it.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Callable

from apscheduler.executors.debug import DebugExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

DEADLINES = "deadlines"
"""The job store of the one-shot deadlines (polls are in APScheduler's ``default``)."""
WallClock = Callable[[], datetime.datetime]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Scheduler:
    """Interval jobs and per-key deadlines (``fire(key)``), on one APScheduler thread."""

    def __init__(self, fire: Callable[[str], None], *, clock: WallClock = utcnow) -> None:
        self._fire = fire
        self._clock = clock
        self._lock = threading.Lock()  # one deadline decision at a time (earliest wins)
        self._stopped = False
        self._aps = BackgroundScheduler(
            timezone=datetime.UTC, executors={"default": DebugExecutor()},
            jobstores={"default": MemoryJobStore(), DEADLINES: MemoryJobStore()},
            # However late the thread gets to a job, it runs (once): a deadline or a poll
            # skipped as "misfired" would be a refresh lost.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None})

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, paused: bool = False) -> None:
        self._aps.start(paused=paused)

    def resume(self) -> None:
        self._aps.resume()

    @property
    def running(self) -> bool:
        """Started and not stopped (``/healthz`` asks)."""
        return bool(self._aps.running)

    def stop(self) -> None:
        """Stop for good: waits for a running job, none runs after; later requests are dropped."""
        with self._lock:
            self._stopped = True
        if not self._aps.running:
            return
        # Paused first, then past the round of jobs in progress (reading the jobs waits
        # for APScheduler's job-store lock, which a round holds): a round cut short by
        # ``shutdown`` would fail removing the one-shot job it just ran.
        self._aps.pause()
        self._aps.get_jobs()
        self._aps.shutdown(wait=False)

    # -- deadlines -------------------------------------------------------------------

    def schedule(self, key: str, delay: float) -> None:
        """Fire ``key`` in ``delay`` seconds, unless it is already due earlier."""
        deadline = self._clock() + datetime.timedelta(seconds=max(0.0, delay))
        with self._lock:
            if self._stopped:
                return
            job = self._aps.get_job(key, DEADLINES)
            if job is not None and job.trigger.run_date <= deadline:
                return
            self._aps.add_job(self._fire, DateTrigger(deadline), args=[key], id=key,
                              jobstore=DEADLINES, replace_existing=True)

    def cancel(self, key: str) -> None:
        with contextlib.suppress(JobLookupError):  # none, or it fired meanwhile
            self._aps.remove_job(key, DEADLINES)

    def pending(self, key: str) -> float | None:
        """Seconds until ``key`` fires (0 once due, until its job has run), or ``None``."""
        job = self._aps.get_job(key, DEADLINES)
        if job is None:
            return None
        left: float = (job.trigger.run_date - self._clock()).total_seconds()
        return max(0.0, left)

    # -- intervals -------------------------------------------------------------------

    def every(self, job_id: str, seconds: float, run: Callable[[], None], *,
              jitter: float = 0.0, now: bool = False) -> None:
        """Run ``run`` every ``seconds`` (+ up to ``jitter``), at once too with ``now``."""
        trigger = IntervalTrigger(seconds=seconds, jitter=jitter or None)
        first = {"next_run_time": self._clock()} if now else {}
        with self._lock:
            if not self._stopped:
                self._aps.add_job(run, trigger, id=job_id, replace_existing=True, **first)

    def unevery(self, job_id: str) -> None:
        """Stop the interval job ``job_id`` (nothing if there is none)."""
        with contextlib.suppress(JobLookupError):
            self._aps.remove_job(job_id, "default")
