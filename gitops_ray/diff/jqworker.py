"""Run libjq with a real deadline: in a worker process that is killed when time is up.

Argo CD runs each ignore expression with a 1 s timeout (GHSA-9m6p-x4h2-6frq: without it,
``until(false; .)`` in one Application hangs the controller). libjq offers no way to
interrupt a program, and a Python thread cannot be stopped, so the only real deadline is
a separate process: we send the request, wait for the answer until the deadline, and kill
the worker if it has not answered. The clock starts when the request is sent; starting a
worker (about 50 ms) does not count against it.

The pool is :class:`gitops_ray.childpool.Pool`, as for Lua health checks: workers are
reused, die with this process even when stuck (``PR_SET_PDEATHSIG``), start with an empty
environment (jq's ``$ENV`` must not expose the controller's credentials; gojq in Argo CD
sees no environment either) and cap their memory (``childMemoryLimit``, set by
:mod:`gitops_ray.childproc` as for every child; the worker adds its own 2 GiB cap).
What is jq's own here: the request encoding (a YAML timestamp in a rendered manifest
reaches jq as its text, as ``str`` gives it) and what a SIGABRT means (libjq aborts when an
allocation fails).
Only expressions outside the pure-Python fast path (:mod:`gitops_ray.diff.jqfast`) come here.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from gitops_ray import childproc
from gitops_ray.childpool import MAX_IDLE, Pool, WorkerError, WorkerTimeout

WORKER_SCRIPT = Path(__file__).with_name("_jqworker_main.py")
MAX_WORKERS = 8
"""jq workers running at once; a caller beyond them waits for one (each is bounded by its
deadline, which starts when its request is sent)."""

JqWorkerError = WorkerError
JqTimeout = WorkerTimeout


def _encode(request: dict[str, Any]) -> bytes:
    return json.dumps(request, default=str).encode()


def _explain(code: int) -> str | None:
    if code == -signal.SIGABRT:
        return f"jq worker ran out of memory ({childproc.REASON})"
    return None


def new_pool(*, max_idle: int = MAX_IDLE) -> Pool:
    """A pool of jq workers (the controller's one is :data:`POOL`)."""
    return Pool(WORKER_SCRIPT, "jq", max_idle=max_idle, max_workers=MAX_WORKERS,
                encode=_encode, explain=_explain)


POOL = new_pool()
