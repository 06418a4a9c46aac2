"""PyYAML's safe loader with the same results in about half the Python work.

Why: decoding YAML was most of a cold ``gitops-ray sync``'s own CPU (py-spy, 1,000
RayClusters of 18 KB: the render ~45% of the CLI, of which libyaml's composer calling
PyYAML's Python resolver for every scalar and PyYAML's generic constructor most of it).
Two pure shortcuts, each falling back to PyYAML itself for anything they do not cover:

* **The resolver remembers** what tag a plain scalar resolves to. Without path resolvers
  (this loader has none) an implicit scalar's tag depends on its text only: PyYAML tries
  the implicit resolvers of its first character (regular expressions) and else gives
  ``str``. A manifest repeats the same keys and values (``name``, ``image``, ``"8"``)
  thousands of times; each is now resolved once. The memo is bounded
  (:data:`MAX_REMEMBERED` texts of at most :data:`MAX_REMEMBERED_CHARS` characters;
  full, it starts over).
* **The constructor builds plain documents directly**: mappings, sequences and the core
  scalar tags (``str``, ``int``, ``float``, ``bool``, ``null``), recursively (the depth
  is bounded by ``render.bounds`` first), with an alias giving the same object as its
  anchor, as PyYAML's does. Anything else (merge keys ``<<``, ``=`` keys, non-scalar
  keys, other tags such as ``!!omap``, ``!!set``, timestamps or an unknown tag, a
  recursive alias, a node whose kind does not fit its tag) makes it give the document
  to PyYAML's own constructor from the start, so results, errors and their messages are
  PyYAML's.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_REMEMBERED = 65_536
"""Scalar texts whose resolved tag is remembered, process-wide."""

MAX_REMEMBERED_CHARS = 128
"""Longer scalars are resolved every time (they rarely repeat)."""

_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_SCALAR_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                          "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"})
_SPECIAL_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_resolved: dict[str, str] = {}


class _Slow(Exception):
    """The document needs PyYAML's generic constructor."""


class FastLoader(_BaseLoader):  # type: ignore[misc]
    """``CSafeLoader`` (or ``SafeLoader``) with the two shortcuts of the module docstring."""

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is not ScalarNode or not implicit[0] or self.yaml_path_resolvers \
                or len(value) > MAX_REMEMBERED_CHARS:
            return str(super().resolve(kind, value, implicit))
        tag = _resolved.get(value)
        if tag is None:
            tag = str(super().resolve(kind, value, implicit))
            if len(_resolved) >= MAX_REMEMBERED:
                _resolved.clear()
            _resolved[value] = tag
        return tag

    def construct_document(self, node: Node) -> Any:
        try:
            data = _build(self, node, {}, set())
        except _Slow:
            return super().construct_document(node)
        self.constructed_objects: dict[Node, Any] = {}
        self.recursive_objects: dict[Node, None] = {}
        self.deep_construct = False
        return data


def _build(loader: Any, node: Node, built: dict[int, Any], active: set[int]) -> Any:
    """``node`` as PyYAML's safe constructor builds it, or :class:`_Slow`."""
    kind, tag = type(node), node.tag
    if kind is ScalarNode:
        if tag == _STR:
            return node.value
        if tag in _SCALAR_TAGS:
            return loader.yaml_constructors[tag](loader, node)
        raise _Slow
    ident = id(node)
    if ident in built:
        return built[ident]
    if ident in active:
        raise _Slow  # a recursive alias: PyYAML builds those in two steps
    active.add(ident)
    out: Any
    if kind is MappingNode and tag == _MAP:
        out = {}
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode or key_node.tag in _SPECIAL_KEYS:
                raise _Slow
            out[_build(loader, key_node, built, active)] = \
                _build(loader, value_node, built, active)
    elif kind is SequenceNode and tag == _SEQ:
        out = [_build(loader, child, built, active) for child in node.value]
    else:
        raise _Slow
    active.discard(ident)
    built[ident] = out
    return out
