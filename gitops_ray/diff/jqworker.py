"""Run libjq with a real deadline: in a worker process that is killed when time is up.

Argo CD runs each ignore expression with a 1 s timeout (GHSA-9m6p-x4h2-6frq: without it,
``until(false; .)`` in one Application hangs the controller). libjq offers no way to
interrupt a program, and a Python thread cannot be stopped, so the only real deadline is
a separate process: we send the request, wait for the answer until the deadline, and kill
the worker if it has not answered. The clock starts when the request is sent; starting a
worker (about 50 ms) does not count against it.

Workers are reused (a pool, one per concurrent caller, a few kept idle), die with this
process even when stuck (``PR_SET_PDEATHSIG``), start with an empty environment (jq's
``$ENV`` must not expose the controller's credentials; gojq in Argo CD sees no
environment either) and cap their memory (``childMemoryLimit``, set by
:mod:`gitops_ray.childproc` as for every child; the worker adds its own 2 GiB cap).
Only expressions outside the pure-Python fast path (:mod:`gitops_ray.diff.jqfast`) come here.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gitops_ray import childproc

WORKER_SCRIPT = Path(__file__).with_name("_jqworker_main.py")
STARTUP_TIMEOUT = 30.0
MAX_IDLE = 4


class JqWorkerError(Exception):
    """The worker could not run the request (crashed, or could not start)."""


class JqTimeout(JqWorkerError):
    """The expression did not finish before its deadline; the worker was killed."""


def _start_process() -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    return subprocess.Popen(
        [sys.executable, "-P", str(WORKER_SCRIPT), str(os.getpid())], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, close_fds=True,
        **childproc.popen_options(env))


class _Spawner:
    """Starts worker processes from one daemon thread that lives as long as we do.

    Workers ask the kernel to kill them when their parent *thread* ends (the only
    guarantee that a worker stuck in libjq dies with us); starting them all from this
    thread makes that mean "when the process ends", whatever thread needed a worker.
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[queue.SimpleQueue[Any]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="jq-worker-spawner",
                                        daemon=True)
        self._thread.start()

    def start(self) -> subprocess.Popen[bytes]:
        reply: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests.put(reply)
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, subprocess.Popen)
        return result

    def _loop(self) -> None:
        while True:
            reply = self._requests.get()
            try:
                reply.put(_start_process())
            except BaseException as e:  # handed to the caller, raised there
                reply.put(e)


class _Worker:
    """One ``_jqworker_main.py`` process and its pipes (raw file descriptors)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buffer = b""
        try:
            self._read_line(time.monotonic() + STARTUP_TIMEOUT)
        except JqWorkerError as e:
            self.kill()
            raise JqWorkerError(f"jq worker did not start: {e}") from None

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        # default=str: a YAML timestamp in a rendered manifest reaches jq as its text
        self._write((json.dumps(request, default=str) + "\n").encode(), deadline)
        reply = json.loads(self._read_line(deadline))
        assert isinstance(reply, dict)
        return reply

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            _wait(self._in, deadline, writable=True)
            try:
                view = view[os.write(self._in, view):]
            except BrokenPipeError:
                raise JqWorkerError(self._exit_reason()) from None

    def _read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._buffer:
            _wait(self._out, deadline, writable=False)
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise JqWorkerError(self._exit_reason())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _exit_reason(self) -> str:
        code = self.proc.wait(timeout=5)
        if code == -signal.SIGABRT:  # libjq aborts when an allocation fails
            return f"jq worker ran out of memory ({childproc.REASON})"
        return f"jq worker exited with code {code}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _wait(fd: int, deadline: float, *, writable: bool) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise JqTimeout("deadline exceeded")
    ready = select.select([], [fd], [], remaining) if writable \
        else select.select([fd], [], [], remaining)
    if not any(ready):
        raise JqTimeout("deadline exceeded")


class WorkerPool:
    """Hands out workers to concurrent callers; kills any worker that overran."""

    def __init__(self, *, max_idle: int = MAX_IDLE) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._spawner: _Spawner | None = None
        self._max_idle = max_idle

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The worker's reply, or :class:`JqTimeout` / :class:`JqWorkerError`."""
        worker = self._take()
        try:
            reply = worker.call(request, timeout)
        except BaseException:
            worker.kill()
            raise
        self._give_back(worker)
        return reply

    def _take(self) -> _Worker:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's workers are not ours
                self._idle, self._spawner, self._pid = [], None, os.getpid()
            if self._idle:
                return self._idle.pop()
            if self._spawner is None:
                self._spawner = _Spawner()
            spawner = self._spawner
        try:
            return _Worker(spawner.start())
        except OSError as e:
            raise JqWorkerError(f"jq worker did not start: {e}") from None

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        """Stop idle workers (busy ones are killed when their caller finishes)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


POOL = WorkerPool()
atexit.register(POOL.close)
