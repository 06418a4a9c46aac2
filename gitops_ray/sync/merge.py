"""Keep live values at ignored paths, element by element, when applying git's object.

This is what Argo CD's ``RespectIgnoreDifferences`` gets wrong for RayClusters: because
``workerGroupSpecs`` is an atomic list with no patch-merge key, Argo copies the *whole*
live list into the applied object and silently drops every git edit to worker groups
(argo-cd #9678, #11876). Here each ignored path is translated from list indexes to list
*keys* (``groupName`` for worker groups, ``name`` for containers and the like; the index
only when no key identifies the element), then looked up in git's object:

* the element exists in both: git's object gets the live value at that path (or loses the
  field when live has none), so the autoscaler's ``replicas``/``scaleStrategy`` survive
  while git's edits to the rest of the group land;
* the element is new in git: it keeps git's value (a new worker group starts as written);
* the element is gone from git: nothing to keep, the group is removed.

List order always stays git's; elements are never reordered.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from gitops_ray.types import Manifest

Path = tuple[str | int, ...]
KEY_FIELDS = ("groupName", "name", "type", "key", "mountPath", "devicePath",
              "containerPort", "topologyKey")
_MISSING = object()


def _list_key(items: Sequence[Any], index: int) -> tuple[str, Any] | None:
    """The ``(field, value)`` that identifies ``items[index]``, unique in the list."""
    element = items[index]
    if not isinstance(element, dict):
        return None
    for field in KEY_FIELDS:
        if field in element:
            value = element[field]
            if sum(1 for e in items if isinstance(e, dict) and e.get(field) == value) == 1:
                return field, value
    return None


def _find(items: Sequence[Any], step: Any) -> int | None:
    """Index in ``items`` of the element a keyed step names."""
    if isinstance(step, int):
        return step if step < len(items) else None
    field, value = step
    for index, element in enumerate(items):
        if isinstance(element, dict) and element.get(field) == value:
            return index
    return None


def keyed_path(doc: Any, path: Path) -> list[Any] | None:
    """``path`` with list indexes replaced by ``(key field, value)`` where possible."""
    steps: list[Any] = []
    node = doc
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return None
            steps.append(_list_key(node, step) or step)
            node = node[step]
        else:
            if not isinstance(node, dict):
                return None
            steps.append(step)
            node = node.get(step, _MISSING)
            if node is _MISSING and step is not path[-1]:
                return None
    return steps


def _resolve_parent(doc: Any, steps: list[Any]) -> tuple[Any, Any] | None:
    """The container holding the last step, and the concrete last step, in ``doc``."""
    node = doc
    for step in steps[:-1]:
        if isinstance(node, dict) and isinstance(step, str):
            if step not in node:
                return None
            node = node[step]
        elif isinstance(node, list) and not isinstance(step, str):
            index = _find(node, step)
            if index is None:
                return None
            node = node[index]
        else:
            return None
    last = steps[-1]
    if isinstance(node, list) and not isinstance(last, str):
        index = _find(node, last)
        return (node, index) if index is not None else None
    return (node, last) if isinstance(node, dict) and isinstance(last, str) else None


def _get(doc: Any, steps: list[Any]) -> Any:
    found = _resolve_parent(doc, steps)
    if found is None:
        return _MISSING
    container, last = found
    if isinstance(container, dict):
        return container.get(last, _MISSING)
    return container[last]


def keep_live_values(desired: Manifest, live: Manifest, *, live_paths: Iterable[Path],
                     desired_paths: Iterable[Path] = ()) -> Manifest:
    """A copy of ``desired`` holding ``live``'s values at the ignored paths.

    ``live_paths`` are the ignored paths found in ``live``; ``desired_paths`` those found
    in ``desired`` (git may set a field live does not have: then the field is dropped when
    its element exists live, and kept when the element is new).
    """
    out = copy.deepcopy(desired)
    seen: set[str] = set()
    for path in live_paths:
        steps = keyed_path(live, path)
        if steps is None:
            continue
        seen.add(repr(steps))
        _put(out, steps, _get(live, steps))
    for path in desired_paths:
        steps = keyed_path(desired, path)
        if steps is None or repr(steps) in seen or len(steps) < 2:
            continue
        if _resolve_parent(live, steps) is not None:  # the element exists live
            _put(out, steps, _get(live, steps))
    return out


def _put(doc: Any, steps: list[Any], value: Any) -> None:
    found = _resolve_parent(doc, steps)
    if found is None:
        return
    container, last = found
    if value is _MISSING:
        if isinstance(container, dict):
            container.pop(last, None)
        return
    container[last] = copy.deepcopy(value)
