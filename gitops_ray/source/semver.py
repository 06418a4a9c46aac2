"""Semantic versions and version constraints as Argo CD reads a chart's ``targetRevision``.

Argo CD resolves ``targetRevision`` of a Helm or OCI chart with Masterminds/semver v3
(``util/helm/index.go`` ``Entries.MaxVersion``): every entry whose version parses and
satisfies the constraint is a candidate, the greatest wins, and versions that do not parse
are skipped. So this module follows Masterminds' rules, not Python's ``packaging``:

* a version is ``v?MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]``, missing parts are 0;
  build metadata never orders;
* constraints are ``||``-separated alternatives of comma- or space-separated atoms; an
  atom is an operator (``=``, ``!=``, ``>``, ``<``, ``>=``, ``<=``/``=<``, ``~``/``~>``,
  ``^``, none) and a version that may end in wildcards (``x``, ``X``, ``*``), or a hyphen
  range ``1.2 - 1.4.5``;
* a prerelease satisfies an atom only if that atom's own version has a prerelease
  (Masterminds issue 21: ``>=1.0`` does not pick ``2.0.0-rc.1``).

Pure functions only; :class:`ConstraintError` for text that is no constraint.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import total_ordering

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?"
                      r"(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")
_ATOM = re.compile(r"(!=|>=|=>|<=|=<|~>|[=<>~^])?\s*(v?[0-9xX*][0-9A-Za-z.*+-]*)")
_WILD = ("x", "X", "*")
_HYPHEN = re.compile(r"\s+-\s+")
MAX_CONSTRAINT = 256
"""Characters of a constraint read at most (an Application field, so untrusted)."""


class ConstraintError(ValueError):
    """The text is neither a version nor a version constraint."""


@total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version, ordered as Masterminds orders them."""

    major: int
    minor: int
    patch: int
    prerelease: str = ""
    original: str = ""

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """The version ``text`` spells (Masterminds' ``NewVersion``), or ``None``."""
        m = _VERSION.match(text.strip())
        if m is None:
            return None
        major, minor, patch, pre, _build = m.groups()
        return cls(int(major), int(minor or 0), int(patch or 0), pre or "", text)

    def _core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        if self._core() != other._core():
            return self._core() < other._core()
        return _pre_less(self.prerelease, other.prerelease)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._core() == other._core() and self.prerelease == other.prerelease

    def __hash__(self) -> int:
        return hash((self._core(), self.prerelease))


def _pre_less(a: str, b: str) -> bool:
    """SemVer 2.0 §11: no prerelease ranks above any; identifiers compare one by one."""
    if a == b:
        return False
    if not a or not b:
        return bool(a)
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return int(x) < int(y)
        if x.isdigit() != y.isdigit():
            return x.isdigit()  # numeric identifiers rank lower
        return x < y
    return len(a.split(".")) < len(b.split("."))


Check = Callable[[Version], bool]


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint: alternatives (``||``) of atoms that must all hold."""

    text: str
    alternatives: tuple[tuple[Check, ...], ...]

    def allows(self, version: Version) -> bool:
        return any(all(check(version) for check in atoms) for atoms in self.alternatives)


def parse_constraint(text: str) -> Constraint:
    """Masterminds' ``NewConstraint``; raises :class:`ConstraintError`."""
    if len(text) > MAX_CONSTRAINT:
        raise ConstraintError(f"version constraint longer than {MAX_CONSTRAINT} characters")
    groups = []
    for raw in text.split("||"):
        group = _HYPHEN.sub(" - ", raw.strip())
        if not group:
            raise ConstraintError(f"{text!r} is not a version constraint (empty alternative)")
        groups.append(tuple(_group(group, text)))
    return Constraint(text, tuple(groups))


def _group(group: str, text: str) -> Iterable[Check]:
    if " - " in group:
        low, _, high = group.partition(" - ")
        yield from (_atom(">=", low.strip(), text), _atom("<=", high.strip(), text))
        return
    rest = group.replace(",", " ")
    at = 0
    for m in _ATOM.finditer(rest):
        if rest[at:m.start()].strip():
            raise ConstraintError(f"{text!r} is not a version constraint "
                                  f"(at {rest[at:m.start()].strip()!r})")
        at = m.end()
        yield _atom(m.group(1) or "=", m.group(2), text)
    if rest[at:].strip() or at == 0:
        raise ConstraintError(f"{text!r} is not a version constraint")


def _atom(op: str, spelled: str, text: str) -> Check:
    op = {"=>": ">=", "=<": "<=", "~>": "~"}.get(op, op)
    bound, wild = _bound(spelled, text)
    return _CHECKS[op](bound, wild)


