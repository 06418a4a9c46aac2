"""The outbox (kube/outbox.py): order, bound, context, failures and its thread's life.

Sends here are plain functions; ``tests/integration/test_outbox.py`` sends real Events
through a fenced client.
"""

from __future__ import annotations

import contextvars
import threading

from gitops_ray.errors import GitOpsRayError
from gitops_ray.kube.outbox import Outbox
from tests.harness import eventually

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _gate(outbox: Outbox) -> threading.Event:
    """Block the outbox's thread on its first item until the returned event is set."""
    opened, started = threading.Event(), threading.Event()

    def wait() -> None:
        started.set()
        assert opened.wait(30), "the test never opened the gate"

    outbox.put(wait, "gate")
    assert started.wait(30)
    return opened


def test_items_are_sent_in_order_and_flush_waits_for_them() -> None:
    outbox, sent = Outbox(), []
    opened = _gate(outbox)
    for i in range(5):
        outbox.put(lambda i=i: sent.append(i), f"item {i}")
    assert not outbox.flush(0.05)  # the gate still holds them
    opened.set()
    assert outbox.flush(30)
    assert sent == [0, 1, 2, 3, 4]


def test_a_full_outbox_drops_the_newest_and_counts_it_without_waiting() -> None:
    drops: list[int] = []
    outbox, sent = Outbox(limit=2, on_drop=lambda: drops.append(1)), []
    opened = _gate(outbox)  # taken off the queue: the two places are free
    assert outbox.put(lambda: sent.append("a"), "a")
    assert outbox.put(lambda: sent.append("b"), "b")
    assert not outbox.put(lambda: sent.append("c"), "c")
    assert outbox.dropped == 1 and drops == [1]
    opened.set()
    assert outbox.flush(30)
    assert sent == ["a", "b"]


def test_each_item_runs_in_the_context_it_was_queued_from() -> None:
    """What the write fence relies on: the lease term the queuing sync captured."""
    outbox, seen = Outbox(), []
    for who in ("sync-1", "sync-2"):
        token = _who.set(who)
        outbox.put(lambda: seen.append(_who.get()), who)
        _who.reset(token)
    assert outbox.flush(30)
    assert seen == ["sync-1", "sync-2"]


def test_a_failing_item_is_counted_and_the_next_ones_are_still_sent() -> None:
    outbox, sent = Outbox(), []

    def refused() -> None:
        raise GitOpsRayError("write refused")

    def bug() -> None:
        raise RuntimeError("not ours")

    outbox.put(refused, "refused")
    outbox.put(bug, "bug")
    outbox.put(lambda: sent.append("after"), "after")
    assert outbox.flush(30)
    assert outbox.failed == 2 and sent == ["after"]


def test_the_thread_ends_when_idle_and_the_next_item_starts_another() -> None:
    outbox, sent = Outbox(idle=0.01, name="idle-outbox"), []
    outbox.put(lambda: sent.append(1), "first")
    eventually(lambda: not _sender_alive(), message="the idle thread ended")
    outbox.put(lambda: sent.append(2), "second")
    assert outbox.flush(30)
    assert sent == [1, 2]


def _sender_alive() -> bool:
    return any(t.name == "idle-outbox" and t.is_alive() for t in threading.enumerate())
