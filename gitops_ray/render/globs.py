"""``directory.include``/``exclude`` patterns, matched the way Argo CD matches them.

Argo CD tests each file's path relative to the app directory with
``github.com/gobwas/glob`` compiled *without* separators, so ``*`` also crosses ``/``
(``*.yaml`` matches ``sub/x.yaml``). Supported syntax: ``*``, ``?``, ``[a-z]``,
``[!a-z]``, ``{alt1,alt2}`` (nesting allowed) and backslash escapes. Argo silently treats
an invalid pattern as "no match"; we reject it when the Application is loaded, since a
pattern that can never match is always a mistake.

(``gitops_ray.diff.globs`` implements the same syntax for ignore rules; render may not
import diff, hence this small twin.)
"""

from __future__ import annotations

import functools
import re


class GlobError(ValueError):
    """A pattern that gobwas would refuse (unclosed ``[``/``{``, trailing backslash)."""


def glob_matches(pattern: str, path: str) -> bool:
    """Whether ``path`` (``/``-separated) matches the whole ``pattern``."""
    return compile_glob(pattern).fullmatch(path) is not None


@functools.lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression equivalent to ``pattern``; :class:`GlobError` if invalid."""
    regex, _ = _sequence(pattern, 0, nested=False)
    try:
        return re.compile(regex, re.DOTALL)
    except re.error as e:  # e.g. a reversed range such as [z-a]
        raise GlobError(f"glob {pattern!r}: {e}") from e


def _sequence(pattern: str, pos: int, *, nested: bool) -> tuple[str, int]:
    """Regex for ``pattern[pos:]`` up to its end, or a ``,``/``}`` when ``nested``."""
    out: list[str] = []
    while pos < len(pattern):
        char = pattern[pos]
        if nested and char in ",}":
            break
        if char == "[":
            part, pos = _char_class(pattern, pos)
        elif char == "{":
            part, pos = _alternatives(pattern, pos)
        else:
            part, pos = _single(pattern, pos)
        out.append(part)
    return "".join(out), pos


def _single(pattern: str, pos: int) -> tuple[str, int]:
    char = pattern[pos]
    if char == "*":
        while pos < len(pattern) and pattern[pos] == "*":
            pos += 1
        return ".*", pos
    if char == "?":
        return ".", pos + 1
    if char == "\\":
        if pos + 1 >= len(pattern):
            raise GlobError(f"glob {pattern!r}: trailing backslash")
        return re.escape(pattern[pos + 1]), pos + 2
    return re.escape(char), pos + 1


def _alternatives(pattern: str, pos: int) -> tuple[str, int]:
    terms: list[str] = []
    while True:
        term, pos = _sequence(pattern, pos + 1, nested=True)
        terms.append(term)
        if pos >= len(pattern):
            raise GlobError(f"glob {pattern!r}: unclosed '{{'")
        if pattern[pos] == "}":
            return "(?:" + "|".join(terms) + ")", pos + 1


def _char_class(pattern: str, pos: int) -> tuple[str, int]:
    end = pattern.find("]", pos + 1)
    if end < 0:
        raise GlobError(f"glob {pattern!r}: unclosed '['")
    body = pattern[pos + 1:end]
    negate = body.startswith("!")
    body = body[1:] if negate else body
    if not body:
        raise GlobError(f"glob {pattern!r}: empty character class")
    items, i = [], 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            items.append(f"{re.escape(body[i])}-{re.escape(body[i + 2])}")
            i += 3
        else:
            items.append(re.escape(body[i]))
            i += 1
    return ("[^" if negate else "[") + "".join(items) + "]", end + 1
