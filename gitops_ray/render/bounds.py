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
from gitops_ray.render.loader import NO_KEY, Builder, FastLoader

_STR = "tag:yaml.org,2002:str"
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


def charge_remembered(nodes: int) -> bool:
    """Charge ``nodes`` that an earlier scan of the same text counted, if the budget has them.

    For :mod:`gitops_ray.render.memo`: a text that passed its scan once fails it again only
    by its total (a scan's count only grows, and the per-document bounds do not depend on
    the budget), so a remembered count within the allowance is charged here, and ``False``
    (nothing charged) tells the caller to scan again, which raises the scan's own error.
    """
    if nodes > _allowance():
        return False
    _charge(nodes)
    return True


def check_text_size(size: int, *, origin: str, limit: int = limits.MAX_FILE_BYTES) -> None:
    """Refuse text of ``size`` bytes over ``limit``."""
    if size > limit:
        raise LimitExceeded(f"{origin}: {_mib(size)} is over the limit of {_mib(limit)} "
                            "(gitops_ray.limits)")


@dataclass
class _Scan:
    """Running totals of one stream: expanded nodes and scalar text, aliases, anchors.

    A subtree's expanded size is the growth of the running totals between its start and
    end events, so nothing is added up per parent; an anchor remembers its subtree's
    size, and an alias adds that size again (the DAG's memoisation).
    """

    origin: str
    allowance: int  # nodes left in the app's budget
    nodes: int = 0
    chars: int = 0
    aliases: int = 0
    alias_nodes: int = 0
    alias_chars: int = 0
    node_limit: int = 0  # min(allowance, this document's start + MAX_DOCUMENT_NODES)
    stack: list[tuple[str | None, int, int]] = field(default_factory=list)
    anchors: dict[str, tuple[int, int]] = field(default_factory=dict)

    def fail(self, event: Any, what: str, limit: int) -> LimitExceeded:
        return LimitExceeded(f"{self.origin}:{event.start_mark.line + 1}: {what} is over the "
                             f"limit of {limit:,} (gitops_ray.limits); alias bombs and "
                             "generated input are refused before they are built")

    def too_many_nodes(self, event: Any) -> LimitExceeded:
        if self.nodes > self.allowance:
            return self.fail(event, "the number of nodes (aliases expanded, counted over the "
                                    "app's whole render)", limits.MAX_NODES)
        return self.fail(event, "the number of nodes in one document (aliases expanded)",
                         limits.MAX_DOCUMENT_NODES)

    def alias(self, event: Any) -> None:
        nodes, chars = self.anchors.get(str(event.anchor), (1, 0))  # unknown: composer says
        self.aliases += 1
        self.alias_nodes += nodes
        self.alias_chars += chars
        self.nodes += nodes
        self.chars += chars
        for count, limit, what in (
                (self.aliases, limits.MAX_ALIASES, "the number of aliases"),
                (self.alias_nodes, limits.MAX_ALIAS_NODES,
                 "the number of nodes added by expanding aliases"),
                (self.alias_chars, limits.MAX_ALIAS_BYTES,
                 "the text added by expanding aliases (bytes)")):
            if count > limit:
                raise self.fail(event, what, limit)

    def start(self, event: Any) -> None:
        if len(self.stack) >= limits.MAX_DEPTH:
            raise self.fail(event, "the nesting depth", limits.MAX_DEPTH)
        self.stack.append((event.anchor, self.nodes, self.chars))
        self.nodes += 1

    def end(self) -> None:
        anchor, nodes, chars = self.stack.pop()
        if anchor:
            self.anchors[anchor] = (self.nodes - nodes, self.chars - chars)

    def document(self) -> None:
        self.node_limit = min(self.allowance, self.nodes + limits.MAX_DOCUMENT_NODES)
        self.anchors.clear()  # anchors are scoped to their document


def check_yaml(text: str, *, origin: str, limit: int = limits.MAX_FILE_BYTES) -> int:
    """Raise :class:`LimitExceeded` if ``text`` is over any YAML bound (see module docstring).

    Syntax errors are left to the loader that follows, which reports them with context.
    Returns the nodes charged to the app's budget.
    """
    check_text_size(len(text), origin=origin, limit=limit)
    scan = _Scan(origin, _allowance())
    parser = _EventParser(text)
    try:
        _walk_events(parser, scan)
    except yaml.YAMLError:
        pass
    finally:
        parser.dispose()
    _charge(scan.nodes)
    return scan.nodes


def check_and_build_yaml(text: str, *, origin: str, limit: int = limits.MAX_FILE_BYTES,
                         loader: type[FastLoader] = FastLoader
                         ) -> tuple[int, list[tuple[int, Any]] | None]:
    """:func:`check_yaml`, and the stream's documents built from the same events.

    ``(nodes, [(line, body), ...])``; the documents are ``None`` when the stream is not
    plain enough to be built from events (:class:`~gitops_ray.render.loader.Builder`,
    with ``loader``'s resolver and constructors) or does not parse: the caller composes
    it with ``loader`` as before, and reports its errors.
    """
    check_text_size(len(text), origin=origin, limit=limit)
    scan = _Scan(origin, _allowance())
    parser = loader(text)
    builder = Builder(parser)
    try:
        _walk_building(parser, scan, builder)
    except yaml.YAMLError:
        builder.gave_up = True
    finally:
        parser.dispose()
    _charge(scan.nodes)
    return scan.nodes, None if builder.gave_up else builder.docs


