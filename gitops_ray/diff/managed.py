"""``managedFieldsManagers`` ignore rules: drop the fields other writers own.

Each entry of ``live.metadata.managedFields`` names a manager and, in ``fieldsV1``, the
set of fields it owns, as a tree of path elements: ``f:<name>`` (a map field),
``k:<json>`` (the list item whose key fields equal the JSON object), ``v:<json>`` (the
set item equal to the JSON value), ``i:<n>`` (the n-th list item) and ``.`` (the element
itself). This module turns the owned fields of the named managers into concrete paths in
*any* object, the desired one included: keyed items are found by their key fields in
that object's own list, so they match even when the two lists are ordered differently.

Which paths: a field whose set has no children is a leaf and is removed; a list item the
manager owns as a whole (``.``) is removed whole; a map the manager merely co-owns
(``.`` plus children) is not removed, only its owned children are, because ``.`` on a
map records that the map exists, which every writer of a child field owns too.

Simplification versus Argo CD (``util/argo/managedfields``): Argo removes only the
intersection of those fields with the fields where live and desired differ (computed
with structured-merge-diff and the cluster's schema); we remove all of them from both
sides. A field two sides agree on compares equal whether it is removed or not, so the
sync status is the same; only the displayed diff is shorter. Atomic lists (such as
RayCluster ``workerGroupSpecs``) are a single leaf, in Argo as here, so naming the
autoscaler's manager hides the whole list: prefer the built-in Ray rules or jq paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from gitops_ray.diff.paths import Path, json_equal


def owned_trees(live: Mapping[str, Any] | None, managers: frozenset[str]) -> list[Any]:
    """The ``fieldsV1`` trees of ``managers`` in ``live``'s managed fields."""
    if live is None or not managers:
        return []
    entries = (live.get("metadata") or {}).get("managedFields") or []
    return [e["fieldsV1"] for e in entries
            if isinstance(e, dict) and e.get("manager") in managers
            and isinstance(e.get("fieldsV1"), dict)]


def owned_paths(doc: Any, trees: list[Any]) -> list[Path]:
    """Concrete paths in ``doc`` of the fields the trees own (see the module doc)."""
    out: list[Path] = []
    for tree in trees:
        out.extend(_walk(tree, doc, ()))
    return out


def _walk(tree: Mapping[str, Any], node: Any, path: Path) -> Iterator[Path]:
    for element, children in tree.items():
        if element == "." or not isinstance(children, dict):
            continue
        found = locate(element, node)
        if found is None:
            continue
        key, child = found
        whole = not set(children) - {"."} or ("." in children and isinstance(key, int))
        if whole:
            yield (*path, key)
        else:
            yield from _walk(children, child, (*path, key))


def locate(element: str, node: Any) -> tuple[str | int, Any] | None:
    """The key and value in ``node`` that one fieldsV1 path element names."""
    prefix, _, rest = element.partition(":")
    if prefix == "f":
        return (rest, node[rest]) if isinstance(node, dict) and rest in node else None
    if not isinstance(node, list) or prefix not in ("i", "k", "v"):
        return None
    if prefix == "i":
        index = int(rest) if rest.isdigit() else -1
        return (index, node[index]) if 0 <= index < len(node) else None
    try:
        wanted = json.loads(rest)
    except ValueError:
        return None
    matches = _has_keys if prefix == "k" else json_equal
    return next(((i, item) for i, item in enumerate(node) if matches(item, wanted)), None)


def _has_keys(item: Any, keys: Any) -> bool:
    return isinstance(item, dict) and isinstance(keys, dict) and all(
        k in item and json_equal(item[k], v) for k, v in keys.items())
