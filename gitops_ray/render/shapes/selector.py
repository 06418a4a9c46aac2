"""Kubernetes set-based selectors (``a in (x,y)``, ``!b``, ``c!=d``), parsed and matched.

Patches pick their targets with the selector syntax people already know from
``kubectl -l``, but evaluated against a pod template's annotations *and* labels (the
Anyscale operator selects on annotations). The parser follows
``k8s.io/apimachinery/pkg/labels``: requirements are ANDed; ``notin`` and ``!=`` also
match when the key is absent; ``in``/``notin`` need a non-empty set; ``>``/``<`` compare
integers. Errors point at the column, so a typo in ``patches.yaml`` is found at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"\s*(?:(?P<op>!=|==|=|!|\(|\)|,|>|<)|(?P<word>[A-Za-z0-9._/-]+))")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INTEGER = re.compile(r"^-?\d+$")
_SET_OPS = ("in", "notin")


class SelectorError(ValueError):
    """A selector that does not parse; the message names the column."""


@dataclass(frozen=True)
class Requirement:
    """One ANDed term: ``key <operator> values``."""

    key: str
    operator: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.operator in ("exists", "!"):
            return present == (self.operator == "exists")
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if not present or not _INTEGER.match(value):
            return False
        bound = int(self.values[0])
        return int(value) > bound if self.operator == "gt" else int(value) < bound

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in _SET_OPS:
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        symbol = {"gt": ">", "lt": "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class Selector:
    """ANDed requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    """Parse ``text``; raise :class:`SelectorError` naming the column of the problem."""
    return _Parser(text).selector()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def selector(self) -> Selector:
        if not self.tokens:
            return Selector()
        requirements = [self.requirement()]
        while self.peek():
            self.expect(",")
            requirements.append(self.requirement())
        return Selector(tuple(requirements))

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.next()
            return Requirement(self.key(), "!")
        key = self.key()
        op = self.peek()
        if op in ("", ","):
            return Requirement(key, "exists")
        if op in ("=", "==", "!="):
            self.next()
            return Requirement(key, "!=" if op == "!=" else "=", (self.value(optional=True),))
        if op in (">", "<"):
            self.next()
            return Requirement(key, "gt" if op == ">" else "lt", (self.integer(),))
        if op in _SET_OPS:
            self.next()
            return Requirement(key, op, self.value_set())
        raise self.error(f"expected an operator (=, ==, !=, in, notin, >, <) after {key!r}")

    def value_set(self) -> tuple[str, ...]:
        self.expect("(")
        values = [self.value(optional=False)]
        while self.peek() == ",":
            self.next()
            values.append(self.value(optional=False))
        self.expect(")")
        return tuple(values)

    def key(self) -> str:
        word = self.word("a key")
        prefix, slash, name = word.rpartition("/")
        if (slash and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix))) or \
                len(name) > 63 or not _NAME.match(name):
            raise self.error(f"invalid key {word!r} (a label or annotation key like "
                             "'gitops-ray.io/market-type')", back=1)
        return word

    def value(self, *, optional: bool) -> str:
        if optional and self.peek() in ("", ","):
            return ""
        word = self.word("a value")
        if len(word) > 63 or not _NAME.match(word):
            raise self.error(f"invalid value {word!r}", back=1)
        return word

    def integer(self) -> str:
        word = self.word("an integer")
        if not _INTEGER.match(word):
            raise self.error(f"expected an integer, got {word!r}", back=1)
        return word

    def word(self, what: str) -> str:
        token = self.peek()
        if not token or token in "!=(),<>" or token in ("==", "!="):
            raise self.error(f"expected {what}")
        self.next()
        return token

    def expect(self, token: str) -> None:
        if self.peek() != token:
            raise self.error(f"expected {token!r}")
        self.next()

    def peek(self) -> str:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else ""

    def next(self) -> None:
        self.pos += 1

    def error(self, message: str, *, back: int = 0) -> SelectorError:
        index = self.pos - back
        column = self.tokens[index][1] + 1 if index < len(self.tokens) else len(self.text) + 1
        return SelectorError(f"selector {self.text!r}: {message} at column {column}")


def _tokenize(text: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            if text[pos:].strip() == "":
                break
            column = pos + len(text[pos:]) - len(text[pos:].lstrip()) + 1
            raise SelectorError(f"selector {text!r}: unexpected character at column {column}")
        kind = "op" if match["op"] else "word"
        tokens.append((match[kind], match.start(kind)))
        pos = match.end()
    return tokens
