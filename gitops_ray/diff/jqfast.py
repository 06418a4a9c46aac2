"""A pure-Python evaluator for the jq path expressions people actually write.

Nearly every ``jqPathExpressions`` entry in the wild is a plain path:
``.spec.workerGroupSpecs[].replicas``, ``.metadata.annotations["a/b"]``,
``.webhooks[]?.clientConfig.caBundle``, ``.spec.containers[] | select(.name == "x")``.
Running those through libjq costs a JSON round trip per object, and running them without
a deadline is unsafe in general. This module parses that subset once and evaluates it in
Python, with no copy and in time linear in the object; anything outside the subset
returns ``None`` from :func:`parse` and goes to libjq in a killable worker instead.

The subset (whitespace only around ``|``, ``,``, ``==`` and ``!=``)::

    program := stage ("|" stage)*          # "|" binds loosest: ".a, .b | .c"
    stage   := term ("," term)*            # is "(.a, .b) | .c"
    term       := ("." | "." NAME | "." STRING | "select(" cond ")") suffix*
    suffix  := "." NAME "?"? | "." STRING "?"? | "."? "[" (INT | STRING)? "]" "?"?
    cond    := "." suffix-without-[]* ("==" | "!=") (STRING | NUMBER | true | false | null)

Semantics are libjq 1.8's, which ``tests/unit/test_diff_jq_equivalence.py`` checks
vector by vector against the real library: ``.k`` on ``null`` yields ``null``, on a
non-object it is an error; ``[]`` iterates arrays and object values, and on anything else
(``null`` included) is an error; ``?`` suppresses the error of *its own step only* (jq
1.7+ ``INDEX_OPT``/``EACH_OPT``); ``==`` compares numbers by value and never equates
booleans with numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gitops_ray.diff.paths import Path, json_equal, type_name


class JqRuntimeError(Exception):
    """A runtime error, worded like libjq's (without the offending value)."""


@dataclass(frozen=True)
class Field:
    name: str
    optional: bool = False


@dataclass(frozen=True)
class Index:
    index: int
    optional: bool = False


@dataclass(frozen=True)
class Iterate:
    optional: bool = False


@dataclass(frozen=True)
class Select:
    path: tuple[Field | Index, ...]
    equal: bool
    literal: str | int | float | bool | None


