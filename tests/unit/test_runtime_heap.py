"""The heap settle: survivors frozen, cycles still collected, the whole heap once in a while."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gitops_ray.heap import THRESHOLDS, Heap, settling
from tests.harness.waiting import eventually


class Node:
    """A weak-referenceable object that can take part in a cycle."""

    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_settle_freezes_what_survived() -> None:
    kept = [Node() for _ in range(100)]
    done = Heap().settle()
    assert done.frozen > len(kept)
    assert gc.get_freeze_count() > len(kept)
    assert not done.full
    # the collector still frees new cycles:
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_a_cycle_made_before_a_settle_is_collected_by_it_not_frozen() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    done = Heap().settle()
    assert gone() is None
    assert done.collected >= 2


def test_a_cycle_among_frozen_objects_is_freed_by_the_periodic_full_settle() -> None:
    heap = Heap(thaw_every=3)
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    assert not heap.settle().full  # a and b are alive: frozen
    del a, b  # now garbage, but frozen: the collector does not see them
    assert not heap.settle().full
    gc.collect()
    assert gone() is not None
    assert heap.settle().full  # the third: unfreeze, collect all, freeze again
    assert gone() is None
    assert gc.get_freeze_count() > 0


def test_tune_sets_the_thresholds_and_release_restores_them() -> None:
    before = gc.get_threshold()
    heap = Heap()
    heap.tune()
    heap.tune()  # twice: still restores what was there first
    assert gc.get_threshold() == THRESHOLDS
    heap.settle()
    heap.release()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settling_tunes_settles_at_once_and_restores_when_the_block_ends() -> None:
    before = gc.get_threshold()
    with settling() as heap:
        assert gc.get_threshold() == THRESHOLDS
        assert isinstance(heap, Heap)
    assert heap.settles == 1  # at once on its thread; the block's end waits for it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settling_freezes_the_survivors_of_each_full_collection_and_frees_cycles() -> None:
    with settling() as heap:
        eventually(lambda: heap.freezes >= 1)  # the first settle's own collection's
        done = heap.freezes
        kept = [Node() for _ in range(100)]  # made after the first settle: not frozen
        a, b = Node(), Node()
        a.other, b.other = b, a
        cycle = weakref.ref(a)
        del a, b
        frozen = gc.get_freeze_count()
        gc.collect()  # the collector's own full collection, as its thresholds start one
        eventually(lambda: heap.freezes > done)
        assert cycle() is None  # the collection freed it; the freeze kept the rest
        assert gc.get_freeze_count() >= frozen + len(kept)
    assert heap.settles == 1  # no collection of its own after the first
    assert gc.get_freeze_count() == 0
