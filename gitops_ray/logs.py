"""Structured logs for the controller: JSON in production, readable on a terminal.

Why structlog everywhere: an operator debugging "why did app X not sync" filters on
``app=X``; that only works if every line about an app carries ``app`` (and every line
about an object carries ``resource``), which bound loggers make the default rather than
a convention. ``auto`` follows structlog's own advice: console rendering when stderr is
a terminal, one JSON object per line otherwise. Libraries that log through the standard
``logging`` module (APScheduler, urllib3) go through the same renderer.

Nothing secret should reach a logger (URLs go through :func:`redact_url`), and as a last
line of defence every rendered line passes :func:`redact_fields`, so a URL with
``user:token@`` quoted by an exception or a library's message is masked all the same.
Lines a stranger can trigger at will (a refused webhook delivery) go through a
:class:`Throttle`, so a flood of requests is not also a flood of log lines.

At the package's top level, below the runtime: the one-shot commands (``--log-level``)
configure the same logging, and they never import the runtime.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Any, TextIO

import structlog

from gitops_ray.redact import redact

_NOISY = ("apscheduler", "urllib3", "kubernetes", "git")
redact_url = redact  # the single rule lives in gitops_ray.redact


def redact_fields(_logger: Any, _method: str,
                  event: MutableMapping[str, Any]) -> dict[str, Any]:
    """A structlog processor: every string in the event, nested ones too, redacted."""
    return {key: _redacted(value) for key, value in event.items()}


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


class Throttle:
    """At most one line per ``period`` seconds per key; counts the lines held back."""

    def __init__(self, period: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.period = period
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> int | None:
        """``None``: hold this line back; else how many were held back since the last one."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.period:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)


def use_json(fmt: str, stream: TextIO) -> bool:
    """Whether ``fmt`` (auto, json, console) means JSON on ``stream``."""
    return fmt == "json" or (fmt == "auto" and not stream.isatty())


def configure_logging(fmt: str = "auto", level: str = "info",
                      stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library to log to ``stream`` (stderr)."""
    out = stream or sys.stderr
    numeric = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (structlog.processors.JSONRenderer() if use_json(fmt, out)
                     else structlog.dev.ConsoleRenderer(colors=out.isatty()))
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=False)
    _configure_stdlib(out, numeric, shared, renderer)


def _configure_stdlib(out: TextIO, level: int, shared: list[Any], renderer: Any) -> None:
    handler = logging.StreamHandler(out)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, redact_fields, renderer]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _NOISY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
