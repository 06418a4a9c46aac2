"""The webhook cannot be exhausted without the secret (issue 13, item 3; issue 36, item 9).

Against the real controller process: malformed framing is a 4xx and never a traceback,
unsigned bodies are refused on their headers without being read, and floods of big
bodies and silent connections are bounded (threads, memory, time) so that a signed push
still gets through afterwards. Everything stays on loopback with bounded counts; peak
RSS (``VmHWM``) is printed for the record.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
import requests

from gitops_ray.runtime.server import LIMITS, MIB
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import SECRET, ControllerProcess, StartController, proc_status_kib
from tests.harness.runtime import application
from tests.harness.settings import NO_LEADER_ELECTION, controller_settings
from tests.samples import raycluster

BIG = 24 * MIB
FORGED = "sha256=" + "0" * 64  # well-formed, wrong: passes the header check, fails the HMAC
SILENT = 300


@pytest.fixture
def hooked(control_plane: LocalControlPlane, namespace: str, git_repo: GitRepo,
           controller_process: StartController) -> ControllerProcess:
    git_repo.commit({"manifests/rc.yaml": raycluster("hooked")})
    proc = controller_process("webhook-abuse", controller_settings(
        control_plane.kubeconfig, namespace, debounce=None, leaderElection=NO_LEADER_ELECTION,
        applications=[application("hooked", git_repo.url, namespace)]))
    eventually(proc.ready, message="controller ready")
    return proc


# -- raw HTTP -------------------------------------------------------------------------------

def head(length: int | str | None, *, signature: str | None = FORGED,
         extra: str = "") -> bytes:
    lines = ["POST /webhook HTTP/1.1", "Host: x", "X-GitHub-Event: push"]
    if signature is not None:
        lines.append(f"X-Hub-Signature-256: {signature}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + extra + "\r\n\r\n").encode()


def signed(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def connect(proc: ControllerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proc.webhook_port), timeout=30)


def exchange(proc: ControllerProcess, request: bytes, body: bytes = b"") -> int:
    """Send a request (the body from a second thread, as a client streaming it would);
    the status line's code, or 0 when the connection was reset before one arrived."""
    with connect(proc) as sock:
        sock.sendall(request)
        sender = threading.Thread(target=_send_quietly, args=(sock, body), daemon=True)
        sender.start()
        code = read_status(sock)
        sender.join(30)
        return code


