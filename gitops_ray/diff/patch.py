"""The RFC 6902 JSON Patch from one JSON value to another, as Argo CD's library computes it.

Why not ``jsonpatch.make_patch``: it looks for moved list items, hashing every member of
every list that differs (a RayCluster's worker groups carry whole pod templates), which
cost ~7 ms per modified RayCluster and made the patch the largest part of ``diff -o json``.
Argo CD's patch library (``gomodules.xyz/jsonpatch/v2``, ``CreatePatch``) walks lists by
index instead: the items past the shorter list are removed (from the end) or added, the
rest compared in place. This gives the same operations as Argo CD's library for the
same pair, possibly in another order (an object's keys have none). The operations apply in
sequence: tail removals go first, highest index first. Equal subtrees are skipped by
:func:`~gitops_ray.diff.paths.json_equal`, which settles the common case in C.

Equality is JSON's, as :func:`gitops_ray.diff.paths.json_equal`: ``1`` equals ``1.0``,
but ``true`` is not ``1``.
"""

from __future__ import annotations

from typing import Any

from gitops_ray.diff.paths import json_equal

Operation = dict[str, Any]
_NUMBERS = (int, float)


def make_patch(source: Any, target: Any) -> list[Operation]:
    """The operations that turn ``source`` into ``target`` (values are not copied)."""
    ops: list[Operation] = []
    _values(source, target, "", ops)
    return ops


def escape(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901): ``~`` and ``/`` escaped."""
    return token.replace("~", "~0").replace("/", "~1") if "~" in token or "/" in token \
        else token


def _values(a: Any, b: Any, path: str, ops: list[Operation]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if not json_equal(a, b):  # C-speed for the equal subtrees most of a pair shares
            _objects(a, b, path, ops)
    elif isinstance(a, list) and isinstance(b, list):
        if not json_equal(a, b):
            _lists(a, b, path, ops)
    elif not _same_scalar(a, b):
        ops.append({"op": "replace", "path": path, "value": b})


def _objects(a: dict[str, Any], b: dict[str, Any], path: str, ops: list[Operation]) -> None:
    for key, value in b.items():
        child = f"{path}/{escape(key)}"
        if key not in a:
            ops.append({"op": "add", "path": child, "value": value})
        elif a[key] is not value:
            _values(a[key], value, child, ops)
    ops.extend({"op": "remove", "path": f"{path}/{escape(key)}"} for key in a if key not in b)


def _lists(a: list[Any], b: list[Any], path: str, ops: list[Operation]) -> None:
    common = min(len(a), len(b))
    ops.extend({"op": "remove", "path": f"{path}/{i}"} for i in range(len(a) - 1, common - 1, -1))
    ops.extend({"op": "add", "path": f"{path}/{i}", "value": b[i]} for i in range(common, len(b)))
    for i in range(common):
        if a[i] is not b[i]:
            _values(a[i], b[i], f"{path}/{i}", ops)


def _same_scalar(a: Any, b: Any) -> bool:
    """JSON equality of two values that are not both objects or both arrays."""
    if type(a) is type(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS) and a == b
