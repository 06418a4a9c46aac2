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


# -- plain documents straight from the bounds scan's events -----------------------------------

NO_KEY = object()
"""The pending key of a mapping waiting for its next key (:attr:`Builder.stack`)."""
MAX_VALUES = 16_384
"""Constructed core scalars (ints, floats, bools, nulls) remembered by text, process-wide."""

_values: dict[tuple[str, str], Any] = {}


class Builder:
    """Plain documents built from the parse events the bounds scan walks anyway.

    Why: the scan (:mod:`gitops_ray.render.bounds`) parses every stream into events
    before anything is built, and the composer then parsed it again into nodes for the
    constructor: two parses per file, a tenth of a cold sync's CPU. The scan hands each
    event here too, so a plain stream is built in the same pass. "Plain" is what
    :func:`_build` builds itself, and less: mappings and sequences without tags, scalars
    without tags (plain ones resolved as :class:`FastLoader` resolves them, quoted ones
    strings), scalar keys other than ``<<`` and ``=``, an alias giving the very object
    of its anchor (as PyYAML's constructor does; ``yaml.dump`` writes one for every
    object a document holds twice). At anything else (a tag, a recursive, undefined or
    duplicate anchor, a non-scalar key) :attr:`gave_up` is set and the caller composes
    the stream as before, so results, errors and their messages stay PyYAML's.
    """

    __slots__ = ("_anchors", "_loader", "_open", "docs", "gave_up", "stack", "tags", "values")

    def __init__(self, loader: Any) -> None:
        self.docs: list[tuple[int, Any]] = []  # (line, body), as _documents gives them
        self.gave_up = False
        self._loader = loader  # a FastLoader: its remembering resolver, its constructors
        self.stack: list[list[Any]] = []  # [container, its pending key (NO_KEY), line, anchor]
        # For the scan's short path (bounds._walk_building): the texts whose tag this
        # loader's resolver has remembered, the core scalars constructed by (tag, text).
        # Empty when the loader resolves otherwise: then every scalar comes through here.
        self.tags: dict[str, str] = _resolved if type(loader).resolve is FastLoader.resolve \
            and not loader.yaml_path_resolvers else {}
        self.values: dict[tuple[str, str], Any] = _values
        self._anchors: dict[str, Any] = {}  # this document's, as the composer's
        self._open: set[str] = set()  # anchors of containers not ended yet

    def document(self) -> None:
        self._anchors.clear()

    def scalar(self, event: Any) -> None:
        if event.tag is not None:
            self.gave_up = True
            return
        value = event.value
        if event.implicit[0]:
            tag = self._loader.resolve(ScalarNode, value, (True, False))
            if tag != _STR:
                if tag not in _SCALAR_TAGS:  # a timestamp, a merge or value key, ...
                    self.gave_up = True
                    return
                value = self._constructed(tag, value)
        if event.anchor is not None and not self._anchor(event.anchor, value):
            return
        self._add(value, event.start_mark.line + 1)

    def alias(self, event: Any) -> None:
        name = event.anchor
        if name not in self._anchors or name in self._open:  # undefined, or recursive
            self.gave_up = True
            return
        value = self._anchors[name]
        stack = self.stack
        if type(value) in (dict, list) and stack and type(stack[-1][0]) is dict \
                and stack[-1][1] is NO_KEY:
            self.gave_up = True  # a mapping or sequence as a key
            return
        self._add(value, event.start_mark.line + 1)

    def _anchor(self, name: str, value: Any) -> bool:
        if name in self._anchors:  # the composer's "found duplicate anchor"
            self.gave_up = True
            return False
        self._anchors[name] = value
        return True

    def _constructed(self, tag: str, text: str) -> Any:
        """A core scalar's value: it depends on its tag and text only, and is immutable."""
        key = (tag, text)
        try:
            return _values[key]
        except KeyError:
            pass
        value = self._loader.yaml_constructors[tag](self._loader, ScalarNode(tag, text))
        if len(_values) >= MAX_VALUES:
            _values.clear()
        _values[key] = value
        return value

    def start(self, event: Any, container: Any) -> None:
        """A mapping (``{}``) or sequence (``[]``) starts."""
        if event.tag is not None:
            self.gave_up = True
            return
        stack = self.stack
        if stack and type(stack[-1][0]) is dict and stack[-1][1] is NO_KEY:
            self.gave_up = True  # a mapping or sequence as a key
            return
        anchor = event.anchor
        if anchor is not None:
            if not self._anchor(anchor, container):
                return
            self._open.add(anchor)
        stack.append([container, NO_KEY, event.start_mark.line + 1, anchor])

    def end(self) -> None:
        container, _, line, anchor = self.stack.pop()
        if anchor is not None:
            self._open.discard(anchor)
        self._add(container, line)

    def _add(self, value: Any, line: int) -> None:
        stack = self.stack
        if not stack:  # a document's root
            self.docs.append((line, value))
            return
        top = stack[-1]
        container = top[0]
        if type(container) is list:
            container.append(value)
        elif top[1] is NO_KEY:
            top[1] = value
        else:
            container[top[1]] = value
            top[1] = NO_KEY
