"""The child side of :mod:`gitops_ray.diff.jqworker`: runs libjq, one request per line.

Run as a script (``python -P this_file <parent pid>``), never imported by the package, so it loads
nothing but the ``jq`` binding. libjq has no way to interrupt a running program; the
parent enforces the deadline by killing this process, which is the only reliable way to
stop a runaway expression such as ``until(false; .)``.

Protocol: the parent writes one JSON object per line, ``{"e": expr, "d": doc, "m": mode}``;
we answer one JSON line: ``{"o": [outputs]}`` (at most two outputs of ``del(expr)``, since
a second output is already an error) or ``{"x": message}`` for a runtime error. With mode
``"paths"`` the answer also carries ``"p"`` (``[path(expr)]``) or ``"px"`` (its error).
The first line we write, ``{"ready": true}``, says the binding has loaded.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
from typing import Any

import jq

PR_SET_PDEATHSIG = 1
MEMORY_LIMIT = 2 << 30
"""Address-space cap, so an expression that builds a huge value fails instead of
swapping the node (the deadline alone would let it allocate for a whole second)."""

_programs: dict[str, Any] = {}


def _program(text: str) -> Any:
    program = _programs.get(text)
    if program is None:
        if len(_programs) > 512:
            _programs.clear()
        program = _programs[text] = jq.compile(text)
    return program


def _first_two(text: str, doc: Any) -> list[Any]:
    out = []
    for value in _program(text).input_value(doc):
        out.append(value)
        if len(out) == 2:
            break
    return out


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The reply for one request (pure apart from the compiled-program cache)."""
    expr, doc = request["e"], request["d"]
    try:
        reply: dict[str, Any] = {"o": _first_two(f"del({expr})", doc)}
    except ValueError as e:
        return {"x": str(e)}
    if request.get("m") == "paths":
        try:
            reply["p"] = _first_two(f"[path({expr})]", doc)
        except ValueError as e:
            reply["px"] = str(e)
    return reply


def _die_with_parent(parent: int) -> None:
    """Get SIGKILL when the parent goes, even while stuck in a runaway expression.

    Closing stdin is not enough: a worker inside ``until(false; .)`` never reads it, and
    the ``jq`` binding holds the GIL while libjq runs, so no watchdog thread could run
    either. ``PR_SET_PDEATHSIG`` fires when the parent *thread* that started us ends;
    the pool starts every worker from one thread that lives as long as the process.
    """
    with contextlib.suppress(OSError, AttributeError):  # Linux only
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(0)


def main() -> None:
    if len(sys.argv) > 1:
        _die_with_parent(int(sys.argv[1]))
    with contextlib.suppress(ValueError, OSError):  # an existing lower cap is fine too
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line))
        except MemoryError:
            reply = {"x": "out of memory (MemoryLimitExceeded)"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
