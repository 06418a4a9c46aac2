"""The one rule for what a credential looks like in text, and how it is hidden.

Why one module at the root of the package: a repository URL from an Application may carry
``user:token@`` and it travels everywhere (status records, Events, log lines, error
messages that quote git's stderr). Every place that persists or prints text uses
:func:`redact`, so fixing or widening the rule happens here once and no stage can drift
to a weaker copy. It sits beside :mod:`gitops_ray.types` so every layer may import it.

The rule: the userinfo of any ``scheme://userinfo@host`` in the text becomes ``***``.
All userinfo is hidden, not only passwords, because forges accept a token as the user
name (``https://<token>@github.com/...``). Everything up to the *last* ``@`` before the
host is userinfo, as URL parsers read it, so an unescaped ``@`` in a password cannot leave
a tail behind. Scp-like SSH addresses (``git@host:org/repo``) have no secret and are kept.

Beside it, :func:`without_values`: the field values the API server echoes in an error
message (``Invalid value: "s3cret"``), cut out; here rather than in :mod:`gitops_ray.kube`
so the pure stages (diff's refusals) use it without importing the client.
"""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?<=://)[^/\s?#'\"<>]*@")
MASK = "***"


def redact(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ``***``.

    ``https://user:token@host/x`` -> ``https://***@host/x``; works on a bare URL and on
    free text that quotes URLs (git's stderr, exception messages, JSON).
    """
    return _USERINFO.sub(MASK + "@", text) if "@" in text else text


_ECHOED = re.compile(r'\b(Invalid|Unsupported|Duplicate|Forbidden|Required|Not found) value: '
                     r'("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*\b|true\b|false\b|null\b)')
_UNQUOTED = re.compile(r'\b(Invalid|Unsupported|Duplicate) value: (?!")')


def without_values(message: str) -> str:
    """``message`` with the field values the API server echoes cut out.

    ``data[k]: Invalid value: "s3cret": must be ...`` -> ``data[k]: Invalid value
    (withheld): must be ...``. A value in another form (a Go map or struct) ends the
    message there.
    """
    message = _ECHOED.sub(r"\1 value (withheld)", message)
    cut = _UNQUOTED.search(message)
    return message if cut is None else message[:cut.start()] + f"{cut.group(1)} value (withheld)"
