r"""JSON on the hot paths, in one place: API responses, watch events, copies of objects.

Why not the standard library: the controller decodes every API response and watch event
(a LIST page of RayClusters, the dry-run answer of each apply, every event of every
watch) and the diff copies and compares each object it normalises. ``orjson`` (Rust)
decodes a ~19 KB RayCluster about twice as fast as ``json.loads`` and encodes it about
ten times as fast as ``json.dumps``; it also shares the key strings objects repeat.

What differs from ``json``, and how each difference is kept out of the product:

* **Input**: UTF-8 JSON only. ``NaN``/``Infinity`` literals, a byte-order mark, UTF-16 and
  lone surrogates (``"\ud800"``) are refused (:class:`DecodeError`), where ``json``
  accepts them; the API server (Go's ``encoding/json``) never sends any of them.
* **Integers beyond 64 bits** decode to ``float`` (``json`` keeps an exact ``int``). That
  is what the API server itself does with a number that fits no ``int64`` (apimachinery
  decodes it as ``float64``), so an API response cannot hold one; files from git are not
  API output and keep ``json``/``yaml`` (``render.documents``), exact. On encode, an
  integer outside ``[-2**63, 2**64)`` is refused (:class:`EncodeError`).
* **NaN and Infinity** encode as ``null`` in orjson; :func:`dumps` refuses them instead
  (:class:`EncodeError`), as Go's ``encoding/json`` does, so no value silently becomes
  ``null``.
* **Output** is compact UTF-8 ``bytes`` (``json.dumps`` gives ``str``, ``", "``
  separators, ``\u`` escapes): the same JSON value, other bytes. Nothing hashes its
  output, so no digest changes; the app records store it with sorted keys (a record
  written by an older version is rewritten once, with the same values). Key order is
  kept; floats are written in their shortest form that reads back exactly (``1e-7``
  where ``json`` writes ``1e-07``).
* **Types**: ``dict`` keys must be ``str``; ``datetime``, ``bytes``, sets and dict
  subclasses are refused (:class:`EncodeError`); tuples are written as lists and str or
  int enums as their value, like ``json`` (any enum and ``UUID`` too, which ``json``
  refuses).
* **Depth**: decoding stops at 1,024 levels of nesting, encoding at 254, with
  :class:`DecodeError` / :class:`EncodeError`. ``json`` had no bound of its own but the
  interpreter's (~1,000 frames, a ``RecursionError``, which escaped the client's error
  handling); a Kubernetes object is nested ~20-40 deep. Git's input has the tighter
  :data:`gitops_ray.limits.MAX_DEPTH` (100), measured by ``render.bounds`` before it is
  built; API responses are the API server's and keep orjson's bound.

Errors are :class:`DecodeError` (a ``json.JSONDecodeError``, so a ``ValueError``, as
before) and :class:`EncodeError` (a ``ValueError``); their messages name a position or a
type, never a value of the document.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

DecodeError = orjson.JSONDecodeError
"""Raised by :func:`loads`; a ``json.JSONDecodeError``, hence a ``ValueError``."""

MAX_DECODE_DEPTH = 1024
"""Nesting :func:`loads` accepts (orjson's fixed bound)."""

MAX_ENCODE_DEPTH = 254
"""Nesting :func:`dumps` accepts (orjson's fixed bound)."""

_STRICT = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
           | orjson.OPT_PASSTHROUGH_SUBCLASS)  # these types have no default: refused


class EncodeError(ValueError):
    """A value JSON cannot hold exactly (see the module docstring)."""


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The JSON value in ``data`` (UTF-8); :class:`DecodeError` if it is not JSON."""
    return orjson.loads(data)


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact UTF-8 JSON; :class:`EncodeError` if JSON cannot hold it.

    ``sort_keys``: every object's keys in order, so equal values give equal bytes.
    """
    try:
        out = orjson.dumps(value, option=_STRICT | orjson.OPT_SORT_KEYS if sort_keys
                           else _STRICT)
    except TypeError as e:  # orjson.JSONEncodeError: a type, a key, a range, the depth
        raise EncodeError(f"not encodable as JSON: {e}") from None
    if b"null" in out and not _finite(value):
        raise EncodeError("not encodable as JSON: NaN or Infinity")
    return out


def dumps_yaml_safe(value: Any) -> bytes:
    """:func:`dumps`, with what YAML would misread escaped: for a body read as YAML.

    Server-side apply's body (``application/apply-patch+yaml``) goes through a YAML
    parser (``sigs.k8s.io/yaml``, go-yaml) even when it is JSON. YAML folds U+0085,
    U+2028 and U+2029 inside a quoted string as line breaks, and refuses DEL, the C1
    controls, U+FEFF, U+FFFE and U+FFFF written raw; all of them, escaped, are read
    back exactly. Everything else stays raw UTF-8: escaping it all, as ``json.dumps``
    does, writes a character past U+FFFF as a surrogate pair, which YAML refuses ("invalid
    Unicode character escape code"), so an emoji in a value failed the apply.
    """
    out = dumps(value)
    if out.isascii() and b"\x7f" not in out:
        return out
    return _YAML_UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), out)


_YAML_UNSAFE = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]|\xef\xbb\xbf|\xef\xbf[\xbe\xbf]")
"""DEL, U+0080-U+009F, U+2028, U+2029, U+FEFF, U+FFFE, U+FFFF in UTF-8; each match starts
at a lead byte, so it is a whole character (JSON's structure is ASCII: only strings)."""


def exact(value: Any) -> bytes | None:
    """``value``'s JSON if decoding it gives back exactly ``value``, else ``None``.

    For decoded JSON this is its encoding; ``None`` for anything a round trip would not
    give back as it was: ``null`` anywhere (orjson writes NaN as ``null`` too, and telling
    them apart costs a walk), and everything :func:`dumps` refuses. Tuples and enums are
    the exceptions (written as lists and values); decoded JSON or YAML holds neither.
    """
    try:
        out = orjson.dumps(value, option=_STRICT)
    except TypeError:
        return None
    return None if b"null" in out else out


def _finite(value: Any) -> bool:
    """No NaN or infinite float anywhere in ``value`` (a walk: only when ``null`` shows)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return True
