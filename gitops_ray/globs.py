"""Glob patterns as Argo CD matches them (``github.com/gobwas/glob``, no separators).

Two stages use them: ``diff`` for the ``group``/``kind`` of ignore rules, ``render`` for
``directory.include``/``exclude`` (matched on the path relative to the app directory).
Both stay independent of each other, so the one implementation lives here. Compiled
without separators, ``*`` also matches ``.``, ``/`` and the empty string (``group: "*"``
matches the core group too; ``*.yaml`` matches ``sub/x.yaml``). The syntax is gobwas's:
``*``, ``?``, ``[a-z]``, ``[!a-z]``, ``{alt1,alt2}`` and backslash escapes; matching is
case-sensitive. Argo CD logs an invalid pattern and treats it as "no match"; a caller
decides which it wants: ``diff`` does the same and says so in the app's warnings, while
``render`` reports it at load (a pattern that can never match is a mistake the user wants
to hear about).

AppProject ``sourceRepos`` are the one place Argo CD compiles globs *with* a separator
(``/``): there ``*`` and ``?`` stop at ``/`` and ``**`` crosses it (``separators="/"``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

_SPECIAL = frozenset("*?[{\\")


class GlobError(ValueError):
    """The pattern is not a valid gobwas glob (unclosed ``[`` or ``{``)."""


@functools.lru_cache(maxsize=1024)
def compile_glob(pattern: str, separators: str = "") -> Callable[[str], bool]:
    """A matcher for ``pattern``; literal patterns compare by equality.

    ``separators``: characters ``*`` and ``?`` do not match (``**`` does), as gobwas's.
    """
    if not _SPECIAL.intersection(pattern):
        return pattern.__eq__
    try:
        regex = re.compile(_translate(pattern, 0, in_terms=False, seps=separators)[0],
                           re.DOTALL)
    except re.error as e:  # e.g. a reversed range such as [z-a]
        raise GlobError(f"glob {pattern!r}: {e}") from e
    return lambda text: regex.fullmatch(text) is not None


def glob_matches(pattern: str, text: str, separators: str = "") -> bool:
    """Whether the whole of ``text`` matches ``pattern``."""
    return compile_glob(pattern, separators)(text)


def _translate(pattern: str, pos: int, *, in_terms: bool, seps: str = "") -> tuple[str, int]:
    """Regex for ``pattern[pos:]`` up to the end (or a ``,``/``}`` inside ``{...}``)."""
    out: list[str] = []
    while pos < len(pattern):
        char = pattern[pos]
        if in_terms and char in ",}":
            return "".join(out), pos
        if char == "*":
            start = pos
            while pos < len(pattern) and pattern[pos] == "*":
                pos += 1
            out.append(".*" if not seps or pos - start > 1 else f"[^{re.escape(seps)}]*")
            continue
        if char == "?":
            out.append(f"[^{re.escape(seps)}]" if seps else ".")
        elif char == "\\":
            if pos + 1 >= len(pattern):
                raise GlobError(f"glob {pattern!r}: trailing backslash")
            pos += 1
            out.append(re.escape(pattern[pos]))
        elif char == "[":
            regex, pos = _char_class(pattern, pos)
            out.append(regex)
            continue
        elif char == "{":
            regex, pos = _alternatives(pattern, pos, seps)
            out.append(regex)
            continue
        else:
            out.append(re.escape(char))
        pos += 1
    if in_terms:
        raise GlobError(f"glob {pattern!r}: unclosed '{{'")
    return "".join(out), pos


def _char_class(pattern: str, pos: int) -> tuple[str, int]:
    """``[...]`` starting at ``pos``; returns the regex and the position after ``]``."""
    end = pattern.find("]", pos + 1)
    if end < 0 or end == pos + 1:
        raise GlobError(f"glob {pattern!r}: unclosed or empty '['")
    body = pattern[pos + 1:end]
    negate = body.startswith("!")
    body = body[1:] if negate else body
    if not body:
        raise GlobError(f"glob {pattern!r}: empty character class")
    parts = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            parts.append(f"{re.escape(body[i])}-{re.escape(body[i + 2])}")
            i += 3
        else:
            parts.append(re.escape(body[i]))
            i += 1
    return f"[{'^' if negate else ''}{''.join(parts)}]", end + 1


def _alternatives(pattern: str, pos: int, seps: str) -> tuple[str, int]:
    """``{a,b}`` starting at ``pos``; each alternative may hold wildcards itself."""
    options = []
    pos += 1
    while True:
        regex, pos = _translate(pattern, pos, in_terms=True, seps=seps)
        options.append(regex)
        if pattern[pos] == "}":
            return f"(?:{'|'.join(options)})", pos + 1
        pos += 1  # ","
