"""Concrete paths into decoded JSON, and jq's ``delpaths`` semantics on them.

Every kind of ignore rule (JSON pointer, jq path, managed fields, built-in Ray rule) ends
up as a list of concrete paths: dict keys and list indexes. Deleting them in one place
with jq's exact semantics is what lets ``RuleSet.normalize`` and ``RuleSet.ignored_paths``
agree: both run the same deletions, one of them also recording where each deleted value
sat in the *original* object (list indexes shift as earlier rules remove elements).

jq's ``delpaths`` (``jv_delpaths`` in libjq): paths are grouped by their first step; a
path that ends at a key deletes the whole key and makes deeper paths under it moot; list
indexes are deleted all at once (so ``del(.a[0], .a[1])`` removes two elements, and a
duplicate path removes one); a missing key, an out-of-range index or a ``null`` parent is
a no-op; an empty path makes the result ``null``.

Also here: a fast copy that breaks aliasing (YAML anchors share objects; an in-place
delete must not reach the other place), and JSON equality (``True != 1``).
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from typing import Any

from gitops_ray import jsonio

Path = tuple[str | int, ...]
"""Dict keys and list indexes from the document root."""


class PathError(Exception):
    """A path does not fit the document (jq raises the same runtime error)."""


def json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON with no shared sub-objects.

    Through JSON bytes (:func:`gitops_ray.jsonio.exact`), which copies aliased objects
    twice and is about twice as fast as ``marshal`` (format 2, no back-references either)
    and eight times as fast as ``copy.deepcopy``. What a JSON round trip would not give
    back as it was (a ``null``, a ``datetime`` from a YAML timestamp, an integer beyond
    64 bits, a dict subclass) goes through ``marshal``, and what marshal cannot write
    takes the slow path.
    """
    encoded = jsonio.exact(value)
    if encoded is not None:
        return jsonio.loads(encoded)
    try:
        return marshal.loads(marshal.dumps(value, 2))
    except ValueError:
        return _copy_tree(value)


def _copy_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_tree(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value, but booleans are not numbers.

    Python's ``==`` says ``True == 1``; it is still the fast first test, because strict
    equality implies it. Equal objects read from the same API server usually serialize to
    identical JSON (same key order, same types; :func:`gitops_ray.jsonio.exact`, else
    ``marshal``), which settles the common "Synced" case without a Python-level walk.
    """
    if a != b:
        return False
    encoded = jsonio.exact(a)
    if encoded is not None and encoded == jsonio.exact(b):
        return True
    try:
        if marshal.dumps(a, 2) == marshal.dumps(b, 2):
            return True
    except ValueError:
        pass
    return _strict_equal(a, b)


def _strict_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return (isinstance(b, dict) and len(a) == len(b)
                and all(k in b and _strict_equal(v, b[k]) for k, v in a.items()))
    if isinstance(a, list):
        return (isinstance(b, list) and len(a) == len(b)
                and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def type_name(value: Any) -> str:
    """Jq's name for the type of a value, as used in its error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class Tracker:
    """Maps positions in a document being edited in place back to the original.

    Only lists need it: a dict key never moves, a list element moves down when an
    earlier element is deleted. For each list that lost elements we keep the original
    index of every remaining element (and a reference to the list, so its ``id`` stays
    unique while we hold it).
    """

    def __init__(self) -> None:
        self.removed: list[Path] = []
        self._lists: dict[int, tuple[list[Any], list[int]]] = {}

    def original_index(self, items: list[Any], index: int) -> int:
        entry = self._lists.get(id(items))
        return entry[1][index] if entry is not None else index

    def deleted_indexes(self, items: list[Any], indexes: set[int]) -> None:
        entry = self._lists.get(id(items))
        positions = entry[1] if entry is not None else list(range(len(items)))
        self._lists[id(items)] = (items, [p for i, p in enumerate(positions)
                                          if i not in indexes])


def delete_paths(doc: Any, paths: Sequence[Path], tracker: Tracker | None = None) -> Any:
    """Delete ``paths`` from ``doc`` in place with jq's semantics; return the result.

    The result is ``doc`` itself, or ``None`` when a path is empty (``del(.)``). Raises
    :class:`PathError`, leaving ``doc`` untouched, when a path does not fit it. All
    deletions are planned against the unchanged document first (so indexes are the
    original ones), then carried out container by container.
    """
    if not paths:
        return doc
    unique = set(paths)
    if () in unique:
        return None
    nested = len({len(p) for p in unique}) > 1  # else no path can be another's ancestor
    planned: dict[int, tuple[Any, list[str | int], Path]] = {}
    for path in dict.fromkeys(paths):
        if nested and any(path[:i] in unique for i in range(1, len(path))):
            continue  # an ancestor goes as a whole
        found = _parent(doc, path, tracker)
        if found is not None:
            planned.setdefault(id(found[0]), (found[0], [], found[1]))[1].append(path[-1])
    for container, keys, _ in planned.values():
        _check_keys(container, keys)
    for container, keys, origin in planned.values():
        _delete_keys(container, keys, origin, tracker)
    return doc


def _parent(doc: Any, path: Path, tracker: Tracker | None) -> tuple[Any, Path] | None:
    """The container of ``path``'s last step and its original path; ``None`` if missing."""
    node, origin = doc, []
    for key in path[:-1]:
        child, step = _child(node, key)
        if child is None:
            return None
        if tracker is not None and isinstance(step, int):
            step = tracker.original_index(node, step)
        origin.append(step)
        node = child
    return node, tuple(origin)


def _child(node: Any, key: str | int) -> tuple[Any, str | int]:
    """``node[key]`` as a jq ``getpath`` step (missing is ``None``), and the key used.

    Negative list indexes count from the end, as in jq. A type mismatch is an error.
    """
    if node is None:
        return None, key
    if isinstance(node, dict) and isinstance(key, str):
        return node.get(key), key
    if isinstance(node, list) and isinstance(key, int):
        index = key + len(node) if key < 0 else key
        return (node[index] if 0 <= index < len(node) else None), index
    kind = "string" if isinstance(key, str) else "number"
    raise PathError(f"Cannot index {type_name(node)} with {kind}")


def _check_keys(node: Any, keys: list[str | int]) -> None:
    if isinstance(node, dict) and all(isinstance(k, str) for k in keys):
        return
    if isinstance(node, list) and all(isinstance(k, int) for k in keys):
        return
    raise PathError(f"Cannot delete fields from {type_name(node)}")


def _delete_keys(container: Any, keys: list[str | int], origin: Path,
                 tracker: Tracker | None) -> None:
    if isinstance(container, dict):
        for key in keys:
            if key in container:
                del container[key]
                if tracker is not None:
                    tracker.removed.append((*origin, key))
        return
    size = len(container)
    indexes = {k + size if k < 0 else k for k in keys if isinstance(k, int)}
    indexes = {i for i in indexes if 0 <= i < size}
    if tracker is not None:
        tracker.removed.extend((*origin, tracker.original_index(container, i))
                               for i in sorted(indexes))
        tracker.deleted_indexes(container, indexes)
    for index in sorted(indexes, reverse=True):
        del container[index]
