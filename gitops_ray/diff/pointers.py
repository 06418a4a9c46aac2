"""``jsonPointers`` ignore rules: RFC 6901 pointers removed as RFC 6902 ``remove`` ops.

Argo CD applies ``[{"op": "remove", "path": P}]`` with ``evanphx/json-patch`` v5 and
skips the rule without a word when the path is missing. We resolve the pointer to a
concrete path ourselves (so the deletion can be tracked for ``ignored_paths``) with the
same rules: ``~1`` is ``/`` and ``~0`` is ``~`` (in that order); an array index is a
decimal integer (json-patch v5 also accepts a negative index counting from the end); any
pointer that does not resolve to an existing value is a silent no-op.

A pointer that does not start with ``/`` is rejected at load: json-patch would silently
read it as something else, and removing the whole object (``""``) is never intended.
"""

from __future__ import annotations

import re
from typing import Any

import jsonpointer

from gitops_ray.diff.paths import Path

_INDEX = re.compile(r"[+-]?[0-9]+")


class PointerError(ValueError):
    """The pointer is malformed (reported as a configuration error)."""


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """The unescaped reference tokens of ``pointer``."""
    if not pointer.startswith("/"):
        raise PointerError(f"JSON pointer {pointer!r} must start with '/'")
    try:
        return tuple(jsonpointer.JsonPointer(pointer).parts)
    except jsonpointer.JsonPointerException as e:
        raise PointerError(f"JSON pointer {pointer!r}: {e}") from None


def resolve(doc: Any, tokens: tuple[str, ...]) -> Path | None:
    """The concrete path ``tokens`` names in ``doc``, or ``None`` if nothing is there."""
    path: list[str | int] = []
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                return None
            path.append(token)
            node = node[token]
        elif isinstance(node, list):
            index = _array_index(token, len(node))
            if index is None:
                return None
            path.append(index)
            node = node[index]
        else:
            return None
    return tuple(path)


def _array_index(token: str, size: int) -> int | None:
    if not _INDEX.fullmatch(token):
        return None
    index = int(token)
    index = index + size if index < 0 else index
    return index if 0 <= index < size else None
