"""A real git server over HTTP for tests: git's own ``git http-backend`` behind Basic auth.

Serves every bare repository under a directory on 127.0.0.1 (smart HTTP protocol, the same
as GitHub/GitLab speak), so credential handling is tested against real git clients.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _handler(root: Path, username: str, token: str) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{username}:{token}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {**os.environ, "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
                   "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
                   "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                   "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": username,
                   "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", "")}
            out = subprocess.run(["git", "http-backend"], input=body, env=env,
                                 capture_output=True, check=False).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            headers = [h.split(":", 1) for h in head.decode().split("\r\n") if ":" in h]
            status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
            self.send_response(status)
            for key, value in headers:
                if key.lower() != "status":
                    self.send_header(key, value.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def serve_git(root: Path, *, username: str = "ci", token: str) -> Iterator[str]:
    """Serve the bare repos under ``root``; yields the base URL (``http://127.0.0.1:N``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, username, token))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
