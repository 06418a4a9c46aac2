"""A tiny HTTP layer for probes, metrics and webhooks (standard library, threads).

Why not a web framework: a handful of routes, no async; ``http.server`` with a thread per
connection is enough and adds no dependency (the read-only web page renders its own
templates, :mod:`gitops_ray.runtime.web`). A route is an exact path or a prefix
(``/apps/*``, see :func:`find_route`): the page's ``/apps/<name>`` needs no more than
that. Routes are grouped by listen
address, so ``/metrics``, the probes and the webhook can live on separate ports (the
webhook is the only one exposed outside the cluster) or share one. On separate ports a
flood of the webhook cannot starve the kubelet's probes: every limit is per server.

Why the limits (:class:`HttpLimits`): the webhook port faces the internet and anyone
can reach it *without* the secret. Everything a client can make us spend before it has
proven it knows the secret is bounded:

* **threads**: a connection gets a thread only once its request line and headers have
  all arrived (:mod:`gitops_ray.runtime.intake`: until then it is a buffer in one
  selector loop, at most ``max_pending`` of them, the longest waiting dropped first when
  full); at most ``max_connections`` requests are served at once, the next one gets
  ``503`` and is closed; a kept-alive connection goes back to the selector loop after each
  response, so an idle one holds no thread;
* **time**: the request line and headers must arrive within ``header_timeout`` in all
  (a total deadline, not one per read: a client dripping one byte at a time is dropped
  when it is up), a kept-alive connection's next request must begin within
  ``idle_timeout``, the whole body must arrive within ``body_timeout`` (a total deadline
  too); after a refusal the connection is closed within ``linger_timeout``
  (:func:`linger`);
* **memory**: the body is only read after the route's *admission* check has passed on
  the headers alone (the webhook's signature or token header), only when it announces a
  valid ``Content-Length`` of at most ``max_body`` (chunked, missing, negative or
  garbage lengths are 4xx), and at most ``max_body_reads`` bodies are read and handled
  at once (each into an anonymous ``mmap``, see :func:`read_body`), so the peak is about
  ``max_body_reads * max_body`` plus the parsing of authenticated ones; a head is at
  most ``max_head`` bytes (more is ``431``);
* **errors**: a malformed request gets a 4xx, a handler bug a bare ``500``; the log gets
  one structured line with the exception's class, never a traceback or request content.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import mmap
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import structlog

from gitops_ray.errors import ConfigError
from gitops_ray.runtime.intake import HeadReader, Intake, IntakeLimits, SocketWriter

log = structlog.get_logger(__name__)
MIB = 1024 * 1024
_CHUNK = 256 * 1024
_MAX_DIGITS = 18
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
         b"Content-Length: 5\r\nConnection: close\r\n\r\nbusy\n")


@dataclass(frozen=True)
class HttpLimits:
    """Every bound of the HTTP layer, in one place (see the module docstring)."""

    max_body: int = 25 * MIB  # GitHub caps webhook payloads at 25 MB
    max_connections: int = 64  # requests served at once (a thread each), per listen address
    max_body_reads: int = 4  # bodies read and handled at once, per listen address
    header_timeout: float = 10.0  # request line + headers, in all (slowloris)
    idle_timeout: float = 15.0  # a kept-alive connection's wait for its next request
    max_pending: int = 512  # connections whose head is still arriving, per listen address
    max_head: int = 64 * 1024  # request line + headers
    body_timeout: float = 10.0  # the whole body; GitHub gives up after 10 s anyway
    linger_bytes: int = 64 * 1024  # after a refusal, unread bytes discarded before closing
    linger_timeout: float = 1.0  # ... for at most this long


LIMITS = HttpLimits()


class Refusal(StrEnum):
    """Why the HTTP layer answered instead of the route's handler (a metric label)."""

    BUSY = "busy"  # too many connections, or no body slot within the body deadline
    HEAD_TIMEOUT = "head_timeout"  # request line + headers not in within header_timeout
    HEAD_TOO_LARGE = "head_too_large"  # request line + headers above max_head
    EVICTED = "evicted"  # dropped while its head arrived, to make room (max_pending)
    BAD_LENGTH = "bad_length"  # Content-Length missing, negative, not a number, or chunked
    TOO_LARGE = "too_large"  # Content-Length above max_body
    TIMEOUT = "timeout"  # the body did not arrive within body_timeout
    NOT_ADMITTED = "not_admitted"  # the route's header check refused it
    NOT_FOUND = "not_found"  # no such route (404) or method (405)
    ERROR = "error"  # the handler raised (a bare 500)


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query string, still percent-encoded
    headers: Mapping[str, str]  # lower-case names
    body: bytes | memoryview = b""  # memoryview: read-only use, copy to keep it
    query: str = ""  # after the ``?``, undecoded
    client: str = ""  # the peer's address (a proxy's, behind one)


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b"ok\n"
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


