"""What a setting's value may be: one converter per kind, each with its JSON Schema.

Why apart from the table of options: the converters are the vocabulary (a duration, a
host list, a memory size) that both the loader and the chart's schema generator read;
keeping each beside its schema is what lets :data:`SCHEMAS` refuse a converter without one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops_ray import childproc
from gitops_ray.quantity import parse_quantity

MAX_SHARDS = 1024  # one Lease each, renewed by its owner every retryPeriod (runtime.shards)

ENV_PREFIX = "GITOPS_RAY_"
DEFAULT_CACHE = Path.home() / ".cache" / "gitops-ray" / "repos"
LOG_FORMATS = ("auto", "json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_HOST_PATTERN = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$")
APP_SOURCE_FIELDS = ("repo", "revision", "path")
_HOST = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$")
CREDENTIAL_FIELDS = ("url", "username", "password", "passwordFile", "tokenFile", "sshKeyFile",
                      "knownHostsFile", "secret", "caFile", "certFile", "keyFile")


def _fields(names: tuple[str, ...], required: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": [required],
            "properties": {n: {"type": "string", **({"minLength": 1} if n == required else {})}
                           for n in names}}


LIST_ITEMS: dict[str, dict[str, Any]] = {
    "appSources": _fields(APP_SOURCE_FIELDS, "repo"),
    "applications": {"type": "object", "required": ["kind"],
                     "properties": {"kind": {"const": "Application"}}},
    "credentials": _fields(CREDENTIAL_FIELDS, "url"),
}
"""The list-valued settings (file only) and the JSON Schema of one item of each."""
LIST_KEYS = tuple(LIST_ITEMS)


class Secret:
    """A secret value that never shows up in ``repr``/``str`` (so never in a log line)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# -- scalar converters ---------------------------------------------------------------------

def parse_duration(value: object) -> float:
    """Seconds from ``90``, ``1.5``, ``"90s"``, ``"3m"``, ``"200ms"`` or ``"1h"``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 90s, 3m or 200ms")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"expected a duration like 90s, 3m or 200ms, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def as_positive_int(value: object) -> int:
    number = int(str(value))
    if number < 1:
        raise ValueError("must be at least 1")
    return number


MAX_SYNC_PARALLELISM = 64
"""Applies in flight for one app at most: each is a thread and a pooled connection."""


def as_parallelism(value: object) -> int:
    number = as_positive_int(value)
    if number > MAX_SYNC_PARALLELISM:
        raise ValueError(f"must be at most {MAX_SYNC_PARALLELISM}")
    return number


def as_count(value: object) -> int:
    number = int(str(value))
    if number < 0:
        raise ValueError("cannot be negative")
    return number


def as_shard_count(value: object) -> int:
    number = int(str(value))
    if not 1 <= number <= MAX_SHARDS:
        raise ValueError(f"must be between 1 and {MAX_SHARDS}")
    return number


def as_factor(value: object) -> float:
    number = float(str(value))
    if number < 1:
        raise ValueError("a backoff factor must be >= 1")
    return number


def as_choice(*allowed: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text
    SCHEMAS[convert] = {"enum": list(allowed)}
    return convert


def as_address(value: object) -> str:
    text = str(value).strip()
    if text and not re.match(r"^[\w.\-\[\]:]*:\d{1,5}$", text):
        raise ValueError(f"expected host:port or :port (empty disables), got {text!r}")
    return text


def as_url(value: object) -> str:
    text = str(value or "").strip()
    if text and not re.match(r"^https?://[^/\s]+(/\S*)?$", text):
        raise ValueError(f"expected an http(s) URL, got {text!r}")
    return text


def as_str(value: object) -> str:
    return "" if value is None else str(value)


def as_audience(value: object) -> str:
    """A token audience: one word, never empty (an empty one would accept any API token)."""
    text = as_str(value).strip()
    if not re.match(r"^\S{1,253}$", text):
        raise ValueError(f"expected one audience (no spaces, not empty), got {text!r}")
    return text


def as_memory(value: object) -> int:
    """``auto`` (or empty): derived from the container's limit; 0: none; else a quantity."""
    text = as_str(value).strip()
    if text.lower() in ("", "auto"):
        return childproc.AUTO
    amount = parse_quantity(text)
    if amount < 0:
        raise ValueError("cannot be negative")
    return int(amount)


