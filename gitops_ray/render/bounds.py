"""Measure YAML and JSON input before it is built, so a tiny file cannot blow up memory.

Why measure parse events instead of the composed node graph: composing a document costs
~300 bytes per node before anything can be counted, so a 2 MB flat list would already
cost a gigabyte. libyaml's event parser keeps no tree (and no recursion: a 200,000-deep
``[[[...`` parses flat), so one pass over the events measures a stream in constant
memory: nesting depth, alias uses, and the size every document *expands* to. Aliases
make a document a DAG; the expanded size of an anchored node is remembered when its
event ends (memoisation), and each alias adds that size to every enclosing node, so the
million-node expansion of a 462-byte alias bomb is known after reading 462 bytes.

Node counts are charged to the running app render (:func:`app_budget`, a context
variable, so worker threads rendering other apps do not share it): a directory of many
files, each under the bounds, cannot add up to more than ``MAX_NODES`` either.

JSON has no aliases; ``json.loads`` (C) is bounded by the text size, and the decoded
value is walked once for depth and node count.

Every bound lives in :mod:`gitops_ray.limits`; every violation is a
:class:`~gitops_ray.errors.LimitExceeded` naming the origin, the line and the bound,
never the document's values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitops_ray import limits
from gitops_ray.errors import LimitExceeded

_EventParser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # events only
_remaining: ContextVar[list[int] | None] = ContextVar("gitops_ray_node_budget", default=None)


@contextmanager
def app_budget() -> Iterator[None]:
    """Charge every text decoded inside the block to one budget of ``MAX_NODES``."""
    token = _remaining.set([limits.MAX_NODES])
    try:
        yield
    finally:
        _remaining.reset(token)


def _allowance() -> int:
    remaining = _remaining.get()
    return remaining[0] if remaining is not None else limits.MAX_NODES


def _charge(nodes: int) -> None:
    remaining = _remaining.get()
    if remaining is not None:
        remaining[0] -= nodes


def check_text_size(size: int, *, origin: str, limit: int = limits.MAX_FILE_BYTES) -> None:
    """Refuse text of ``size`` bytes over ``limit``."""
    if size > limit:
        raise LimitExceeded(f"{origin}: {_mib(size)} is over the limit of {_mib(limit)} "
                            "(gitops_ray.limits)")


@dataclass
class _Frame:
    anchor: str | None
    nodes: int = 1
    chars: int = 0


@dataclass
class _Scan:
    """Running totals of one stream; ``check`` raises at the first bound exceeded."""

    origin: str
    allowance: int = limits.MAX_NODES
    line: int = 0
    nodes: int = 0
    doc_nodes: int = 0
    aliases: int = 0
    alias_nodes: int = 0
    alias_chars: int = 0
    stack: list[_Frame] = field(default_factory=list)
    anchors: dict[str, tuple[int, int]] = field(default_factory=dict)

    def fail(self, what: str, limit: int) -> LimitExceeded:
        return LimitExceeded(f"{self.origin}:{self.line}: {what} is over the limit of "
                             f"{limit:,} (gitops_ray.limits); alias bombs and generated "
                             "input are refused before they are built")

    def add(self, nodes: int, chars: int) -> None:
        self.nodes += nodes
        self.doc_nodes += nodes
        if self.stack:
            self.stack[-1].nodes += nodes
            self.stack[-1].chars += chars
        if self.doc_nodes > limits.MAX_DOCUMENT_NODES:
            raise self.fail("the number of nodes in one document (aliases expanded)",
                            limits.MAX_DOCUMENT_NODES)
        if self.nodes > self.allowance:
            raise self.fail("the number of nodes (aliases expanded, counted over the app's "
                            "whole render)", limits.MAX_NODES)

    def alias(self, anchor: str) -> None:
        nodes, chars = self.anchors.get(anchor, (1, 0))  # unknown: the composer says so
        self.aliases += 1
        self.alias_nodes += nodes
        self.alias_chars += chars
        if self.aliases > limits.MAX_ALIASES:
            raise self.fail("the number of aliases", limits.MAX_ALIASES)
        if self.alias_nodes > limits.MAX_ALIAS_NODES:
            raise self.fail("the number of nodes added by expanding aliases",
                            limits.MAX_ALIAS_NODES)
        if self.alias_chars > limits.MAX_ALIAS_BYTES:
            raise self.fail("the text added by expanding aliases (bytes)",
                            limits.MAX_ALIAS_BYTES)
        self.add(nodes, chars)

    def scalar(self, anchor: str | None, value: str) -> None:
        if anchor:
            self.anchors[anchor] = (1, len(value))
        self.add(1, len(value))

    def start(self, anchor: str | None) -> None:
        if len(self.stack) >= limits.MAX_DEPTH:
            raise self.fail("the nesting depth", limits.MAX_DEPTH)
        self.add(1, 0)
        self.stack.append(_Frame(anchor))

    def end(self) -> None:
        frame = self.stack.pop()
        if self.stack:
            self.stack[-1].nodes += frame.nodes - 1  # its own node was counted at start
            self.stack[-1].chars += frame.chars
        if frame.anchor:
            self.anchors[frame.anchor] = (frame.nodes, frame.chars)

    def document(self) -> None:
        self.doc_nodes = 0
        self.anchors.clear()  # anchors are scoped to their document


def check_yaml(text: str, *, origin: str, limit: int = limits.MAX_FILE_BYTES) -> None:
    """Raise :class:`LimitExceeded` if ``text`` is over any YAML bound (see module docstring).

    Syntax errors are left to the loader that follows, which reports them with context.
    """
    check_text_size(len(text), origin=origin, limit=limit)
    if not any(c in text for c in "&*[{:-"):
        return  # a lone scalar: nothing nests, nothing aliases
    scan = _Scan(origin, _allowance())
    parser = _EventParser(text)
    try:
        _walk_events(parser, scan)
    except yaml.YAMLError:
        pass
    finally:
        parser.dispose()
    _charge(scan.nodes)


def _walk_events(parser: Any, scan: _Scan) -> None:
    while parser.check_event():
        event = parser.get_event()
        scan.line = event.start_mark.line + 1
        if isinstance(event, yaml.ScalarEvent):
            scan.scalar(event.anchor, event.value)
        elif isinstance(event, yaml.AliasEvent):
            scan.alias(str(event.anchor))
        elif isinstance(event, yaml.CollectionStartEvent):
            scan.start(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            scan.end()
        elif isinstance(event, yaml.DocumentStartEvent):
            scan.document()


def check_value(value: object, *, origin: str) -> None:
    """Depth and node bounds of an already decoded JSON value (JSON has no aliases)."""
    nodes, pending = 0, [(value, 1)]
    allowance = min(_allowance(), limits.MAX_DOCUMENT_NODES)
    while pending:
        item, depth = pending.pop()
        nodes += 1
        if nodes > allowance:
            raise LimitExceeded(f"{origin}: {_too_many(allowance)} (gitops_ray.limits)")
        children = item.values() if isinstance(item, dict) else \
            item if isinstance(item, list) else ()
        if children and depth >= limits.MAX_DEPTH:
            raise LimitExceeded(f"{origin}: the nesting depth is over the limit of "
                                f"{limits.MAX_DEPTH} (gitops_ray.limits)")
        pending += [(child, depth + 1) for child in children]
    _charge(nodes)


def _too_many(allowance: int) -> str:
    if allowance < limits.MAX_DOCUMENT_NODES:
        return f"the number of nodes is over the limit of {limits.MAX_NODES:,} counted " \
               "over the app's whole render"
    return f"the number of nodes is over the limit of {allowance:,} in one document"


def _mib(size: int) -> str:
    return f"{size / limits.MIB:.1f} MiB" if size >= limits.MIB else f"{size:,} bytes"
