"""Request heads read by one selector thread, so a slow client costs a buffer, not a thread.

Why: with a thread per connection, a client that sends its request line and headers one
byte at a time (slowloris) holds a thread, and a connection slot, for as long as it
likes: a per-read timeout restarts with every byte. A few dozen such clients fill every
slot and a real webhook delivery gets ``503``. Here a connection gets a thread and a slot
(:class:`~gitops_ray.runtime.server.HttpLimits` ``max_connections``) only once its whole
head (request line + headers, up to the blank line) has arrived; until then it is a
non-blocking socket and a buffer in one ``selectors`` loop, held to

* a **total deadline** for the head (``header_timeout`` from the first byte; from the
  accept for a new connection), however slowly the bytes come;
* an **idle deadline** between the requests of a keep-alive connection
  (``idle_timeout``): after each response the connection comes back here, not to a
  waiting thread;
* a **size** (``max_head``; more is ``431``) and a **count** (``max_pending``): when full,
  an idle keep-alive connection, else the one waiting longest, is closed to make room,
  so a new delivery always gets its chance and a slow one cannot keep its place.

What the thread then reads comes from :class:`HeadReader`: the buffered head (and
whatever followed it) first, then the socket, so ``http.server`` parses the head without
waiting on the network.
"""

from __future__ import annotations

import contextlib
import io
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger(__name__)
_RECV = 16 * 1024
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\n"
              b"Content-Length: 21\r\nConnection: close\r\n\r\nrequest head too big\n")
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\n"
              b"Content-Length: 22\r\nConnection: close\r\n\r\nrequest head too slow\n")

Ready = Callable[[socket.socket, Any, bytes], None]
"""Called (in the intake's thread) with a connection whose head has arrived."""


def head_complete(data: bytes | bytearray, start: int = 0) -> bool:
    """Whether ``data`` holds a blank line ending a head (CRLF or bare LF, as http.server)."""
    start = max(0, start - 3)
    return data.find(b"\r\n\r\n", start) >= 0 or data.find(b"\n\n", start) >= 0


@dataclass(eq=False)
class _Pending:
    sock: socket.socket
    address: Any
    deadline: float
    data: bytearray = field(default_factory=bytearray)
    idle: bool = False  # between requests: nothing of the next one has arrived yet


@dataclass(frozen=True)
class IntakeLimits:
    header_timeout: float
    idle_timeout: float
    max_head: int
    max_pending: int


