"""The per-app exclusive work queue (the delayed triggers: test_runtime_scheduling.py)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from gitops_ray.runtime.queue import UrgentUntilLanded, WorkQueue, across_clusters, relax
from gitops_ray.types import ResourceAction, ResourceKey


def test_one_app_never_runs_twice_at_once_and_no_trigger_is_lost() -> None:
    release = threading.Event()
    started = threading.Event()
    runs: Counter[str] = Counter()
    concurrent = {"now": 0, "max": 0}
    lock = threading.Lock()

    def work(app: str, reason: str) -> None:
        with lock:
            runs[reason] += 1
            concurrent["now"] += 1
            concurrent["max"] = max(concurrent["max"], concurrent["now"])
        started.set()
        release.wait(10)
        with lock:
            concurrent["now"] -= 1

    queue = WorkQueue(work, workers=4)
    queue.submit("a", "first")
    assert started.wait(10)
    for i in range(5):
        queue.submit("a", f"again-{i}")  # while running: remembered once
    release.set()
    assert _wait_idle(queue)
    queue.drain(10)
    assert runs == Counter({"first": 1, "again-0": 1})
    assert concurrent["max"] == 1


def _wait_idle(queue: WorkQueue) -> bool:
    pause = threading.Event()
    for _ in range(1000):
        if not queue.busy():
            return True
        pause.wait(0.01)
    return False


def test_slow_app_does_not_block_the_others() -> None:
    slow_release = threading.Event()
    fast_done = threading.Event()

    def work(app: str, reason: str) -> None:
        if app == "slow":
            slow_release.wait(10)
        else:
            fast_done.set()

    queue = WorkQueue(work, workers=2)
    queue.submit("slow", "poll")
    queue.submit("fast", "poll")
    try:
        assert fast_done.wait(10)
    finally:
        slow_release.set()
        queue.drain(10)


def test_a_crashing_refresh_does_not_kill_the_worker() -> None:
    done = threading.Event()

    def work(app: str, reason: str) -> None:
        if app == "bad":
            raise RuntimeError("boom")
        done.set()

    queue = WorkQueue(work, workers=1)
    queue.submit("bad", "poll")
    queue.submit("good", "poll")
    assert done.wait(10)
    queue.drain(10)


def test_drain_stops_accepting_work() -> None:
    ran: list[str] = []
    queue = WorkQueue(lambda app, reason: ran.append(app), workers=1)
    assert queue.drain(10)
    queue.submit("late", "poll")
    assert ran == [] and not queue.busy()


def gated(count: int) -> tuple[threading.Event, list[str], threading.Event,
                               Callable[[str, str], None]]:
    """(gate, order, done, work): ``work`` holds the app "blocker" until the gate opens and
    records ``app:reason`` of the others; ``done`` is set after ``count`` of them."""
    gate, done, order = threading.Event(), threading.Event(), []

    def work(app: str, reason: str) -> None:
        if app == "blocker":
            gate.wait(10)
            return
        order.append(f"{app}:{reason}")
        if len(order) == count:
            done.set()

    return gate, order, done, work


def test_urgent_requests_go_first() -> None:
    gate, order, done, work = gated(4)
    queue = WorkQueue(work, workers=1)
    queue.submit("blocker", "poll")  # the order below holds whether or not it started
    queue.submit("a", "poll")
    queue.submit("b", "poll")
    queue.submit("drifted", "due", urgent=True)
    queue.submit("b", "webhook", urgent=True)  # a waiting request is promoted
    queue.submit("c", "poll")
    gate.set()
    assert done.wait(10)
    assert order == ["drifted:due", "b:webhook", "a:poll", "c:poll"]
    queue.drain(10)



def test_normal_work_takes_one_worker_while_urgent_work_runs() -> None:
    """Three workers: an urgent refresh and a normal one run; a second normal one waits,
    so the third worker is still free for the next urgent refresh (the probe)."""
    release = threading.Event()
    started = {name: threading.Event() for name in ("drifted", "a", "b", "probe")}
    running_at_probe: list[set[str]] = []
    running: set[str] = set()
    lock = threading.Lock()

    def work(app: str, reason: str) -> None:
        with lock:
            running.add(app)
            if app == "probe":
                running_at_probe.append(set(running))
        started[app].set()
        if app != "probe":
            release.wait(10)
        with lock:
            running.discard(app)

    queue = WorkQueue(work, workers=3)
    try:
        queue.submit("drifted", "due", urgent=True)
        assert started["drifted"].wait(10)
        queue.submit("a", "poll")
        assert started["a"].wait(10)
        queue.submit("b", "poll")  # held back: "a" is the one normal refresh
        # (a bounded look for what must not happen: it cannot fail when the queue is right)
        assert not started["b"].wait(0.5)
        queue.submit("probe", "due", urgent=True)
        assert started["probe"].wait(10)  # the third worker was free
        assert running_at_probe == [{"drifted", "a", "probe"}]
        release.set()  # the urgent refreshes end: "b" runs
        assert started["b"].wait(10)
    finally:
        release.set()
        queue.drain(10)


def test_normal_work_waits_for_urgent_work_until_its_patience_runs_out() -> None:
    """A normal refresh queued while an urgent one runs does not share the CPU with it
    (patience far away here): it starts when the urgent refresh ends."""
    release = threading.Event()
    started = {name: threading.Event() for name in ("pushed", "other")}

    def work(app: str, reason: str) -> None:
        started[app].set()
        if app == "pushed":
            release.wait(10)

    queue = WorkQueue(work, workers=2, patience=3600)
    try:
        queue.submit("pushed", "webhook", urgent=True)
        assert started["pushed"].wait(10)
        queue.submit("other", "webhook")
        # (a bounded look for what must not happen: it cannot fail when the queue is right)
        assert not started["other"].wait(0.5)
        release.set()
        assert started["other"].wait(10)
    finally:
        release.set()
        queue.drain(10)


def test_patience_is_counted_from_when_the_request_was_queued() -> None:
    """With a clock moved past ``patience``, a normal refresh waiting beside urgent work
    starts on the next look at the queue (here: another request arriving)."""
    now = [0.0]
    release = threading.Event()
    started = {name: threading.Event() for name in ("pushed", "other", "late")}

    def work(app: str, reason: str) -> None:
        started[app].set()
        if app == "pushed":
            release.wait(10)

    queue = WorkQueue(work, workers=3, patience=5, clock=lambda: now[0])
    try:
        queue.submit("pushed", "webhook", urgent=True)
        assert started["pushed"].wait(10)
        queue.submit("other", "webhook")
        assert not started["other"].wait(0.5)
        now[0] = 5.0  # "other" has waited its patience; "late" has not
        queue.submit("late", "webhook")
        assert started["other"].wait(10)
        assert not started["late"].wait(0.5)  # one normal refresh beside urgent work
    finally:
        release.set()
        queue.drain(10)


def test_a_refresh_whose_changed_objects_landed_holds_nothing_back() -> None:
    """The urgent refresh re-asserting in-sync objects counts as normal work: with one
    worker for it, one for a normal refresh, the next normal one may start beside them."""
    changed = ResourceKey("ray.io", "RayCluster", "ns", "rc-1")
    landed, release = threading.Event(), threading.Event()
    started = {name: threading.Event() for name in ("a", "b")}

    def work(app: str, reason: str) -> None:
        if app == "pushed":
            listener = UrgentUntilLanded({changed})
            landed.wait(10)
            listener.done(changed, ResourceAction.CONFIGURED)  # the commit's object landed
        else:
            started[app].set()
        release.wait(10)

    queue = WorkQueue(work, workers=3)
    try:
        queue.submit("pushed", "webhook", urgent=True)
        queue.submit("a", "poll")
        assert started["a"].wait(10)
        queue.submit("b", "poll")
        assert not started["b"].wait(0.5)  # held back while "pushed" is urgent
        landed.set()
        assert started["b"].wait(10)
    finally:
        landed.set()
        release.set()
        queue.drain(10)


def test_relax_outside_a_refresh_does_nothing() -> None:
    UrgentUntilLanded(())  # the CLI: no queue, nothing to relax
    relax()


def test_standby_work_runs_last_and_alone() -> None:
    """Another replica's apps (``standby``) wait for all own work, even work submitted
    after them, and run one at a time; an urgent request for one still goes first."""
    gate = threading.Event()
    order: list[str] = []
    running: set[str] = set()
    overlapped: list[set[str]] = []
    lock = threading.Lock()
    done = threading.Event()

    def work(app: str, reason: str) -> None:
        if app == "blocker":
            gate.wait(10)
            return
        with lock:
            if running and app.startswith("other"):
                overlapped.append(set(running) | {app})
            running.add(app)
            order.append(f"{app}:{reason}")
        with lock:
            running.discard(app)
            if len(order) == 5:
                done.set()

    queue = WorkQueue(work, workers=3, standby=lambda app: app.startswith("other"))
    queue.submit("blocker", "poll")
    queue.submit("other-1", "webhook", urgent=True)  # urgent or not: standby
    queue.submit("other-2", "poll")
    queue.submit("own-1", "poll")
    queue.submit("own-2", "due", urgent=True)
    queue.submit("own-3", "poll")
    gate.set()
    try:
        assert done.wait(10)
    finally:
        queue.drain(10)
    assert set(order[:3]) == {"own-2:due", "own-1:poll", "own-3:poll"}  # 3 workers
    assert order[3:] == ["other-1:webhook", "other-2:poll"]
    assert overlapped == []


def test_urgent_standby_work_goes_before_other_standby_work_still_alone() -> None:
    """A silent owner's apps (urgent standby) overtake the standby backlog queued before
    them (start-up's preparing), after all own work and one at a time."""
    gate, order, done, work = gated(4)
    queue = WorkQueue(work, workers=3, standby=lambda app: app.startswith("other"))
    queue.submit("blocker", "poll")
    queue.submit("other-1", "app-added")
    queue.submit("other-2", "app-added")
    queue.submit("other-3", "owner-silent", urgent=True)
    queue.submit("own-1", "poll")
    gate.set()
    try:
        assert done.wait(10)
    finally:
        queue.drain(10)
    assert order == ["own-1:poll", "other-3:owner-silent", "other-1:app-added",
                     "other-2:app-added"]


def test_standby_request_is_promoted_when_the_app_becomes_ours() -> None:
    gate, order, done, work = gated(3)
    ours: set[str] = set()
    queue = WorkQueue(work, workers=1, standby=lambda app: app not in ours | {"blocker"})
    queue.submit("blocker", "poll")
    queue.submit("x", "webhook")  # standby: another replica's
    queue.submit("y", "webhook")
    ours.add("y")
    queue.submit("y", "shard-gained")  # gained: normal work now, ahead of "x"
    queue.submit("z", "poll")
    gate.set()
    try:
        assert done.wait(10)
    finally:
        queue.drain(10)
    assert order == ["y:shard-gained", "x:webhook", "z:poll"]  # "z" is another's too


def test_a_takeover_is_queued_round_robin_across_clusters() -> None:
    names = ["c0-a", "c0-b", "c0-c", "c1-a", "c2-a", "c2-b"]
    assert across_clusters(names, lambda n: n[:2]) == [
        "c0-a", "c1-a", "c2-a", "c0-b", "c2-b", "c0-c"]
    assert across_clusters(names, lambda n: "one") == names  # one cluster: as given
    assert across_clusters([], lambda n: n) == []
