"""Parsed YAML/JSON remembered by content, so a render re-parses only the files that changed.

Why: the render cache (``reconcile.pipeline``) is keyed by the digest of everything an app
reads, so a one-line commit to one of an app's 100 RayCluster files re-renders the whole
directory. Parsing is most of that: ~14.5 ms per 18 KB RayCluster file (the bounds scan
included), ~1.5 s of CPU for the app, against ~1 ms to unpack a parsed object kept packed.
With this memo only the changed file is parsed again.

The key is the SHA-256 of the text and of what else changes the result (YAML or JSON, and
whether ``helm template``'s ``# Source:`` comments name the documents); the origin only
names things, so a hit is rebuilt with the caller's origin by ``render.documents``. What
is kept is the parse and nothing after it: decisions such as "valid YAML but not a
manifest, skipped" (``render.manifests``) are made again, with their notes and log lines,
on every render. Failures (syntax errors, bounds) are never kept, so they are raised again
with the same message; and a hit charges the node count its scan charged to the app's
budget (``render.bounds``), so ``limits.MAX_NODES`` over a whole render holds as without
the memo.

Bodies are kept packed on the controller's :data:`~gitops_ray.packed.SHELF`, where the
render cache keeps the desired objects made from them, so most of their memory is shared;
every hit unpacks fresh objects, since callers change them (tracking, namespaces, pod
shapes). A body holding tuples (YAML's ``!!omap``/``!!pairs``) is not kept: the shelf
would give it back with lists.

Bounded two ways, least recently used first out: :data:`MAX_ENTRIES` texts and
:data:`MAX_TEXT_CHARS` characters of the texts kept. Thread-safe: the controller renders
apps on several worker threads.
"""

from __future__ import annotations

import hashlib
import marshal
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from gitops_ray import limits
from gitops_ray.packed import SHELF, Piece
from gitops_ray.types import Manifest

MAX_ENTRIES = 20_000
"""Texts remembered. The fleet target is 10,000 RayClusters on one controller, each possibly
in a file of its own; twice that leaves room for the other files apps read (Applications,
Services, ConfigMaps) and for tool output, without evicting a fleet's files every cycle."""

MAX_TEXT_CHARS = 256 * limits.MIB
"""Characters of the texts remembered, counted as the text's length: what one entry costs
is its packed bodies, which are smaller than the text (an 18 KB RayCluster packs into
~12 KB, most of it shared with the render cache), and aliases cannot make them much larger
(``limits.MAX_ALIAS_BYTES``). 10,000 RayClusters of 18 KB are ~180 MB of text."""

Body = Piece | bytes | None  # a mapping or list on the shelf, any other value marshalled


@dataclass(frozen=True)
class StoredDoc:
    """One document of a remembered parse; ``source`` is its ``# Source:`` template or ''."""

    index: int
    line: int
    source: str
    body: Body


@dataclass(frozen=True)
class Parsed:
    """A remembered parse: its documents and the nodes its scan charged to the budget."""

    nodes: int
    docs: tuple[StoredDoc, ...]


def memo_key(kind: str, text: str) -> bytes:
    """The memo's key for ``text`` decoded as ``kind`` (e.g. ``yaml``, ``yaml+helm``, ``json``)."""
    digest = hashlib.sha256(kind.encode())
    digest.update(b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.digest()


def store(body: Any) -> Body:
    """``body`` packed: on the shared shelf if it is a mapping or list.

    Packed twice: the shelf shares a sub-structure from its second sighting on, and the
    render cache packs the objects made from this body only after it. Packed once, the
    memo's copy of a RayCluster's spec stays inline (~7.5 KB a file, ~75 MB at 10,000);
    twice, it is the piece the render cache's object uses too (~1.2 KB a file). The
    price is one more pack per parse (~3 ms a RayCluster, against ~14.5 ms to parse it).
    """
    if body is None:
        return None
    if isinstance(body, dict | list):
        SHELF.pack(cast(Manifest, body))  # marks its sub-structures seen
        return SHELF.pack(cast(Manifest, body))
    return marshal.dumps(body)


def fresh(body: Body) -> Any:
    """A new copy of a stored body."""
    if body is None:
        return None
    if isinstance(body, Piece):
        return body.unpack()
    return marshal.loads(body)


class ParseMemo:
    """An LRU of :class:`Parsed` by :func:`memo_key`, bounded by entries and text size."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES,
                 max_chars: int = MAX_TEXT_CHARS) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self.hits = self.misses = self.chars = 0
        self._entries: OrderedDict[bytes, tuple[Parsed, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._off = 0  # open :meth:`disabled` blocks

    def __len__(self) -> int:
        return len(self._entries)

    def keeps(self, chars: int) -> bool:
        """Whether a parse of a text of ``chars`` characters would be remembered.

        Asked before packing it (:func:`remembered`), which is what remembering costs.
        """
        return not self._off and self.max_entries > 0 and chars <= self.max_chars

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """Remember nothing inside the block (what is kept stays, and is not asked for).

        For the one-shot commands: ``gitops-ray sync`` renders each app once per revision
        (the pipeline's render cache hands the comparison after the sync the same
        render), so a remembered parse is never asked for again, and packing it twice
        (:func:`store`) cost ~40% of parsing a RayCluster file: a quarter of a cold
        sync's CPU went to the render, a tenth of it to this memo. Blocks may nest and
        overlap (threads): the memo is off while any is open.
        """
        with self._lock:
            self._off += 1
        try:
            yield
        finally:
            with self._lock:
                self._off -= 1

    def get(self, key: bytes) -> Parsed | None:
        """The remembered parse for ``key``, now the most recently used; ``None`` if none."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: bytes, parsed: Parsed, *, chars: int) -> None:
        """Remember ``parsed`` (from a text of ``chars`` characters), evicting the oldest."""
        if chars > self.max_chars:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            self.chars += chars - (old[1] if old else 0)
            self._entries[key] = (parsed, chars)
            while len(self._entries) > self.max_entries or self.chars > self.max_chars:
                _, (_, evicted) = self._entries.popitem(last=False)
                self.chars -= evicted

    def clear(self) -> None:
        """Forget every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.chars = 0


def remembered(nodes: int, docs: Sequence[tuple[int, int, str, Any]]) -> Parsed:
    """A :class:`Parsed` of ``(index, line, source, body)`` documents, bodies packed."""
    return Parsed(nodes, tuple(StoredDoc(index, line, source, store(body))
                               for index, line, source, body in docs))


PARSES = ParseMemo()
"""The process's one parse memo, used by ``render.documents``."""
