"""Real git servers for tests: smart HTTP behind Basic auth, and SSH with key auth.

:func:`serve_git` serves every bare repository under a directory on 127.0.0.1 through
git's own ``git http-backend`` (the smart HTTP protocol GitHub/GitLab speak).
:func:`serve_git_ssh` does the same over SSH: a paramiko server that accepts one public
key and runs git's own ``git upload-pack``, so the real OpenSSH client and git are tested
with the ``GIT_SSH_COMMAND`` the source stage builds (no sshd needed).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shlex
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:  # optional: only the SSH tests need it (pytest.importorskip guards them)
    import paramiko
except ImportError:  # pragma: no cover - depends on the environment
    paramiko = None

_ServerInterface: type = paramiko.ServerInterface if paramiko is not None else object


def _handler(root: Path, username: str, token: str,
             hold: Callable[[], None] | None = None, seen: list[tuple[str, str]] | None = None,
             redirect_to: str | None = None) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{username}:{token}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            if seen is not None:
                seen.append((self.path, self.headers.get("Authorization") or ""))
            if redirect_to is not None:
                self.send_response(302)
                self.send_header("Location", redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if hold is not None:
                hold()  # e.g. keep the client's git running while a test inspects it
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
def serve_git(root: Path, *, username: str = "ci", token: str,
              hold: Callable[[], None] | None = None, seen: list[tuple[str, str]] | None = None,
              redirect_to: str | None = None) -> Iterator[str]:
    """Serve the bare repos under ``root``; yields the base URL (``http://127.0.0.1:N``).

    ``hold``, if given, is called (in the request's thread) before each authenticated
    request is answered, so a test can look at the client while it waits. ``seen``, if
    given, gets each request's path and ``Authorization`` header (who offered what).
    ``redirect_to`` (a base URL) answers every request with a 302 to the same path there.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 _handler(root, username, token, hold, seen, redirect_to))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# -- SSH -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SshServer:
    """Where the SSH git server listens, and its host key as a known_hosts line."""

    port: int
    known_hosts_line: str

    def url(self, repo: str, user: str = "git") -> str:
        return f"ssh://{user}@127.0.0.1:{self.port}/{repo}"


@contextmanager
def serve_git_ssh(root: Path, *, authorized_key: str, user: str = "git") -> Iterator[SshServer]:
    """Serve the bare repos under ``root`` over SSH to ``user`` holding ``authorized_key``.

    ``authorized_key`` is an OpenSSH public key line (``ssh-ed25519 AAAA... comment``).
    """
    assert paramiko is not None, "serve_git_ssh needs paramiko"
    host_key = paramiko.ECDSAKey.generate()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    allowed = authorized_key.split()[1]
    thread = threading.Thread(target=_accept_loop, daemon=True,
                              args=(listener, host_key, root, user, allowed))
    thread.start()
    line = f"[127.0.0.1]:{port} {host_key.get_name()} {host_key.get_base64()}\n"
    try:
        yield SshServer(port, line)
    finally:
        listener.close()


def _accept_loop(listener: socket.socket, host_key: Any, root: Path, user: str,
                 allowed: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # listener closed: the server is shutting down
            return
        threading.Thread(target=_serve_ssh, args=(conn, host_key, root, user, allowed),
                         daemon=True).start()


def _serve_ssh(conn: socket.socket, host_key: Any, root: Path, user: str,
               allowed: str) -> None:
    transport = paramiko.Transport(conn)
    transport.add_server_key(host_key)
    server = _SshGit(user, allowed)
    try:
        transport.start_server(server=server)
        channel = transport.accept(timeout=30)
        if channel is not None and server.command_ready.wait(timeout=30):
            _run_git(channel, server.command, server.env, root)
    except (paramiko.SSHException, EOFError, OSError):
        pass  # the client went away or failed to authenticate
    finally:
        transport.close()


class _SshGit(_ServerInterface):  # type: ignore[misc]
    """Accepts one user with one key, a session channel, and one exec request."""

    def __init__(self, user: str, allowed: str) -> None:
        self.user, self.allowed = user, allowed
        self.command = ""
        self.env: dict[str, str] = {}
        self.command_ready = threading.Event()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: Any) -> int:
        ok = username == self.user and key.get_base64() == self.allowed
        return int(paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED)

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return int(paramiko.OPEN_SUCCEEDED if kind == "session"
                   else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED)

    def check_channel_env_request(self, channel: Any, name: bytes, value: bytes) -> bool:
        self.env[name.decode()] = value.decode()
        return True

    def check_channel_exec_request(self, channel: Any, command: bytes) -> bool:
        self.command = command.decode()
        self.command_ready.set()
        return True


def _run_git(channel: Any, command: str, env: dict[str, str], root: Path) -> None:
    """Run ``git-upload-pack '<path>'`` for a repo under ``root``, piping the channel."""
    args = shlex.split(command)
    repo = (root / args[-1].lstrip("/")).resolve() if len(args) == 2 else root
    if args[:1] != ["git-upload-pack"] or root.resolve() not in repo.parents:
        channel.sendall_stderr(f"fatal: command not allowed: {command}\n".encode())
        channel.send_exit_status(128)
        return
    extra = {k: v for k, v in env.items() if k == "GIT_PROTOCOL"}
    proc = subprocess.Popen(["git", "upload-pack", str(repo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **extra})
    threading.Thread(target=_pump_in, args=(channel, proc), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    while chunk := proc.stdout.read1(65536):
        channel.sendall(chunk)
    channel.sendall_stderr(proc.stderr.read())
    channel.send_exit_status(proc.wait())


def _pump_in(channel: Any, proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    try:
        while data := channel.recv(65536):
            proc.stdin.write(data)
            proc.stdin.flush()
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