def _bound(spelled: str, text: str) -> tuple[Version, int]:
    """The atom's version with wildcards as 0, and how many leading parts are fixed (0-3)."""
    core, sep, rest = spelled.lstrip("v").partition("-")
    parts = core.split("+")[0].split(".")
    if len(parts) > 3:
        raise ConstraintError(f"{text!r}: {spelled!r} has more than three version parts")
    fixed = next((i for i, p in enumerate(parts) if p in _WILD), len(parts))
    numbers = [p for p in parts[:fixed]]
    if not all(p.isdigit() for p in numbers) or \
            any(p not in _WILD for p in parts[fixed:]):
        raise ConstraintError(f"{text!r}: {spelled!r} is not a version")
    values = [int(p) for p in numbers] + [0] * (3 - len(numbers))
    pre = rest.split("+")[0] if sep and fixed == 3 else ""
    return Version(values[0], values[1], values[2], pre, spelled), fixed


def _next(bound: Version, fixed: int) -> Version:
    """The first version above every one that shares ``bound``'s ``fixed`` leading parts."""
    if fixed == 0:
        return Version(1 << 62, 0, 0)
    if fixed == 1:
        return Version(bound.major + 1, 0, 0)
    if fixed == 2:
        return Version(bound.major, bound.minor + 1, 0)
    return Version(bound.major, bound.minor, bound.patch + 1)


def _pre_ok(bound: Version, version: Version) -> bool:
    """A prerelease is only ever matched by an atom that names one (issue 21)."""
    return not version.prerelease or bool(bound.prerelease)


def _equal(bound: Version, fixed: int) -> Check:
    if fixed == 3:
        return lambda v: _pre_ok(bound, v) and v == bound
    top = _next(bound, fixed)
    return lambda v: _pre_ok(bound, v) and _base(bound) <= v < top


def _base(bound: Version) -> Version:
    return Version(bound.major, bound.minor, bound.patch, bound.prerelease)


def _not_equal(bound: Version, fixed: int) -> Check:
    same = _equal(Version(bound.major, bound.minor, bound.patch, bound.prerelease), fixed)
    return lambda v: _pre_ok(bound, v) and not same(v)


def _greater(bound: Version, fixed: int) -> Check:
    floor = _base(bound) if fixed == 3 else _next(bound, fixed)
    return (lambda v: _pre_ok(bound, v) and v > floor) if fixed == 3 else \
        (lambda v: _pre_ok(bound, v) and v >= floor)


def _at_least(bound: Version, fixed: int) -> Check:
    del fixed
    return lambda v: _pre_ok(bound, v) and v >= _base(bound)


def _less(bound: Version, fixed: int) -> Check:
    del fixed
    return lambda v: _pre_ok(bound, v) and v < _base(bound)


def _at_most(bound: Version, fixed: int) -> Check:
    if fixed == 3:
        return lambda v: _pre_ok(bound, v) and v <= _base(bound)
    top = _next(bound, fixed)
    return lambda v: _pre_ok(bound, v) and v < top


def _tilde(bound: Version, fixed: int) -> Check:
    """``~1.2.3``: >=1.2.3 <1.3.0; ``~1``: >=1.0.0 <2.0.0."""
    top = _next(bound, 1 if fixed <= 1 else 2)
    return lambda v: _pre_ok(bound, v) and _base(bound) <= v < top


def _caret(bound: Version, fixed: int) -> Check:
    """``^1.2.3``: <2.0.0; ``^0.2.3``: <0.3.0; ``^0.0.3``: <0.0.4; ``^0``: <1.0.0."""
    if bound.major > 0 or fixed <= 1:
        top = _next(bound, 1)
    elif bound.minor > 0 or fixed == 2:
        top = _next(bound, 2)
    else:
        top = _next(bound, 3)
    return lambda v: _pre_ok(bound, v) and _base(bound) <= v < top


_CHECKS: dict[str, Callable[[Version, int], Check]] = {
    "=": _equal, "!=": _not_equal, ">": _greater, ">=": _at_least, "<": _less,
    "<=": _at_most, "~": _tilde, "^": _caret,
}


def best_match(versions: Iterable[str], constraint: Constraint) -> str | None:
    """The greatest of ``versions`` (as spelled) that satisfies ``constraint``, if any."""
    found = [(v, text) for text in versions
             if (v := Version.parse(text)) is not None and constraint.allows(v)]
    return max(found, key=lambda pair: pair[0])[1] if found else None
