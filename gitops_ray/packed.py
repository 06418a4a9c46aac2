"""Objects at rest, packed: what the controller keeps between passes, at a tenth the memory.

Why: a RayCluster decoded from JSON is a tree of about 1,500 Python objects, some 100 KB
for 20 KB of JSON. The controller keeps two per managed object for as long as it runs
(git's, rendered once per commit, and the live one from the watch), so at 1,000
RayClusters the decoded trees alone were over 200 MB. ``marshal`` packs one into about
12 KB (a string repeated inside the object is stored once), packs in tens of
microseconds and unpacks faster than ``json.loads``.

Callers unpack only where a whole object is needed: a diff the memo cannot answer, a
sync, the health of a new resourceVersion. A no-op pass reads keys, digests and
resourceVersions, which sit next to the blob unpacked. Every unpack is a private copy, so
the caller may change it. Argo CD's cluster cache makes the same trade: it keeps a little
of each live object and reads the rest when it needs it.

The controller's objects go on one :class:`Shelf` (:data:`SHELF`): at 10,000 RayClusters
made from a few templates, most of each object repeats another's, and the shelf stores a
repeated sub-structure once, losslessly.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from gitops_ray.types import Manifest


def pack(obj: Manifest) -> bytes:
    """``obj`` as bytes. Manifests hold JSON types; anything else goes through JSON first."""
    try:
        return marshal.dumps(obj)
    except ValueError:  # a dict subclass, a datetime: what the API server would get
        return marshal.dumps(json.loads(json.dumps(obj, default=str)))


def unpack(blob: bytes) -> Manifest:
    """A fresh copy of the packed object."""
    return cast(Manifest, marshal.loads(blob))


# -- shared sub-structures ------------------------------------------------------------------

Path = tuple[str | int, ...]  # keys and indexes from a piece's root down to a part
# marshal's format 2 has no back-references: from version 3 the bytes depend on which
# objects happen to be referenced twice, so equal content could hash differently
_CANONICAL = 2
MAX_SEEN = 1 << 16  # sub-structures remembered as seen once (8-byte ints, oldest forgotten)


class Piece:
    """A packed object whose shared sub-structures are other pieces.

    ``blob`` is ``marshal`` of ``(skeleton, paths)``: the object with each shared
    sub-structure replaced by ``None`` at ``paths[i]``, which is ``parts[i]``. Shared
    pieces are immutable and interned by content (:class:`Shelf`), so the same pod
    template in a thousand RayClusters is one piece.
    """

    __slots__ = ("__weakref__", "blob", "parts")

    def __init__(self, blob: bytes, parts: tuple[Piece, ...]) -> None:
        self.blob, self.parts = blob, parts

    def unpack(self) -> Manifest:
        """A fresh copy of the whole object."""
        return cast(Manifest, _thaw(self))

    @property
    def size(self) -> int:
        """Bytes held by this piece alone (shared parts not counted)."""
        return len(self.blob)


class Shelf:
    """Packs objects so that identical sub-structures are stored once, across objects.

    Why: thousands of RayClusters made from a few templates repeat the same pod
    templates, env lists, tolerations, probes and ``managedFields`` trees; packed one by
    one (:func:`pack`) every copy costs its bytes again. Here a dict or list of at least
    ``threshold`` packed bytes that was seen before (its content digest, bottom-up) is
    cut out as a shared :class:`Piece`, so an object costs only what it does not share.
    A sub-structure seen once stays inline: a piece costs a few hundred bytes of Python
    objects, which only pays when it is shared. Nothing is lost: :meth:`Piece.unpack`
    returns exactly the object packed.

    The shelf holds its pieces weakly: a piece lives as long as an object uses it, so
    replacing or dropping an object needs no bookkeeping. Thread-safe.
    """

    def __init__(self, *, threshold: int = 128, max_seen: int = MAX_SEEN) -> None:
        self.threshold, self.max_seen = threshold, max_seen
        self._pieces: weakref.WeakValueDictionary[bytes, Piece] = weakref.WeakValueDictionary()
        self._seen: dict[int, None] = {}
        self._lock = threading.Lock()
        self._whole = 0  # open :meth:`whole` blocks

    def pack(self, obj: Manifest) -> Piece:
        """``obj`` as a piece of its own, with its shared sub-structures cut out."""
        if self._whole:
            return _whole(obj)
        try:
            return self._root(obj)
        except (ValueError, TypeError):  # not JSON types (see pack): what the API server gets
            return self._root(json.loads(json.dumps(obj, default=str)))
        except RecursionError:  # nested deeper than we walk: packed whole, shared with none
            return Piece(marshal.dumps((obj, ())), ())

    def __len__(self) -> int:
        return len(self._pieces)

    @contextmanager
    def whole(self) -> Iterator[None]:
        """Pack every object whole inside the block: one ``marshal`` blob, nothing shared.

        For the one-shot commands (``gitops-ray sync``, ``diff``): they keep git's objects
        only until they exit, so the memory sharing saves is not worth its price. Cutting
        out shared parts digests every sub-structure (~2.5 ms per 18 KB RayCluster, 20x a
        whole blob), and an object of many parts unpacks ~4x slower than a whole one; a
        cold sync packed each object once and unpacked it four times (py-spy: ~15% of
        its CPU). Blocks may nest and overlap (threads): objects are packed whole while
        any is open. A piece packed either way unpacks the same.
        """
        with self._lock:
            self._whole += 1
        try:
            yield
        finally:
            with self._lock:
                self._whole -= 1

    def _root(self, obj: Manifest) -> Piece:
        _, _, skeleton, parts = self._cut(obj, root=True)
        return _piece(skeleton, parts)

    def _cut(self, node: Any, *, root: bool = False
             ) -> tuple[bytes, int, Any, list[tuple[Path, Piece]]]:
        """(content digest, packed size, skeleton, parts) of a dict or list ``node``.

        The digest covers content only (children by their digests), so equal content
        has one digest however it was cut. A returned skeleton of ``None`` with one part
        at ``()`` means the node itself is shared.
        """
        is_dict = isinstance(node, dict)
        items = list(node.items()) if is_dict else list(enumerate(node))
        digest_form: list[Any] = []
        skeleton: Any = {} if is_dict else []
        parts: list[tuple[Path, Piece]] = []
        size = 0
        for key, value in items:
            if isinstance(value, (dict, list)):
                digest, child_size, child, child_parts = self._cut(value)
                size += child_size
                digest_form.append((key, digest))
                parts.extend(((key, *path), piece) for path, piece in child_parts)
            elif isinstance(value, tuple):
                raise ValueError("a tuple is not a JSON type")
            else:
                child = value
                digest_form.append((key, value))
            if is_dict:
                skeleton[key] = child
            else:
                skeleton.append(child)
        blob = marshal.dumps(digest_form, _CANONICAL)
        digest = hashlib.blake2b(blob, digest_size=16).digest()
        size += len(blob)
        if not root and size >= self.threshold:
            shared = self._shared(digest, skeleton, parts)
            if shared is not None:
                return digest, size, None, [((), shared)]
        return digest, size, skeleton, parts

    def _shared(self, digest: bytes, skeleton: Any, parts: list[tuple[Path, Piece]]
                ) -> Piece | None:
        """The interned piece for ``digest`` if it is (now) shared, else ``None``."""
        with self._lock:
            piece = self._pieces.get(digest)
            if piece is not None:
                return piece
            seen = int.from_bytes(digest[:8], "big")
            if seen not in self._seen:
                self._seen[seen] = None
                if len(self._seen) > self.max_seen:
                    del self._seen[next(iter(self._seen))]
                return None
            piece = _piece(skeleton, parts)
            self._pieces[digest] = piece
            return piece


def _whole(obj: Manifest) -> Piece:
    """``obj`` as one blob with no parts (what :func:`_thaw` unpacks in one step).

    The same object :meth:`Shelf.pack` would keep: a tuple (YAML's ``!!omap``) or a
    value ``marshal`` refuses goes through JSON first, as there; and, as there, what
    the object held twice (a YAML alias) unpacks as two copies (format 2 has no
    back-references), so a caller changing one does not change the other.
    """
    try:
        if not _holds_tuple(obj):
            return Piece(marshal.dumps((obj, ()), _CANONICAL), ())
    except ValueError:
        pass
    return Piece(marshal.dumps((json.loads(json.dumps(obj, default=str)), ()), _CANONICAL),
                 ())


def _holds_tuple(obj: Any) -> bool:
    pending = [obj]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is dict:
            pending.extend(node.values())
        elif kind is list:
            pending.extend(node)
        elif isinstance(node, tuple):
            return True
        elif isinstance(node, (dict, list)):  # a subclass
            pending.extend(node.values() if isinstance(node, dict) else node)
    return False


def _piece(skeleton: Any, parts: list[tuple[Path, Piece]]) -> Piece:
    if parts and parts[0][0] == ():  # the node itself is shared
        return parts[0][1]
    blob = marshal.dumps((skeleton, tuple(path for path, _ in parts)))
    return Piece(blob, tuple(piece for _, piece in parts))


def _thaw(piece: Piece) -> Any:
    skeleton, paths = marshal.loads(piece.blob)
    for path, part in zip(paths, piece.parts, strict=True):
        node = skeleton
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = _thaw(part)
    return skeleton


SHELF = Shelf()
"""The controller's one shelf: git's objects (the render cache) and the watch cache's live
objects share their pieces, so a pod template git and the cluster agree on is stored once."""