Step = Field | Index | Iterate | Select
Term = tuple[Step, ...]
Program = tuple[tuple[Term, ...], ...]
"""Pipe stages (``|``), each a tuple of alternatives (``,``), each a sequence of steps."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_INT = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_KEYWORD_LITERALS: dict[str, bool | None] = {"true": True, "false": False, "null": None}
_WS = " \t\n\r"


class _Unsupported(Exception):
    """The expression is outside the fast subset (not an error: libjq will run it)."""


def parse(expression: str) -> Program | None:
    """The fast-path program for ``expression``, or ``None`` if it is outside the subset.

    Call only with expressions libjq compiled: this parser accepts nothing libjq
    rejects, but it does not report syntax errors itself.
    """
    try:
        parser = _Parser(expression)
        program = parser.program()
    except _Unsupported:
        return None
    return program


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def program(self) -> Program:
        stages = [self.stage()]
        while self._punct("|"):
            stages.append(self.stage())
        self._skip_ws()
        if self.pos != len(self.text):
            raise _Unsupported
        return tuple(stages)

    def stage(self) -> tuple[Term, ...]:
        terms = [tuple(self.term())]
        while self._punct(","):
            terms.append(tuple(self.term()))
        return tuple(terms)

    def term(self) -> list[Step]:
        self._skip_ws()
        if self.text.startswith("select(", self.pos):
            self.pos += len("select(")
            steps: list[Step] = [self.cond()]
            if not self._punct(")"):
                raise _Unsupported
        elif self._peek() == ".":
            steps = self.head()
        else:
            raise _Unsupported
        while (suffix := self.suffix(allow_iterate=True)) is not None:
            steps.append(suffix)
        return steps

    def head(self) -> list[Step]:
        """``.``, ``.name``, ``."str"`` (``.[`` is left to :meth:`suffix`)."""
        self.pos += 1
        char = self._peek()
        if char == ".":
            raise _Unsupported  # ".." is recursion
        if char == '"' or _NAME.match(self.text, self.pos):
            return [Field(self._key(), self._optional())]
        if char == "?":
            raise _Unsupported
        return []

    def suffix(self, *, allow_iterate: bool) -> Field | Index | Iterate | None:
        char = self._peek()
        if char == "." and self._peek(1) == "[":
            self.pos += 1
            char = "["
        if char == ".":
            self.pos += 1
            if self._peek() != '"' and not _NAME.match(self.text, self.pos):
                raise _Unsupported
            return Field(self._key(), self._optional())
        if char == "[":
            return self._bracket(allow_iterate=allow_iterate)
        return None

    def _bracket(self, *, allow_iterate: bool) -> Field | Index | Iterate:
        self.pos += 1
        if self._peek() == "]" and allow_iterate:
            self.pos += 1
            return Iterate(self._optional())
        if self._peek() == '"':
            step: Field | Index = Field(self._string())
        elif match := _INT.match(self.text, self.pos):
            self.pos = match.end()
            step = Index(int(match.group()))
        else:
            raise _Unsupported
        if self._peek() != "]":
            raise _Unsupported
        self.pos += 1
        optional = self._optional()
        return Field(step.name, optional) if isinstance(step, Field) \
            else Index(step.index, optional)

    def cond(self) -> Select:
        self._skip_ws()
        if self._peek() != ".":
            raise _Unsupported
        path: list[Field | Index] = []
        for step in self.head():
            assert isinstance(step, Field)
            path.append(step)
        while (suffix := self.suffix(allow_iterate=False)) is not None:
            assert not isinstance(suffix, Iterate)
            path.append(suffix)
        self._skip_ws()
        operator = self.text[self.pos:self.pos + 2]
        if operator not in ("==", "!="):
            raise _Unsupported
        self.pos += 2
        return Select(tuple(path), operator == "==", self._literal())

    def _literal(self) -> str | int | float | bool | None:
        self._skip_ws()
        if self._peek() == '"':
            return self._string()
        if match := _NUMBER.match(self.text, self.pos):
            self.pos = match.end()
            number = json.loads(match.group())
            assert isinstance(number, int | float)
            return number
        match = _NAME.match(self.text, self.pos)
        if match is None or match.group() not in _KEYWORD_LITERALS:
            raise _Unsupported
        self.pos = match.end()
        return _KEYWORD_LITERALS[match.group()]

    def _key(self) -> str:
        if self._peek() == '"':
            return self._string()
        match = _NAME.match(self.text, self.pos)
        assert match is not None
        self.pos = match.end()
        return match.group()

    def _string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise _Unsupported  # interpolation, or something stranger
        self.pos = match.end()
        value = json.loads(match.group())
        assert isinstance(value, str)
        return value

    def _optional(self) -> bool:
        if self._peek() == "?":
            self.pos += 1
            if self._peek() == "?":
                raise _Unsupported
            return True
        return False

    def _punct(self, char: str) -> bool:
        self._skip_ws()
        if self._peek() == char:
            self.pos += 1
            return True
        return False

    def _skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def _peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""


# -- evaluation -------------------------------------------------------------------------


def evaluate_paths(program: Program, doc: Any) -> list[Path]:
    """Every path the expression yields on ``doc``, as jq's ``path(expr)`` would.

    Raises :class:`JqRuntimeError` where libjq raises a runtime error. Evaluation goes
    step by step over the list of current paths; for chains of steps this yields the
    paths in the same order as jq's depth-first backtracking.
    """
    frontier: list[tuple[Path, Any]] = [((), doc)]
    for stage in program:
        frontier = [found for path, value in frontier for term in stage
                    for found in _term(term, path, value)]
    return [path for path, _ in frontier]


def _term(steps: Term, path: Path, value: Any) -> list[tuple[Path, Any]]:
    frontier = [(path, value)]
    for step in steps:
        if not frontier:
            break
        frontier = _step(step, frontier)
    return frontier


def _step(step: Step, frontier: list[tuple[Path, Any]]) -> list[tuple[Path, Any]]:
    if isinstance(step, Iterate):
        return [((*path, key), child) for path, value in frontier
                for key, child in _iterate(value, step.optional)]
    if isinstance(step, Select):
        return [(path, value) for path, value in frontier if _holds(step, value)]
    out = []
    for path, value in frontier:
        found = _index(value, step)
        if found is not None:
            out.append(((*path, found[0]), found[1]))
    return out


def _iterate(value: Any, optional: bool) -> Iterable[tuple[str | int, Any]]:
    if isinstance(value, list):
        return enumerate(value)
    if isinstance(value, dict):
        return value.items()
    if optional:
        return ()
    raise JqRuntimeError(f"Cannot iterate over {type_name(value)}")


def _index(value: Any, step: Field | Index) -> tuple[str | int, Any] | None:
    """``(key, child)`` for one index step, ``None`` when ``?`` swallowed an error."""
    key = step.name if isinstance(step, Field) else step.index
    if value is None:
        return key, None
    if isinstance(step, Field) and isinstance(value, dict):
        return key, value.get(step.name)
    if isinstance(step, Index) and isinstance(value, list):
        return key, value[step.index] if step.index < len(value) else None
    if step.optional:
        return None
    kind = f'string ("{key}")' if isinstance(key, str) else f"number ({key})"
    raise JqRuntimeError(f"Cannot index {type_name(value)} with {kind}")


def _holds(select: Select, value: Any) -> bool:
    """Whether ``select(cond)`` keeps ``value``; an optional miss yields nothing."""
    for step in select.path:
        found = _index(value, step)
        if found is None:
            return False
        value = found[1]
    return json_equal(value, select.literal) == select.equal