def json_response(status: int, doc: Mapping[str, Any]) -> Response:
    """A JSON document (one line) as the response (``/readyz``, the webhook's answer)."""
    return Response(status, json.dumps(doc).encode() + b"\n", "application/json")


Handler = Callable[[Request], Response]
Admit = Callable[[Mapping[str, str]], Response | None]
"""Judges a request on its headers alone, before any body is read; a Response refuses."""
OnRefused = Callable[[Refusal], None]


@dataclass(frozen=True)
class Route:
    """A handler, and optionally an admission check on the headers (see :data:`Admit`).

    ``max_body``: a smaller body limit than the server's (a form needs kilobytes, a
    webhook megabytes); ``None`` keeps :attr:`HttpLimits.max_body`.
    """

    handle: Handler
    admit: Admit | None = None
    max_body: int | None = None


Routes = Mapping[tuple[str, str], Handler | Route]  # (method, path) -> handler
PREFIX = "*"
"""A route path ending in ``/*`` serves every path below it (``/apps/*``: ``/apps/x/y``);
the longest matching prefix wins, an exact path beats any prefix."""


def find_route(table: Mapping[tuple[str, str], Route], method: str, path: str
               ) -> Route | None:
    """The route serving ``method path``: the exact one, else the longest prefix route."""
    exact = table.get((method, path))
    if exact is not None:
        return exact
    best: tuple[int, Route] | None = None
    for (m, pattern), route in table.items():
        if m == method and _below(pattern, path) and (best is None or len(pattern) > best[0]):
            best = (len(pattern), route)
    return best[1] if best is not None else None


def _below(pattern: str, path: str) -> bool:
    """Whether ``path`` is under the prefix route ``pattern`` (``/apps/*``)."""
    return pattern.endswith("/" + PREFIX) and path.startswith(pattern[:-1]) \
        and len(path) > len(pattern) - 1


class _Refused(Exception):
    def __init__(self, reason: Refusal, response: Response) -> None:
        super().__init__(reason.value)
        self.reason, self.response = reason, response


def split_address(address: str) -> tuple[str, int]:
    """``":8080"`` -> ``("", 8080)``; ``"127.0.0.1:0"`` -> ``("127.0.0.1", 0)``."""
    host, _, port = address.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError as e:
        raise ConfigError(f"bad listen address {address!r}: expected host:port") from e


def content_length(headers: Mapping[str, str], limit: int) -> int:
    """The announced body size; raises :class:`_Refused` unless it is sane and within ``limit``.

    ``headers`` has lower-case names. Chunked bodies are refused (411): every webhook
    sender we serve announces a length, and a length is what lets us refuse early.
    """
    if "transfer-encoding" in headers:
        raise _Refused(Refusal.BAD_LENGTH, Response(411, b"chunked bodies are not accepted\n"))
    text = headers.get("content-length")
    if text is None:
        raise _Refused(Refusal.BAD_LENGTH, Response(411, b"Content-Length required\n"))
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        raise _Refused(Refusal.BAD_LENGTH, Response(400, b"bad Content-Length\n"))
    if len(value) > _MAX_DIGITS or int(value) > limit:  # int() of 5,000 digits would raise
        raise _Refused(Refusal.TOO_LARGE, Response(413, b"payload too large\n"))
    return int(value)


