"""Selector-targeted RFC 6902 JSON Patches, the overlay language of pod shapes.

Platform teams adapt generated Ray pods to their clusters (node selectors, tolerations,
service accounts, sidecars) without touching every RayCluster. A patch set is a YAML list,
the format of the Anyscale operator's ``patches.yaml``::

    - kind: Pod                                   # every pod template inside Ray objects
      selector: "gitops-ray.io/market-type in (SPOT)"
      patch:
        - {op: add, path: /spec/nodeSelector/karpenter.sh~1capacity-type, value: spot}
    - kind: RayCluster                            # other kinds: top-level objects
      patch:
        - {op: add, path: /spec/upgradeStrategy/type, value: Recreate}

Semantics, all deliberate:

* ``add`` (and the targets of ``copy``/``move``) creates missing parent objects, as the
  Anyscale operator's ``EnsurePathExistsOnAdd`` does; a parent followed by ``-`` or ``0``
  becomes a list. Python ``jsonpatch`` would fail instead.
* Patches apply in list order and each one sees the result of the previous ones, so later
  patches override earlier ones; the selector is evaluated just before each patch, against
  the target's labels merged with its annotations (annotations win).
* ``replace``/``remove``/``move``/``copy`` of a missing path and a failed ``test`` are
  errors that name the patch file, the entry index, the operation index and the target.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import jsonpatch
import jsonpointer
import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.bounds import check_yaml
from gitops_ray.render.shapes.selector import Selector, SelectorError, parse_selector

POD = "Pod"
_OPS = {"add": ("value",), "replace": ("value",), "test": ("value",), "remove": (),
        "move": ("from",), "copy": ("from",)}
_ENTRY_KEYS = frozenset({"kind", "selector", "patch"})


@dataclass(frozen=True)
class Patch:
    """One entry: which objects (``kind``, ``selector``) and what to do (``ops``)."""

    kind: str
    ops: tuple[Mapping[str, Any], ...]
    selector: Selector = field(default_factory=Selector)
    origin: str = ""  # e.g. ".gitops-ray/patches.yaml patches[2]"

    def describe(self) -> str:
        selector = f", selector {str(self.selector)!r}" if self.selector.requirements else ""
        return f"{self.origin} (kind {self.kind}{selector})"


def load_patches(text: str, *, origin: str) -> list[Patch]:
    """Parse a ``patches.yaml`` document; every problem names ``origin`` and the entry.

    The document is a list of entries, or a mapping with only ``patches:`` holding it.
    """
    try:
        check_yaml(text, origin=origin)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RenderError(f"{origin}: invalid YAML: {e}") from e
    if isinstance(doc, dict) and set(doc) == {"patches"}:
        doc = doc["patches"]  # the Helm chart's ConfigMap: {patches: [...]}
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise RenderError(f"{origin}: expected a list of {{kind, selector, patch}} entries, "
                          f"got {type(doc).__name__}")
    return [parse_patch(entry, origin=f"{origin} patches[{i}]") for i, entry in enumerate(doc)]


def patches_from_configmap(configmap: Mapping[str, Any], *, origin: str = "") -> list[Patch]:
    """The patches held by a ``patches`` ConfigMap (``data.patches.yaml``)."""
    meta = configmap.get("metadata") or {}
    origin = origin or f"ConfigMap {meta.get('namespace', '')}/{meta.get('name', '')}"
    text = (configmap.get("data") or {}).get("patches.yaml")
    if text is None:
        raise RenderError(f"{origin}: has no data key patches.yaml")
    return load_patches(str(text), origin=origin)


def parse_patch(entry: object, *, origin: str) -> Patch:
    """Validate one ``{kind, selector, patch}`` entry."""
    if not isinstance(entry, dict):
        raise RenderError(f"{origin}: expected a mapping with kind and patch")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise RenderError(f"{origin}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                          "(allowed: kind, selector, patch)")
    kind, ops = entry.get("kind"), entry.get("patch")
    if not isinstance(kind, str) or not kind:
        raise RenderError(f"{origin}: 'kind' must be a kind such as Pod or RayCluster")
    if not isinstance(ops, list) or not ops:
        raise RenderError(f"{origin}: 'patch' must be a non-empty list of JSON Patch operations")
    for index, op in enumerate(ops):
        _check_op(op, f"{origin}.patch[{index}]")
    return Patch(kind, tuple(ops), _selector(entry.get("selector"), origin), origin)


def _selector(raw: object, origin: str) -> Selector:
    if raw is None:
        return Selector()
    if not isinstance(raw, str):
        raise RenderError(f"{origin}: 'selector' must be a string such as "
                          "\"gitops-ray.io/market-type in (SPOT)\"")
    try:
        return parse_selector(raw)
    except SelectorError as e:
        raise RenderError(f"{origin}: {e}") from e


def _check_op(op: object, where: str) -> None:
    if not isinstance(op, dict) or op.get("op") not in _OPS:
        raise RenderError(f"{where}: expected an operation with op one of "
                          f"{', '.join(sorted(_OPS))}")
    for key in ("path", *_OPS[op["op"]]):
        if key not in op:
            raise RenderError(f"{where}: {op['op']} needs {key!r}")
    for key in ("path", "from"):
        if key in op:
            _check_pointer(op[key], f"{where}.{key}")


def _check_pointer(pointer: object, where: str) -> None:
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise RenderError(f"{where}: {pointer!r} must be a JSON pointer below the root, "
                          "such as /spec/nodeSelector/example.com~1pool")
    try:
        jsonpointer.JsonPointer(pointer)
    except jsonpointer.JsonPointerException as e:
        raise RenderError(f"{where}: invalid JSON pointer {pointer!r}: {e}") from e


def selector_context(obj: Mapping[str, Any],
                     facts: Mapping[str, str] | None = None) -> dict[str, str]:
    """What selectors see: ``facts``, then labels, then annotations (later wins)."""
    meta = obj.get("metadata") or {}
    return {**(facts or {}), **(meta.get("labels") or {}), **(meta.get("annotations") or {})}


def apply_patches(target: dict[str, Any], patches: Iterable[Patch], *, kind: str, where: str,
                  facts: Mapping[str, str] | None = None) -> None:
    """Apply, in place and in order, the ``patches`` of ``kind`` whose selector matches.

    ``facts`` are extra selector inputs that are not written to ``target`` (e.g. the
    ``ray-node-type`` of a pod template that opted out of pod shapes).
    """
    for patch in patches:
        if patch.kind == kind and patch.selector.matches(selector_context(target, facts)):
            apply_ops(target, patch.ops, where=f"{patch.describe()} on {where}")


def apply_ops(target: dict[str, Any], ops: Sequence[Mapping[str, Any]], *, where: str) -> None:
    """Apply RFC 6902 ``ops`` in place; ``add`` creates missing parents."""
    for index, op in enumerate(ops):
        op_where = f"{where}: patch[{index}] {op.get('op')} {op.get('path')}"
        if op.get("op") in ("add", "copy", "move"):
            ensure_parents(target, str(op["path"]))
        try:
            jsonpatch.JsonPatch([copy.deepcopy(dict(op))]).apply(target, in_place=True)
        except jsonpatch.JsonPatchTestFailed as e:
            raise RenderError(f"{op_where}: test failed: {e}") from e
        except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as e:
            raise RenderError(f"{op_where}: path not found ({e})") from e


def ensure_parents(doc: Any, pointer: str) -> None:
    """Create the missing containers above ``pointer`` (``{}``, or ``[]`` before ``-``/``0``)."""
    parts = jsonpointer.JsonPointer(pointer).parts
    node = doc
    for part, following in pairwise(parts):
        if isinstance(node, dict):
            if node.get(part) is None:
                node[part] = [] if following in ("-", "0") else {}
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return
