"""The runtime's scheduler (APScheduler): per-key deadlines (debounce, backoff requeue) and polls.

The deadlines are computed from a clock the tests move; APScheduler's own loop keeps the
wall clock, so the fake clock here starts an hour in the past: every deadline is long
overdue by the wall clock, and runs as soon as the scheduler is resumed (which also shows
an overdue deadline is never dropped as "misfired"). While paused, nothing runs.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator

import pytest

from gitops_ray.runtime.scheduling import Scheduler
from tests.harness.waiting import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


class Fired:
    """The keys fired, in order."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, key: str) -> None:
        with self._lock:
            self.keys.append(key)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fired() -> Fired:
    return Fired()


@pytest.fixture
def paused(clock: FakeClock, fired: Fired) -> Iterator[Scheduler]:
    scheduler = Scheduler(fired, clock=clock)
    scheduler.start(paused=True)
    yield scheduler
    scheduler.stop()


def test_burst_of_events_becomes_one_refresh(paused: Scheduler, clock: FakeClock,
                                             fired: Fired) -> None:
    for _ in range(50):
        paused.schedule("app-a", 0.2)
        clock.advance(0.001)
    assert paused.pending("app-a") == pytest.approx(0.2 - 0.05)  # not due yet: the first
    paused.resume()
    eventually(lambda: paused.pending("app-a") is None, 10, "fired")
    paused.stop()  # joins the scheduler's thread: nothing more can fire
    assert fired.keys == ["app-a"]


def test_debounce_window_does_not_slide(paused: Scheduler, clock: FakeClock,
                                        fired: Fired) -> None:
    """Events keep arriving: the refresh still fires within the window of the first one."""
    paused.schedule("a", 0.2)
    clock.advance(0.15)
    paused.schedule("a", 0.2)
    assert paused.pending("a") == pytest.approx(0.05)
    clock.advance(0.06)
    assert paused.pending("a") == 0.0  # due
    paused.resume()
    eventually(lambda: fired.keys == ["a"], 10, "fired")


def test_earlier_request_wins_and_cancel(paused: Scheduler, clock: FakeClock,
                                         fired: Fired) -> None:
    paused.schedule("backoff", 60)
    paused.schedule("backoff", 0.2)  # a watch event while in backoff: refresh soon
    assert paused.pending("backoff") == pytest.approx(0.2)
    paused.schedule("backoff", 30)  # a later request is absorbed
    assert paused.pending("backoff") == pytest.approx(0.2)
    paused.schedule("other", 1)
    paused.cancel("other")
    paused.cancel("never-scheduled")
    assert paused.pending("other") is None
    clock.advance(5)
    paused.resume()
    eventually(lambda: paused.pending("backoff") is None, 10, "fired")
    paused.stop()
    assert fired.keys == ["backoff"]


def test_the_earliest_of_concurrent_requests_wins(paused: Scheduler) -> None:
    threads = [threading.Thread(target=paused.schedule, args=("app", 1 + i % 17))
               for i in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert paused.pending("app") == pytest.approx(1)


def test_timer_thread_fires() -> None:
    """On the real clock."""
    fired = threading.Event()
    scheduler = Scheduler(lambda key: fired.set() if key == "x" else None)
    scheduler.start()
    try:
        scheduler.schedule("x", 0.01)
        assert fired.wait(10)
    finally:
        scheduler.stop()


def test_nothing_runs_after_stop_and_later_requests_are_dropped(
        paused: Scheduler, fired: Fired) -> None:
    paused.schedule("due", 0)
    paused.every("poll", 86400, lambda: fired("poll"), now=True)
    paused.stop()
    assert not paused.running
    paused.schedule("late", 0)
    paused.every("late-poll", 1, lambda: fired("late-poll"), now=True)
    assert paused.pending("late") is None
    paused.stop()  # a second stop is a no-op
    assert fired.keys == []


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_stop_waits_for_the_running_job_and_does_not_hang() -> None:
    """A job running when stop is called ends before stop returns (and the scheduler's
    thread ends cleanly after it); a deadline an hour away and an interval job do not
    keep stop waiting."""
    started, stopping = threading.Event(), threading.Event()
    order: list[str] = []

    def fire(key: str) -> None:
        started.set()
        stopping.wait(10)
        order.append(f"{key} done")

    scheduler = Scheduler(fire)
    scheduler.start()
    scheduler.schedule("far", 3600)
    scheduler.every("poll", 3600, lambda: None)
    scheduler.schedule("slow", 0)
    assert started.wait(10)

    def stop() -> None:
        stopping.set()
        scheduler.stop()
        order.append("stopped")
    stopper = threading.Thread(target=stop)
    stopper.start()
    stopper.join(30)
    assert not stopper.is_alive()
    assert order == ["slow done", "stopped"]


def test_polls_run_at_once_when_asked_and_can_be_removed(paused: Scheduler,
                                                         fired: Fired) -> None:
    """A poll's id may be a deadline's key too: they are separate jobs."""
    paused.every("app", 86400, lambda: fired("poll app"), now=True)
    paused.every("other", 86400, lambda: fired("poll other"), now=True)
    paused.unevery("other")
    paused.unevery("never-polled")
    paused.schedule("app", 0)
    paused.resume()
    eventually(lambda: sorted(fired.keys) == ["app", "poll app"], 10, "both ran")
    assert paused.pending("app") is None
