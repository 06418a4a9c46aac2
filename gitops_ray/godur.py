"""Go's ``time.Duration`` text: ``time.ParseDuration`` and ``Duration.String``, exactly.

Two places read durations the way Argo CD's Go code does, and neither may import the
other: an AppProject sync window's ``duration`` (:mod:`gitops_ray.reconcile.windows`:
``1h30m``, ``90m``, ``1.5h``) and the ``meta/v1/Duration`` fields a ``knownTypeFields``
entry names (:mod:`gitops_ray.diff.knowntypes`: ``metav1.Duration`` marshals
``Duration.String()``, so ``8760h`` in git and ``8760h0m0s`` live are the same value).
The grammar (``[-+]?([0-9]*(.[0-9]*)?[a-z]+)+``, or a bare ``0``), the units (``ns``,
``us``/``µs``/``μs``, ``ms``, ``s``, ``m``, ``h``), the int64-nanosecond range and the
canonical spelling follow ``src/time/format.go``.
"""

from __future__ import annotations

import re

NANOSECOND = 1
MICROSECOND = 1000 * NANOSECOND
MILLISECOND = 1000 * MICROSECOND
SECOND = 1000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
_UNITS = {"ns": NANOSECOND, "us": MICROSECOND, "µs": MICROSECOND, "μs": MICROSECOND,
          "ms": MILLISECOND, "s": SECOND, "m": MINUTE, "h": HOUR}
_MAX = (1 << 63) - 1
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]+)")
MAX_TEXT = 256
"""Longer text is refused without being parsed (Go accepts any length; nobody needs it)."""


class InvalidDuration(ValueError):
    """Text that Go's ``time.ParseDuration`` refuses (the message is Go's)."""


def parse_duration(text: str) -> int:
    """Nanoseconds, as ``time.ParseDuration``; :class:`InvalidDuration` with Go's message."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise InvalidDuration(f'time: invalid duration "{str(text)[:MAX_TEXT]}"')
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise InvalidDuration(f'time: invalid duration "{text}"')
    total = 0
    while rest:
        match = _PART.match(rest)
        if match is None and re.fullmatch(r"\d*(?:\.\d*)?", rest):
            raise InvalidDuration(f'time: missing unit in duration "{text}"')
        if match is None or not (match[1] or match[2]):
            raise InvalidDuration(f'time: invalid duration "{text}"')
        unit = _UNITS.get(match[3])
        if unit is None:
            raise InvalidDuration(f'time: unknown unit "{match[3]}" in duration "{text}"')
        whole, frac = int(match[1] or "0"), match[2] or ""
        total += whole * unit + (int(frac) * unit) // 10 ** len(frac) if frac else whole * unit
        if total > _MAX + negative:
            raise InvalidDuration(f'time: invalid duration "{text}"')
        rest = rest[match.end():]
    return -total if negative else total


def format_duration(nanos: int) -> str:
    """``Duration.String()``: ``72h3m0.5s``, ``1m30s``, ``1.5s``, ``300ms``, ``0s``."""
    if nanos == 0:
        return "0s"
    sign, u = ("-" if nanos < 0 else ""), abs(nanos)
    if u < SECOND:
        for unit, name in ((MILLISECOND, "ms"), (MICROSECOND, "µs"), (NANOSECOND, "ns")):
            if u >= unit:
                return sign + _fraction(u, unit) + name
    hours, u = divmod(u, HOUR)
    minutes, u = divmod(u, MINUTE)
    seconds = _fraction(u, SECOND) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _fraction(value: int, unit: int) -> str:
    """``value / unit`` in decimal, trailing zeros of the fraction dropped (Go's fmtFrac)."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