def as_hosts(value: object) -> tuple[str, ...]:
    """A comma-separated list of host names (``host`` or ``host:port``), lower-cased."""
    items = value if isinstance(value, list | tuple) else as_str(value).split(",")
    hosts = tuple(dict.fromkeys(str(h).strip().lower() for h in items if str(h).strip()))
    for host in hosts:
        if not _HOST.match(host):
            raise ValueError(f"{host!r} is not a host name (host or host:port, no scheme)")
    return hosts


def as_namespaces(value: object) -> tuple[str, ...]:
    """A comma-separated list of namespace names (Argo CD's ``application.namespaces``)."""
    items = value if isinstance(value, list | tuple) else as_str(value).split(",")
    names = tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))
    for name in names:
        if not DNS_LABEL.match(name):
            raise ValueError(f"{name!r} is not a valid namespace name")
    return names


def as_host_patterns(value: object) -> tuple[str, ...]:
    """A comma-separated list of host names (``host``, ``host:port`` or ``*.domain``)."""
    items = value if isinstance(value, list | tuple) else as_str(value).split(",")
    hosts = tuple(dict.fromkeys(str(h).strip().lower() for h in items if str(h).strip()))
    for host in hosts:
        if not _HOST_PATTERN.match(host):
            raise ValueError(f"{host!r} is not a host name (host, host:port or *.domain)")
    return hosts


def as_bytes(value: object) -> int:
    """A size in bytes, or with a unit: ``512Ki``, ``32Mi``, ``1Gi``."""
    text = as_str(value).strip()
    m = re.match(r"^(\d+)\s*(Ki|Mi|Gi)?$", text)
    if m is None or int(m.group(1)) <= 0:
        raise ValueError(f"expected a positive size (bytes, or with Ki/Mi/Gi), got {text!r}")
    return int(m.group(1)) * {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}.get(
        m.group(2) or "", 1)


def as_configmap_name(value: object) -> str:
    text = as_str(value).strip()
    if text and not _DNS_SUBDOMAIN.match(text):
        raise ValueError(f"expected a ConfigMap name (empty: none), got {text!r}")
    return text


# What each converter accepts, as JSON Schema (draft-07), for validators that run before
# the controller does, e.g. the Helm chart's values.schema.json
# (:mod:`gitops_ray.schema`). A new converter needs an entry here: the schema
# module refuses to guess.
SCHEMAS: dict[Callable[[object], Any], dict[str, Any]] = {
    parse_duration: {"type": ["number", "string"], "minimum": 0,
                     "pattern": _DURATION.pattern},
    as_bool: {"type": "boolean"},
    as_positive_int: {"type": "integer", "minimum": 1},
    as_count: {"type": "integer", "minimum": 0},
    as_shard_count: {"type": "integer", "minimum": 1, "maximum": MAX_SHARDS},
    as_parallelism: {"type": "integer", "minimum": 1, "maximum": MAX_SYNC_PARALLELISM},
    as_factor: {"type": "number", "minimum": 1},
    as_address: {"type": "string", "pattern": r"^([\w.\-\[\]:]*:\d{1,5})?$"},
    as_url: {"type": "string", "pattern": r"^(https?://[^/\s]+(/\S*)?)?$"},
    as_str: {"type": "string"},
    as_audience: {"type": "string", "pattern": r"^\S{1,253}$"},
    as_memory: {"type": ["integer", "string"], "minimum": 0,
              "pattern": r"^(auto|[0-9]+(\.[0-9]+)?([EPTGMk]i?|[mun])?)?$"},
    as_hosts: {"type": "string", "pattern": r"^[a-z0-9,.:\s-]*$"},
    as_namespaces: {"type": "string", "pattern": r"^[a-z0-9,\s-]*$"},
    as_host_patterns: {"type": "string", "pattern": r"^[a-z0-9*.:,\s-]*$"},
    as_bytes: {"type": ["integer", "string"], "minimum": 1, "pattern": r"^\d+\s*(Ki|Mi|Gi)?$"},
    as_configmap_name: {"type": "string", "maxLength": 253,
                      "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$"},
}