class Intake:
    """The selector loop holding connections until their heads are complete."""

    def __init__(self, limits: IntakeLimits, ready: Ready, *,
                 on_dropped: Callable[[str], None] = lambda reason: None) -> None:
        self.limits = limits
        self._ready = ready
        self._on_dropped = on_dropped
        self._selector = selectors.DefaultSelector()
        self._pending: dict[int, _Pending] = {}  # by file descriptor
        self._incoming: list[_Pending] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="http-intake", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake()
        self._thread.join(5)

    def pending(self) -> int:
        """Connections whose head is still arriving (or about to be registered)."""
        return len(self._pending) + len(self._incoming)

    def add(self, sock: socket.socket, address: Any, data: bytes = b"", *,
            idle: bool = False) -> None:
        """Hold ``sock`` until its head is complete (``data``: what was read of it already).

        ``idle``: a kept-alive connection after a response (the idle deadline applies
        until the next request's first byte).
        """
        if self._stopped:
            _close(sock)
            return
        timeout = self.limits.idle_timeout if idle and not data else self.limits.header_timeout
        entry = _Pending(sock, address, time.monotonic() + timeout, bytearray(data),
                         idle=idle and not data)
        with self._lock:
            self._incoming.append(entry)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the loop (its own thread) ----------------------------------------------------

    def _loop(self) -> None:
        while not self._stopped:
            try:
                self._turn()
            except Exception as e:  # never let one bad turn end the loop
                log.warning("http_intake_failed", error=type(e).__name__)
        for entry in list(self._pending.values()):
            self._drop(entry, None)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _turn(self) -> None:
        self._take_incoming()
        wait = self._expire(time.monotonic())
        for key, _ in self._selector.select(wait):
            if key.fileobj is self._wake_r:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(4096)
            else:
                self._read(self._pending.get(key.fd))

    def _take_incoming(self) -> None:
        with self._lock:
            incoming, self._incoming = self._incoming, []
        for entry in incoming:
            if head_complete(entry.data):
                self._hand_over(entry, registered=False)
                continue
            while len(self._pending) >= self.limits.max_pending:
                # idle keep-alive connections first, then the one waiting longest
                oldest = min(self._pending.values(), key=lambda e: (not e.idle, e.deadline))
                self._drop(oldest, "evicted")
            try:
                entry.sock.setblocking(False)
                self._selector.register(entry.sock, selectors.EVENT_READ)
            except (OSError, ValueError):
                _close(entry.sock)
                continue
            self._pending[entry.sock.fileno()] = entry

    def _expire(self, now: float) -> float | None:
        """Drop the connections past their deadline; the time until the next one's."""
        late = [e for e in self._pending.values() if e.deadline <= now]
        for entry in late:  # an idle keep-alive connection is closed quietly (routine)
            if entry.idle:
                self._drop(entry, None)
            else:
                self._drop(entry, "head_timeout", _TIMED_OUT)
        if not self._pending:
            return None
        return max(0.0, min(e.deadline for e in self._pending.values()) - now)

    def _read(self, entry: _Pending | None) -> None:
        if entry is None:
            return
        try:
            chunk = entry.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(entry, None)  # the client closed (or reset) the connection
            return
        if entry.idle:  # the next request began: its head has the whole head's time
            entry.idle, entry.deadline = False, time.monotonic() + self.limits.header_timeout
        start = len(entry.data)
        entry.data += chunk
        if head_complete(entry.data, start):
            self._hand_over(entry, registered=True)
        elif len(entry.data) > self.limits.max_head:
            self._drop(entry, "head_too_large", _TOO_LARGE)

    def _hand_over(self, entry: _Pending, *, registered: bool) -> None:
        if registered:
            self._unregister(entry)
        try:
            entry.sock.setblocking(True)
            self._ready(entry.sock, entry.address, bytes(entry.data))
        except Exception as e:  # never let one connection end the loop
            log.warning("http_intake_failed", error=type(e).__name__)
            _close(entry.sock)

    def _drop(self, entry: _Pending, reason: str | None, answer: bytes | None = None) -> None:
        self._unregister(entry)
        if reason is not None:
            self._on_dropped(reason)
        if answer is not None:
            with contextlib.suppress(OSError):
                entry.sock.send(answer)
        _close(entry.sock)

    def _unregister(self, entry: _Pending) -> None:
        self._pending.pop(entry.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(entry.sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


class HeadReader(io.BufferedIOBase):
    """The ``rfile`` of a handler: the bytes the intake read, then the socket.

    Enough of a binary file for ``http.server`` (``readline``) and the body reader
    (``readinto1``); :meth:`leftover` is what was read but not consumed (a pipelined
    next request), which goes back to the intake with the connection.
    """

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        super().__init__()
        self._sock = sock
        self._buf = bytearray(data)

    def readable(self) -> bool:
        return True

    def readline(self, limit: int | None = -1) -> bytes:
        limit = -1 if limit is None else limit
        while True:
            end = self._buf.find(b"\n", 0, limit if limit > 0 else None)
            if end >= 0:
                return self._take(end + 1)
            if 0 < limit <= len(self._buf):
                return self._take(limit)
            chunk = self._sock.recv(_RECV)
            if not chunk:
                return self._take(len(self._buf))
            self._buf += chunk

    def readinto1(self, buffer: Any) -> int:
        if self._buf:
            view = memoryview(buffer).cast("B")
            n = min(len(view), len(self._buf))
            view[:n] = self._buf[:n]
            del self._buf[:n]
            return n
        return self._sock.recv_into(buffer)

    def readinto(self, buffer: Any) -> int:
        return self.readinto1(buffer)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise ValueError("an unbounded read from a socket")
        if not self._buf and size:
            return self._sock.recv(size)
        return self._take(min(size, len(self._buf)))

    def leftover(self) -> bytes:
        return bytes(self._buf)

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def close(self) -> None:
        """The socket is the server's to close (or to keep alive)."""


class SocketWriter(io.BufferedIOBase):
    """The ``wfile`` of a handler: every write sent whole (``sendall``)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """The socket is the server's to close (or to keep alive)."""