def _headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case names; a repeated header's values joined with ``, `` (RFC 9110 5.3).

    So two ``Content-Length`` headers become ``"5, 7"``, which is not a number: 400.
    """
    out: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def announces_body(headers: Mapping[str, str]) -> bool:
    """Whether the client says a body follows (which a body-less route will not read)."""
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() != "0"


def read_body(rfile: Any, sock: socket.socket, length: int, deadline: float) -> memoryview:
    """Read exactly ``length`` bytes by ``deadline`` (monotonic); :class:`_Refused` if late.

    One ``recv`` at a time, each with the time left as its timeout, so the deadline
    holds however slowly the bytes trickle in. The bytes land in an anonymous ``mmap``
    of exactly ``length``: it goes back to the kernel as soon as the request is dropped,
    whereas a large ``bytearray`` freed in a handler thread's malloc arena tends to stay
    in the process (measured: 20 concurrent 24 MiB bodies peaked at 157 MiB this way,
    at 400-480 MiB with a ``bytearray``).
    """
    if length == 0:
        return memoryview(b"")
    body = memoryview(mmap.mmap(-1, length))
    got = 0
    while got < length:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Refused(Refusal.TIMEOUT, Response(408, b"request body too slow\n"))
        sock.settimeout(left)
        try:
            n = rfile.readinto1(body[got:got + _CHUNK])
        except TimeoutError:
            raise _Refused(Refusal.TIMEOUT, Response(408, b"request body too slow\n")) from None
        if not n:
            raise _Refused(Refusal.BAD_LENGTH, Response(400, b"body shorter than announced\n"))
        got += n
    return body


def linger(sock: socket.socket, limits: HttpLimits) -> None:
    """Half-close, then discard a little of what the client still sends, then return.

    Closing a socket with unread bytes makes the kernel send a reset, which can destroy
    the response before the client reads it: a small unsigned delivery would see
    "connection reset" instead of its 401. Discarding into a small buffer for a bounded
    time (nginx's "lingering close") avoids that; a big body is still never read.
    """
    deadline = time.monotonic() + limits.linger_timeout
    left = limits.linger_bytes
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        while left > 0 and (wait := deadline - time.monotonic()) > 0:
            sock.settimeout(wait)
            chunk = sock.recv(min(left, 16384))
            if not chunk:
                return
            left -= len(chunk)


class _Server(ThreadingHTTPServer):
    """A threaded server that bounds its connections and logs errors in one line.

    Accepted connections go to the :class:`~gitops_ray.runtime.intake.Intake`; one whose
    head is complete gets a connection slot and a thread for one request, then goes back
    to the intake if it is kept alive (its unread bytes with it).
    """

    daemon_threads = True
    request_queue_size = 128  # listen backlog: a burst waits in the kernel, not in threads

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 limits: HttpLimits, on_refused: OnRefused) -> None:
        super().__init__(address, handler)
        self._handler_type = handler
        self.limits = limits
        self.on_refused = on_refused
        self.body_slots = threading.BoundedSemaphore(limits.max_body_reads)
        self._connections = threading.BoundedSemaphore(limits.max_connections)
        self._heads: dict[int, bytes] = {}
        self._heads_lock = threading.Lock()
        self.intake = Intake(IntakeLimits(limits.header_timeout, limits.idle_timeout,
                                          limits.max_head, limits.max_pending),
                             self._head_arrived,
                             on_dropped=lambda reason: on_refused(Refusal(reason)))

    def process_request(self, request: Any, client_address: Any) -> None:
        self.intake.add(request, client_address)

    def _head_arrived(self, sock: socket.socket, client_address: Any, head: bytes) -> None:
        if not self._connections.acquire(blocking=False):
            self._refuse_busy(sock)
            return
        with self._heads_lock:
            self._heads[id(sock)] = head
        try:
            threading.Thread(target=self._serve_one, args=(sock, client_address),
                             name="http", daemon=True).start()
        except BaseException:
            self._connections.release()
            self.shutdown_request(sock)
            raise

    def take_head(self, sock: socket.socket) -> bytes:
        with self._heads_lock:
            return self._heads.pop(id(sock), b"")

    def _serve_one(self, sock: socket.socket, client_address: Any) -> None:
        """One request of ``sock`` in this thread; then back to the intake, or closed."""
        leftover: bytes | None = None
        try:
            handler = self._handler_type(sock, client_address, self)
            leftover = getattr(handler, "kept", None)
        except Exception:
            self.handle_error(sock, client_address)
        finally:
            self._connections.release()
        if leftover is None:
            self.shutdown_request(sock)
        else:
            self.intake.add(sock, client_address, leftover, idle=True)

    def _refuse_busy(self, request: socket.socket) -> None:
        """Answer 503 without a thread (the send buffer of a new socket is empty)."""
        self.on_refused(Refusal.BUSY)
        try:
            request.setblocking(False)
            request.send(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One structured line (no traceback: it could carry request content).

        A client that went away (reset, broken pipe) is routine, so it is logged at debug.
        """
        error = sys.exc_info()[1]
        level = log.debug if isinstance(error, ConnectionError) else log.warning
        level("http_connection_failed", client=str(client_address[0]),
              error=type(error).__name__)


class _Handler(BaseHTTPRequestHandler):
    """One request on a connection the intake handed over.

    :func:`_handler_class` binds its routes: ``socketserver`` makes one instance per
    request from the class, so the table rides on the class (the limits are the server's).
    """

    table: ClassVar[dict[tuple[str, str], Route]]
    server_version = "gitops-ray"
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # a garbage request line gets a status line too
    server: _Server
    kept: bytes | None = None  # kept alive: the bytes read past this request

    def setup(self) -> None:
        self.connection = self.request
        self.connection.settimeout(self.server.limits.header_timeout)
        self.reader = HeadReader(self.connection, self.server.take_head(self.connection))
        self.rfile, self.wfile = self.reader, SocketWriter(self.connection)

    def handle(self) -> None:
        """One request; a kept-alive connection's next one is the intake's to wait for."""
        self.close_connection = True
        self.handle_one_request()
        if not self.close_connection:
            self.kept = self.reader.leftover()

    def finish(self) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:  # other methods: 405 (or 404), not the base class's 501
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        headers = _headers(self.headers.items())
        route = find_route(self.table, method, path)
        try:
            if route is None:
                allowed = any(find_route(self.table, m, path) for m, _ in self.table)
                raise _Refused(Refusal.NOT_FOUND,
                               Response(405 if allowed else 404, b"not found\n"))
            self._send(self._serve(route, Request(method, path, headers, query=query,
                                                  client=str(self.client_address[0]))))
        except _Refused as refused:
            self.server.on_refused(refused.reason)
            self.close_connection = True  # an unread body may follow
            self._send(refused.response)
            linger(self.connection, self.server.limits)

    def _serve(self, route: Route, request: Request) -> Response:
        if request.method != "POST":
            if announces_body(request.headers):
                self.close_connection = True  # the body is never read
            return self._call(route, request)
        limit = min(route.max_body or self.server.limits.max_body,
                    self.server.limits.max_body)
        length = content_length(request.headers, limit)
        refusal = route.admit(request.headers) if route.admit else None
        if refusal is not None:
            raise _Refused(Refusal.NOT_ADMITTED, refusal)
        return self._with_body(route, request, length)

    def _with_body(self, route: Route, request: Request, length: int) -> Response:
        limits = self.server.limits
        deadline = time.monotonic() + limits.body_timeout
        if not self.server.body_slots.acquire(timeout=limits.body_timeout):
            raise _Refused(Refusal.BUSY, Response(503, b"busy\n"))
        try:
            body = read_body(self.rfile, self.connection, length, deadline)
            self.connection.settimeout(limits.header_timeout)
            return self._call(route, dataclasses.replace(request, body=body))
        finally:
            self.server.body_slots.release()

    def _call(self, route: Route, request: Request) -> Response:
        try:
            return route.handle(request)
        except Exception as e:  # a handler bug: no traceback to the client or log
            log.error("http_handler_failed", path=request.path, error=type(e).__name__)
            raise _Refused(Refusal.ERROR, Response(500, b"internal error\n")) from e

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("http_request", client=self.client_address[0], line=format % args)


def _handler_class(routes: Routes) -> type[BaseHTTPRequestHandler]:
    table = {key: value if isinstance(value, Route) else Route(value)
             for key, value in routes.items()}
    return type("_Handler", (_Handler,), {"table": table})


class HttpServers:
    """One threaded HTTP server per distinct address, each with its own :class:`HttpLimits`."""

    def __init__(self, routes_by_address: Mapping[str, Routes], *,
                 limits: HttpLimits = LIMITS, on_refused: OnRefused = lambda reason: None
                 ) -> None:
        self._servers: list[_Server] = []
        for address, routes in routes_by_address.items():
            try:
                server = _Server(split_address(address), _handler_class(routes), limits,
                                 on_refused)
            except OSError as e:
                raise ConfigError(f"cannot listen on {address}: {e.strerror}") from e
            self._servers.append(server)

    def pending(self) -> int:
        """Connections whose request head is still arriving, on every address."""
        return sum(server.intake.pending() for server in self._servers)

    @property
    def ports(self) -> list[int]:
        return [int(s.server_address[1]) for s in self._servers]

    def start(self) -> None:
        for server in self._servers:
            server.intake.start()
            threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
            host, port = server.server_address[:2]
            log.info("http_listening", host=str(host), port=int(port))

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.intake.stop()
            server.server_close()


def group_routes(routes: Iterable[tuple[str, Routes]]
                 ) -> dict[str, dict[tuple[str, str], Handler | Route]]:
    """Merge route tables that share an address; empty addresses are disabled."""
    out: dict[str, dict[tuple[str, str], Handler | Route]] = {}
    for address, table in routes:
        if address:
            out.setdefault(address, {}).update(table)
    return out
