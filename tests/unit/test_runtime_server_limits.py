"""The HTTP layer's bounds, on real loopback sockets with small limits (no mocks).

Each test speaks raw HTTP over a socket, so it can do what a hostile client does: lie
about the length, announce a body and never send it, or hold connections open.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Mapping

import pytest

from gitops_ray.runtime.server import (
    HttpLimits,
    HttpServers,
    Refusal,
    Request,
    Response,
    Route,
    content_length,
    group_routes,
)
from tests.harness import eventually

LIMITS = HttpLimits(max_body=1000, max_connections=4, max_body_reads=1, header_timeout=1.0,
                    body_timeout=1.0, idle_timeout=1.0)


class Server:
    def __init__(self, limits: HttpLimits = LIMITS) -> None:
        self.seen: list[Request] = []
        self.refused: list[Refusal] = []
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()  # a delivery is in the handler (holding its slot)
        routes = group_routes([("127.0.0.1:0", {
            ("POST", "/hook"): Route(self.handle, admit=self.admit),
            ("POST", "/boom"): self.boom,
            ("GET", "/ok"): lambda r: Response(),
            ("GET", "/hold"): self.hold,
        })])
        self.holding = 0
        self.servers = HttpServers(routes, limits=limits, on_refused=self.refused.append)
        self.port = self.servers.ports[0]

    def admit(self, headers: Mapping[str, str]) -> Response | None:
        return None if headers.get("x-token") == "yes" else Response(401, b"no token\n")

    def handle(self, request: Request) -> Response:
        self.entered.set()
        self.release.wait(10)
        self.seen.append(request)
        return Response(202, b"taken\n")

    def hold(self, request: Request) -> Response:
        self.holding += 1
        self.release.wait(10)
        return Response()

    def boom(self, request: Request) -> Response:
        raise RuntimeError("secret document value")

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return sock


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    s.servers.start()
    yield s
    s.release.set()
    s.servers.stop()


def exchange(server: Server, head: str, body: bytes = b"") -> bytes:
    """Send a request (head without the blank line) and read until the server closes."""
    with server.connect() as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        return read_all(sock)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                break
    return b"".join(chunks)


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


POST = "POST /hook HTTP/1.1\r\nHost: x\r\nX-Token: yes"


@pytest.mark.parametrize(("length", "code"), [
    ("-1", 400), ("abc", 400), ("1e3", 400), ("5, 7", 400), ("1001", 413),
    ("99999999999999999999999", 413), ("9" * 60000, 413)])
def test_bad_lengths_are_4xx_and_no_body_is_read(server: Server, length: str,
                                                 code: int) -> None:
    response = exchange(server, f"{POST}\r\nContent-Length: {length}", b"x" * 5)
    assert status(response) == code
    assert server.seen == []


def test_two_different_lengths_are_400(server: Server) -> None:
    response = exchange(server, f"{POST}\r\nContent-Length: 4\r\nContent-Length: 2", b"data")
    assert status(response) == 400 and server.seen == []


def test_missing_length_and_chunked_are_411(server: Server) -> None:
    assert status(exchange(server, POST)) == 411
    chunked = exchange(server, f"{POST}\r\nTransfer-Encoding: chunked", b"5\r\nhello\r\n0\r\n\r\n")
    assert status(chunked) == 411
    assert server.seen == [] and server.refused.count(Refusal.BAD_LENGTH) == 2


def test_admission_runs_on_the_headers_before_the_body_is_sent(server: Server) -> None:
    with server.connect() as sock:  # announces 1000 bytes, sends none, still gets its 401
        sock.sendall(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        response = read_all(sock)
    assert status(response) == 401 and response.endswith(b"no token\n")
    assert server.refused == [Refusal.NOT_ADMITTED]


def test_an_admitted_body_is_read_and_handled(server: Server) -> None:
    response = exchange(server, f"{POST}\r\nContent-Length: 4", b"data")
    assert status(response) == 202
    assert server.seen[0].body == b"data"


def test_a_body_that_never_arrives_times_out_with_408(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(f"{POST}\r\nContent-Length: 10\r\n\r\nabc".encode())
        response = read_all(sock)
    assert status(response) == 408 and server.seen == []


def test_silent_connections_are_dropped_after_the_header_timeout(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"POST /hook HTTP/1.1\r\n")  # and nothing more
        assert status(read_all(sock)) == 408  # then closed by the server
    assert Refusal.HEAD_TIMEOUT in server.refused
    assert status(exchange(server, "GET /ok HTTP/1.1\r\nHost: x")) == 200


def test_requests_beyond_the_bound_get_503_at_once(server: Server) -> None:
    server.release.clear()
    held = [server.connect() for _ in range(LIMITS.max_connections)]
    try:
        for sock in held:
            sock.sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        eventually(lambda: server.holding == LIMITS.max_connections,
                   message="every slot held by a request in its handler")
        with server.connect() as extra:
            extra.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status(read_all(extra)) == 503
        server.release.set()
        assert [status(read_all(sock)) for sock in held] == [200] * len(held)
    finally:
        for sock in held:
            sock.close()
    assert Refusal.BUSY in server.refused


def test_kept_alive_connections_hold_no_slot_and_are_closed_when_idle() -> None:
    server = Server(HttpLimits(max_connections=LIMITS.max_connections, idle_timeout=3.0))
    server.servers.start()
    kept = [server.connect() for _ in range(LIMITS.max_connections + 2)]
    try:
        for sock in kept:  # each served, then kept alive (HTTP/1.1)
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status(read_all(sock)) == 200
        assert status(exchange(server, "GET /ok HTTP/1.1\r\nHost: x")) == 200
        kept[0].sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")  # the next request
        assert status(read_all(kept[0])) == 200
        assert all(read_all(sock) == b"" for sock in kept[1:])  # closed once idle
    finally:
        for sock in kept:
            sock.close()
        server.servers.stop()


def test_heads_dripping_a_byte_at_a_time_are_cut_off_and_others_served(server: Server
                                                                       ) -> None:
    dripping = [server.connect() for _ in range(LIMITS.max_connections * 4)]
    stop = threading.Event()

    def drip() -> None:  # one byte per connection, again and again, never the blank line
        while not stop.is_set():
            for sock in dripping:
                with contextlib.suppress(OSError):
                    sock.send(b"X")
            stop.wait(0.05)
    dripper = threading.Thread(target=drip, daemon=True)
    for sock in dripping:
        sock.sendall(b"POST /hook HTTP/1.1\r\nX-Pad: ")
    dripper.start()
    try:
        assert status(exchange(server, f"{POST}\r\nContent-Length: 1", b"y")) == 202
        assert [status(read_all(sock)) for sock in dripping] == [408] * len(dripping)
    finally:
        stop.set()
        dripper.join(10)
        for sock in dripping:
            sock.close()
    assert server.refused.count(Refusal.HEAD_TIMEOUT) == len(dripping)


def test_when_too_many_heads_are_arriving_the_oldest_makes_room() -> None:
    server = Server(HttpLimits(max_pending=2, header_timeout=30.0))
    server.servers.start()
    try:
        first = server.connect()
        first.sendall(b"GET /ok HTTP/1.1\r\n")
        eventually(lambda: server.servers.pending() == 1, message="the first is pending")
        second = server.connect()
        second.sendall(b"GET /ok HTTP/1.1\r\n")
        eventually(lambda: server.servers.pending() == 2, message="the second is pending")
        assert status(exchange(server, "GET /ok HTTP/1.1\r\nHost: x")) == 200
        assert read_all(first) == b""  # dropped to make room
        second.sendall(b"Host: x\r\n\r\n")
        assert status(read_all(second)) == 200
        first.close()
        second.close()
    finally:
        server.servers.stop()
    assert Refusal.EVICTED in server.refused


def test_body_reads_beyond_the_bound_wait_then_get_503(server: Server) -> None:
    server.release.clear()  # the first delivery holds the only body slot
    first = server.connect()
    try:
        first.sendall(f"{POST}\r\nContent-Length: 1\r\n\r\nx".encode())
        assert server.entered.wait(10)  # the first holds the slot before the second comes
        second = exchange(server, f"{POST}\r\nContent-Length: 1", b"y")
        assert status(second) == 503
        server.release.set()
        assert status(read_all(first)) == 202
    finally:
        first.close()


def test_a_handler_error_is_a_bare_500(server: Server, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    response = exchange(server, "POST /boom HTTP/1.1\r\nHost: x\r\nContent-Length: 0")
    assert status(response) == 500 and response.endswith(b"internal error\n")
    assert b"secret document value" not in response and b"Traceback" not in response
    assert "Traceback" not in capsys.readouterr().err


def test_other_methods_and_oversized_headers_are_4xx(server: Server) -> None:
    assert status(exchange(server, "PUT /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 0")) == 405
    assert status(exchange(server, "DELETE /nope HTTP/1.1\r\nHost: x")) == 404
    many = "\r\n".join(f"X-H{i}: v" for i in range(120))
    assert status(exchange(server, f"GET /ok HTTP/1.1\r\n{many}")) == 431
    assert status(exchange(server, f"GET /ok HTTP/1.1\r\nX-Long: {'v' * 70000}")) == 431
    assert status(exchange(server, "GARBAGE")) == 400


def test_get_routes_never_read_a_body(server: Server) -> None:
    response = exchange(server, "GET /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5", b"hello")
    assert status(response) == 200 and b"Connection: close" in response


@pytest.mark.parametrize(("headers", "expected"), [
    ({"content-length": "0"}, 0), ({"content-length": " 12 "}, 12),
    ({"content-length": "1000"}, 1000)])
def test_content_length_accepts_plain_numbers(headers: dict[str, str], expected: int) -> None:
    assert content_length(headers, 1000) == expected


def test_a_refused_body_sent_in_full_still_gets_its_response(server: Server) -> None:
    body = b"x" * 50_000  # sent before the client reads (see server.linger)
    for _ in range(20):
        assert status(exchange(server, f"{POST}\r\nContent-Length: 50000", body)) == 413


def test_pipelined_requests_on_one_connection_are_each_answered(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
                     + f"{POST}\r\nContent-Length: 1\r\n\r\nz".encode()
                     + b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert [status(b"HTTP/" + r) for r in data.split(b"HTTP/")[1:]] == [200, 202, 200]
    assert [bytes(r.body) for r in server.seen] == [b"z"]
