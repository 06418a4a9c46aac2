"""A tiny HTTP layer for probes, metrics and webhooks (standard library, threads).

Why not a web framework: four routes, no templates, no async; ``http.server`` with a
thread per request is enough and adds no dependency. Routes are grouped by listen
address, so ``/metrics``, the probes and the webhook can live on separate ports (the
webhook is the only one exposed outside the cluster) or share one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog

from gitops_ray.errors import ConfigError

log = structlog.get_logger(__name__)
MAX_BODY = 25 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b"ok\n"
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]
Routes = Mapping[tuple[str, str], Handler]  # (method, path) -> handler


def split_address(address: str) -> tuple[str, int]:
    """``":8080"`` -> ``("", 8080)``; ``"127.0.0.1:0"`` -> ``("127.0.0.1", 0)``."""
    host, _, port = address.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError as e:
        raise ConfigError(f"bad listen address {address!r}: expected host:port") from e


def _handler_class(routes: Routes) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        server_version = "gitops-ray"
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def _dispatch(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            handler = routes.get((method, path))
            if handler is None:
                allowed = any(p == path for _, p in routes)
                self._send(Response(405 if allowed else 404, b"not found\n"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(Response(413, b"payload too large\n"))
                return
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(handler(Request(method, path, headers, body)))

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(response.body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("http_request", client=self.client_address[0], line=format % args)

    return _Handler


class HttpServers:
    """One threaded HTTP server per distinct address."""

    def __init__(self, routes_by_address: Mapping[str, Routes]) -> None:
        self._servers: list[ThreadingHTTPServer] = []
        for address, routes in routes_by_address.items():
            try:
                server = ThreadingHTTPServer(split_address(address), _handler_class(routes))
            except OSError as e:
                raise ConfigError(f"cannot listen on {address}: {e.strerror}") from e
            server.daemon_threads = True
            self._servers.append(server)

    @property
    def ports(self) -> list[int]:
        return [int(s.server_address[1]) for s in self._servers]

    def start(self) -> None:
        for server in self._servers:
            threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
            host, port = server.server_address[:2]
            log.info("http_listening", host=str(host), port=int(port))

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def group_routes(routes: Iterable[tuple[str, Routes]]
                 ) -> dict[str, dict[tuple[str, str], Handler]]:
    """Merge route tables that share an address; empty addresses are disabled."""
    out: dict[str, dict[tuple[str, str], Handler]] = {}
    for address, table in routes:
        if address:
            out.setdefault(address, {}).update(table)
    return out