_STARTS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_ENDS = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _walk_events(parser: Any, scan: _Scan) -> None:
    """One pass over the events; scalars, by far the most of them, take the short path.

    On the short path the counts live in locals; they are written back to ``scan``
    before any other event (whose handling reads them), before a limit's error (whose
    message reads them) and when the stream ends or fails to parse.
    """
    get_event, scalar = parser.get_event, yaml.ScalarEvent
    nodes, chars, limit = scan.nodes, scan.chars, scan.node_limit
    try:
        while (event := get_event()) is not None:
            if type(event) is scalar and event.anchor is None:
                nodes += 1
                chars += len(event.value)
                if nodes > limit:
                    scan.nodes, scan.chars = nodes, chars
                    raise scan.too_many_nodes(event)
                continue
            scan.nodes, scan.chars = nodes, chars
            _measure(scan, event)
            if scan.nodes > scan.node_limit:
                raise scan.too_many_nodes(event)
            nodes, chars, limit = scan.nodes, scan.chars, scan.node_limit
    except yaml.YAMLError:
        scan.nodes, scan.chars = nodes, chars
        raise
    scan.nodes, scan.chars = nodes, chars


def _measure(scan: _Scan, event: Any) -> None:
    """Any event into ``scan``'s counts (the short paths inline the anchorless scalar)."""
    kind = type(event)
    if kind is yaml.ScalarEvent:
        scan.nodes += 1
        scan.chars += len(event.value)
        if event.anchor:
            scan.anchors[event.anchor] = (1, len(event.value))
    elif kind in _STARTS:
        scan.start(event)
    elif kind in _ENDS:
        scan.end()
    elif kind is yaml.AliasEvent:
        scan.alias(event)
    elif kind is yaml.DocumentStartEvent:
        scan.document()


def _walk_building(parser: Any, scan: _Scan, builder: Builder) -> None:
    """:func:`_walk_events`, each event handed to ``builder`` too until it gives up.

    Alike on purpose: the same counts, written back at the same moments. Its short path
    is a scalar :class:`Builder` would add to an open container as it is: untagged and
    unanchored, quoted (a string) or plain with a tag the loader's resolver remembered
    (a string, or a core scalar already constructed from that text). Every other event
    goes through :func:`_measure` and the builder's own methods, as before.
    """
    get_event, scalar = parser.get_event, yaml.ScalarEvent
    stack, tags, values = builder.stack, builder.tags, builder.values
    nodes, chars, limit = scan.nodes, scan.chars, scan.node_limit
    try:
        while (event := get_event()) is not None:
            if type(event) is scalar and stack and event.anchor is None and event.tag is None:
                value = _plain(event, tags, values)
                if value is not _SLOW:
                    nodes += 1
                    chars += len(event.value)
                    if nodes > limit:
                        scan.nodes, scan.chars = nodes, chars
                        raise scan.too_many_nodes(event)
                    top = stack[-1]
                    if type(top[0]) is list:
                        top[0].append(value)
                    elif top[1] is NO_KEY:
                        top[1] = value
                    else:
                        top[0][top[1]] = value
                        top[1] = NO_KEY
                    continue
            scan.nodes, scan.chars = nodes, chars
            _measure(scan, event)
            _build(builder, event)
            if scan.nodes > scan.node_limit:
                raise scan.too_many_nodes(event)
            if builder.gave_up:
                break
            nodes, chars, limit = scan.nodes, scan.chars, scan.node_limit
        else:
            scan.nodes, scan.chars = nodes, chars
            return
    except yaml.YAMLError:
        scan.nodes, scan.chars = nodes, chars
        raise
    _walk_events(parser, scan)  # the builder gave up: the rest is only measured


_SLOW = object()


def _plain(event: Any, tags: dict[str, str], values: dict[tuple[str, str], Any]) -> Any:
    """The value :class:`Builder` gives an untagged scalar, if known without it, or _SLOW."""
    if not event.implicit[0]:
        return event.value  # quoted: a string
    tag = tags.get(event.value)
    if tag == _STR:
        return event.value
    return values.get((tag, event.value), _SLOW) if tag is not None else _SLOW


def _build(builder: Builder, event: Any) -> None:
    """Any event into ``builder`` (the short path inlines the plain scalar's)."""
    kind = type(event)
    if kind is yaml.ScalarEvent:
        builder.scalar(event)
    elif kind is yaml.MappingStartEvent:
        builder.start(event, {})
    elif kind is yaml.SequenceStartEvent:
        builder.start(event, [])
    elif kind in _ENDS:
        builder.end()
    elif kind is yaml.AliasEvent:
        builder.alias(event)
    elif kind is yaml.DocumentStartEvent:
        builder.document()


def check_value(value: object, *, origin: str) -> int:
    """Depth and node bounds of an already decoded JSON value (JSON has no aliases).

    Returns the nodes charged to the app's budget.
    """
    nodes, pending = 0, [(value, 1)]
    allowance = min(_allowance(), limits.MAX_DOCUMENT_NODES)
    while pending:
        item, depth = pending.pop()
        nodes += 1
        if nodes > allowance:
            raise LimitExceeded(f"{origin}: {_too_many(allowance)} (gitops_ray.limits)")
        children = item.values() if isinstance(item, dict) else \
            item if isinstance(item, list) else None
        if children is not None and depth > limits.MAX_DEPTH:
            raise LimitExceeded(f"{origin}: the nesting depth is over the limit of "
                                f"{limits.MAX_DEPTH} (gitops_ray.limits)")
        pending += [(child, depth + 1) for child in children or ()]
    _charge(nodes)
    return nodes


def _too_many(allowance: int) -> str:
    if allowance < limits.MAX_DOCUMENT_NODES:
        return f"the number of nodes is over the limit of {limits.MAX_NODES:,} counted " \
               "over the app's whole render"
    return f"the number of nodes is over the limit of {allowance:,} in one document"


def _mib(size: int) -> str:
    return f"{size / limits.MIB:.1f} MiB" if size >= limits.MIB else f"{size:,} bytes"
