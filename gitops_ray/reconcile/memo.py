"""The pipeline's memo: per-object verdicts, and an app's whole last comparison.

Split from the pipeline (issue 35). Per-object diffs and health (server-side dry run
included) are kept by (desired content, ignore rules, live resourceVersion), as Argo CD
caches server-side diffs: an unchanged pair costs no API request and no normalisation.
Only the latest entry per object is kept: a long-running controller must not grow with
every resourceVersion it has ever seen. An app's last comparison is kept with the memo
entries it was made of (:class:`Reuse`; the pipeline's "A pass that changed nothing").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gitops_ray.diff import ResourceDiff
from gitops_ray.health import Health
from gitops_ray.reconcile.comparison import Comparison
from gitops_ray.reconcile.desired import DesiredObject
from gitops_ray.sync.records import applied_mark, markable
from gitops_ray.types import ResourceKey

Generation = Callable[[], "int | None"]
"""How many watch events the live source has heard; ``None``: it cannot say now."""


@dataclass(frozen=True)
class Memo:
    """One object's verdict, and what it was reached from."""

    version: tuple[str, str]  # (desired content + rules, live resourceVersion): the diff's
    signals: str  # and with what health read besides the object (Events, Pods): health's
    diff: ResourceDiff
    health: Health | None
    written: bool = False  # version's live object is what our apply of this content left
    proven: bool = False  # written, known by a no-op dry run; the record has no mark yet
    shared: str = ""  # the other app the live object's tracking id names, if any

    @property
    def settled(self) -> bool:
        """In sync, and live is exactly what our last apply of this content left."""
        return self.written and not self.diff.out_of_sync


@dataclass(frozen=True)
class Reuse:
    """An app's last comparison and what it was made of (see "A pass that changed nothing")."""

    inputs: tuple[object, ...]  # the app, SHA, render, settings, project, destination
    generation: tuple[int | None, int]  # (live source's events heard, memo writes) before
    memos: tuple[Memo, ...]
    comparison: Comparison


class Memos:
    """The memo entries (one per object) and reusable comparisons (one per app), locked."""

    def __init__(self, generation: Generation | None) -> None:
        self._lock = threading.Lock()
        self._memo: dict[ResourceKey, Memo] = {}
        self._writes = 0  # part of every reuse's generation: a memo entry replaced
        self._generation = generation
        self._reused: dict[str, Reuse] = {}  # per app name

    def get(self, key: ResourceKey) -> Memo | None:
        with self._lock:
            return self._memo.get(key)

    def recall(self, key: ResourceKey, version: tuple[str, str]) -> Memo | None:
        """The entry for ``key`` if it was reached from ``version``."""
        memo = self.get(key)
        return memo if memo is not None and memo.version == version else None

    def put(self, key: ResourceKey, memo: Memo) -> None:
        with self._lock:
            self._memo[key] = memo
            self._writes += 1

    def swap(self, key: ResourceKey, old: Memo, new: Memo) -> Memo:
        """``new`` in the memo in place of ``old``, unless another pass replaced it first."""
        with self._lock:
            if self._memo.get(key) is old:
                self._memo[key] = new
                self._writes += 1
        return new

    def generation_now(self) -> tuple[int | None, int]:
        """(watch events heard, memo writes) now; see "A pass that changed nothing"."""
        heard = self._generation() if self._generation is not None else None
        with self._lock:
            return heard, self._writes

    def forget(self, name: str) -> None:
        """Drop app ``name``'s reusable comparison.

        Its objects' entries stay until they are replaced (keyed by object, not app).
        """
        with self._lock:
            self._reused.pop(name, None)

    def last_reuse(self, name: str) -> Reuse | None:
        with self._lock:
            return self._reused.get(name)

    def keep_reuse(self, name: str, reuse: Reuse, desired: Sequence[DesiredObject]) -> None:
        """Keep ``reuse`` if every verdict in it is the memo's own entry (pipeline doc)."""
        with self._lock:
            if all(self._memo.get(o.key) is m for o, m in zip(desired, reuse.memos,
                                                                strict=True)):
                self._reused[name] = reuse
            else:
                self._reused.pop(name, None)


def same(memos: Sequence[Memo], last: Sequence[Memo]) -> bool:
    """Whether two comparisons were made of the very same memo entries."""
    return len(memos) == len(last) and all(a is b for a, b in zip(memos, last, strict=True))


def marked(marks: Mapping[str, str] | None, key: ResourceKey,
           version: tuple[str, str]) -> bool:
    """Whether the record says our apply of this content left this live version.

    The version is compared first: a stale mark costs no digest.
    """
    if not marks or not version[1] or not markable(key):
        return False
    mark = marks.get(str(key))
    return mark is not None and mark.partition("/")[0] == version[1] and \
        mark == applied_mark(*version)


def marked_content(marks: Mapping[str, str] | None, key: ResourceKey, content: str) -> bool:
    """Whether the record marks this content of ``key`` as the one we last applied.

    Whatever live version that apply left: if live moved since, someone else wrote it.
    """
    mark = (marks or {}).get(str(key))
    return mark is not None and mark.partition("/")[2] == \
        applied_mark(content, "").partition("/")[2]
