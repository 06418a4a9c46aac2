"""Worker processes a wall-clock deadline can end, for code nothing else can interrupt.

Why a process: a Lua health check is admin-written code run on every object of every
comparison, and Lua can run where no instruction hook fires (a ``string.find`` pattern
that backtracks for hours is one C call; a ``__gc`` finaliser runs with hooks off) while
holding the GIL, so neither a hook nor a Python thread can stop it. A separate process
can always be killed. We send one request line, wait for the answer until the deadline,
and kill the worker if it has not answered; the next request gets a new one. The clock
starts when the request is sent (starting a worker, ~0.1 s, does not count against it).

Workers are reused (one per concurrent caller, at most ``max_workers`` at once: a caller
waits for a free one, each busy one is bounded by its deadline), started with
an empty environment but ``PYTHONPATH`` (no credential of the controller's reaches
them), and started from one long-lived thread, so a worker that asks the kernel to kill
it when its parent thread ends (``PR_SET_PDEATHSIG``, the worker scripts do) dies with
this process even when stuck. A worker caps its own memory, under the limit every
child gets (``childMemoryLimit``, :mod:`gitops_ray.childproc`). Requests and replies are
one JSON object per line; the first line a worker writes says it is ready.
Both such workers use this pool: Lua health checks (:mod:`gitops_ray.health.lua`) and
libjq ignore rules (:mod:`gitops_ray.diff.jqworker`), each with its own script, request
encoding and reading of an exit code.
"""

from __future__ import annotations

import atexit
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops_ray import childproc, jsonio

STARTUP_TIMEOUT = 30.0
MAX_IDLE = 4


Encode = Callable[[dict[str, Any]], bytes]
"""A request as one line of JSON (without the newline)."""
ExitReason = Callable[[int], str | None]
"""What a worker's exit code means, when it means more than "exited with code N"."""


class WorkerError(Exception):
    """The worker could not run the request (crashed, or could not start)."""


class WorkerTimeout(WorkerError):
    """No answer before the deadline; the worker was killed."""


class _Spawner:
    """Starts worker processes from one daemon thread that lives as long as we do."""

    def __init__(self, argv: list[str]) -> None:
        self._argv = argv
        self._requests: queue.SimpleQueue[queue.SimpleQueue[Any]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="worker-spawner", daemon=True).start()

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
                env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
                reply.put(subprocess.Popen(
                    self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, bufsize=0, close_fds=True,
                    **childproc.popen_options(env)))
            except BaseException as e:  # handed to the caller, raised there
                reply.put(e)


class _Worker:
    """One worker process and its pipes (raw file descriptors)."""

    def __init__(self, proc: subprocess.Popen[bytes], name: str,
                 explain: ExitReason | None = None) -> None:
        self.proc, self.name, self._explain = proc, name, explain
        assert proc.stdin is not None and proc.stdout is not None
        self._in, self._out = proc.stdin.fileno(), proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buffer = b""
        try:
            self._read_line(time.monotonic() + STARTUP_TIMEOUT)
        except WorkerError as e:
            self.kill()
            raise WorkerError(f"{name} worker did not start: {e}") from None

    def call(self, line: bytes, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        self._write(line, deadline)
        reply = jsonio.loads(self._read_line(deadline))
        if not isinstance(reply, dict):
            raise WorkerError(f"{self.name} worker answered out of protocol")
        return reply

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            _wait(self._in, deadline, writable=True)
            try:
                view = view[os.write(self._in, view):]
            except BrokenPipeError:
                raise WorkerError(self._exit_reason()) from None

    def _read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._buffer:
            _wait(self._out, deadline, writable=False)
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise WorkerError(self._exit_reason())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _exit_reason(self) -> str:
        code = self.proc.wait(timeout=5)
        explained = self._explain(code) if self._explain else None
        return explained or f"{self.name} worker exited with code {code}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _wait(fd: int, deadline: float, *, writable: bool) -> None:
    remaining = deadline - time.monotonic()
    ready = ([], [], []) if remaining <= 0 else (
        select.select([], [fd], [], remaining) if writable
        else select.select([fd], [], [], remaining))
    if not any(ready):
        raise WorkerTimeout("deadline exceeded")


class Pool:
    """Workers running ``script`` handed out to concurrent callers; an overrun is killed."""

    def __init__(self, script: Path, name: str, *, max_idle: int = MAX_IDLE,
                 max_workers: int = MAX_IDLE, encode: Encode = jsonio.dumps,
                 explain: ExitReason | None = None) -> None:
        self.name, self._encode, self._explain = name, encode, explain
        self._slots = threading.BoundedSemaphore(max_workers)
        self._argv = [sys.executable, "-P", str(script), str(os.getpid())]
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._spawner: _Spawner | None = None
        self._max_idle = max_idle
        atexit.register(self.close)

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The worker's reply, or :class:`WorkerTimeout` / :class:`WorkerError`."""
        try:
            line = self._encode(request) + b"\n"
        except (jsonio.EncodeError, TypeError, ValueError) as e:
            raise WorkerError(str(e)) from None
        with self._slots:
            worker = self._take()
            try:
                reply = worker.call(line, timeout)
            except BaseException:
                worker.kill()
                raise
            self._give_back(worker)
            return reply

    def _take(self) -> _Worker:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's workers are not ours
                self._idle, self._spawner, self._pid = [], None, os.getpid()
                self._argv[-1] = str(self._pid)
            if self._idle:
                return self._idle.pop()
            if self._spawner is None:
                self._spawner = _Spawner(self._argv)
            spawner = self._spawner
        try:
            return _Worker(spawner.start(), self.name, self._explain)
        except OSError as e:
            raise WorkerError(f"{self.name} worker did not start: {e}") from None

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