def _send_quietly(sock: socket.socket, body: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(body)


def read_status(sock: socket.socket) -> int:
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n" not in data and (chunk := sock.recv(4096)):
            data += chunk
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0


def push(proc: ControllerProcess, repo: GitRepo) -> requests.Response:
    body = json.dumps({"ref": "refs/heads/main", "after": repo.git("rev-parse", "HEAD"),
                       "repository": {"clone_url": repo.url,
                                      "default_branch": "main"}}).encode()
    return requests.post(proc.webhook_url, data=body, timeout=30, headers={
        "X-GitHub-Event": "push", "X-Hub-Signature-256": signed(body)})


def threads(proc: ControllerProcess) -> int:
    return proc_status_kib(proc.pid, "Threads")  # a plain count, parsed the same way


def in_parallel(count: int, task: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        results[i] = task()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    return results


def assert_clean_log(proc: ControllerProcess) -> None:
    assert proc.alive()
    text = proc.text()
    assert "Traceback" not in text
    assert not proc.events("(not json)"), proc.events("(not json)")[:3]
    assert SECRET not in text


# -- tests ----------------------------------------------------------------------------------

MALFORMED = {  # what a client sends -> the status it must get (never a traceback)
    "negative": (head(-1), 400),
    "garbage": (head("abc"), 400),
    "two-lengths": (head("12, 13"), 400),
    "missing": (head(None), 411),
    "chunked": (head(None, extra="\r\nTransfer-Encoding: chunked"), 411),
    "too-large": (head(LIMITS.max_body + 1), 413),
    "unsigned": (head(BIG, signature=None), 401),
    "malformed-signature": (head(BIG, signature="sha256=short"), 401),
    "gitlab-wrong-token": (b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Gitlab-Event: Push Hook"
                           b"\r\nX-Gitlab-Token: guess\r\nContent-Length: 20000000\r\n\r\n", 401),
    "get": (b"GET /webhook HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    "bad-request-line": (b"GARBAGE\r\n\r\n", 400),
}


def test_malformed_requests_are_4xx_and_never_a_traceback(hooked: ControllerProcess) -> None:
    got = {name: exchange(hooked, request) for name, (request, _) in MALFORMED.items()}
    assert got == {name: code for name, (_, code) in MALFORMED.items()}
    assert_clean_log(hooked)


def test_bodies_that_are_deep_or_not_json_are_400(hooked: ControllerProcess) -> None:
    for body in (b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe not json"):
        assert exchange(hooked, head(len(body), signature=signed(body)), body) == 400
    assert_clean_log(hooked)
    rejected = [r for r in hooked.events("webhook_rejected") if r.get("status") == 400]
    assert {r["reason"] for r in rejected} == {"the payload nests deeper than 32 levels",
                                               "the payload is not JSON"}


def test_unsigned_big_bodies_are_refused_without_being_read(hooked: ControllerProcess
                                                            ) -> None:
    body = b"x" * BIG
    before = hooked.rss_mib()
    codes = in_parallel(20, lambda: exchange(hooked, head(BIG, signature=None), body))
    after = hooked.rss_mib()
    print(f"20 unsigned 24 MiB bodies: RSS {before:.0f} -> {after:.0f} MiB, "
          f"peak {hooked.peak_rss_mib():.0f} MiB")
    assert set(codes) <= {401, 0} and 401 in codes  # 0: reset while the client still sent
    assert after - before < 16  # the bodies never entered the process
    assert_clean_log(hooked)


def test_floods_are_bounded_and_a_signed_push_still_gets_through(
        hooked: ControllerProcess, git_repo: GitRepo) -> None:
    baseline_threads, body = threads(hooked), b"x" * BIG
    codes = in_parallel(20, lambda: exchange(hooked, head(BIG), body))
    peak_after_bodies = hooked.peak_rss_mib()
    print(f"20 forged-signature 24 MiB bodies: statuses {sorted(set(codes))}, "
          f"peak RSS {peak_after_bodies:.0f} MiB")
    assert set(codes) <= {401, 503, 408, 0} and 401 in codes

    silent = [connect(hooked) for _ in range(SILENT)]
    try:
        for sock in silent:
            with contextlib.suppress(OSError):
                sock.sendall(b"POST /webhook HTTP/1.1\r\nContent-Length: 10\r\n")
        most = threads(hooked)
        print(f"{SILENT} silent connections: threads {baseline_threads} -> {most}")
        assert most <= baseline_threads + LIMITS.max_connections + 8
        assert hooked.readyz() == 200  # the probes have their own server and limits

        accepted = eventually(lambda: _accepted(hooked, git_repo), timeout=90,
                              message="a signed push gets through the flood")
        assert accepted.json()["refreshed"] == ["hooked"]
    finally:
        for sock in silent:
            sock.close()
    peak = hooked.peak_rss_mib()
    print(f"peak RSS (VmHWM) over the whole flood: {peak:.0f} MiB (chart limit 512 MiB)")
    assert peak < 256  # half the chart limit; measured ~160 (4 body slots x 24 MiB + ~65)
    assert "gitops_ray_http_refused_total" in hooked.metrics()
    assert_clean_log(hooked)


def test_heads_dripping_a_byte_at_a_time_do_not_keep_a_delivery_out(
        hooked: ControllerProcess, git_repo: GitRepo) -> None:
    """Slowloris (issue 36, item 9): more dripping connections than there are slots, each
    sending a byte of its headers again and again; a signed push still gets 202 at once,
    and every dripping one is cut off when its head's total deadline is up (408)."""
    baseline = threads(hooked)
    dripping = [connect(hooked) for _ in range(LIMITS.max_connections * 2)]
    stop = threading.Event()

    def drip() -> None:
        while not stop.is_set():
            for sock in dripping:
                with contextlib.suppress(OSError):
                    sock.send(b"x")
            stop.wait(0.5)
    for sock in dripping:
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Pad: ")
    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        held = threads(hooked)
        response = push(hooked, git_repo)
        assert response.status_code == 202, response.text
        assert response.json()["refreshed"] == ["hooked"]
        print(f"{len(dripping)} dripping connections: threads {baseline} -> {held}, "
              f"header deadline {LIMITS.header_timeout:g} s")
        assert held <= baseline + 8  # they hold no thread each
        assert sorted({read_status(sock) for sock in dripping}) == [408]
    finally:
        stop.set()
        dripper.join(10)
        for sock in dripping:
            sock.close()
    assert 'reason="head_timeout"' in hooked.metrics()
    assert_clean_log(hooked)


def _accepted(proc: ControllerProcess, repo: GitRepo) -> requests.Response | None:
    with contextlib.suppress(requests.RequestException):
        response = push(proc, repo)
        return response if response.status_code == 202 else None
    return None
