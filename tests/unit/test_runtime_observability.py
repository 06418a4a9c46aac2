"""HTTP routing, Prometheus exposition and log rendering (real sockets, no mocks)."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request

import pytest
import structlog

from gitops_ray.logs import Throttle, configure_logging, redact_url
from gitops_ray.runtime.metrics import AppState, Metrics
from gitops_ray.runtime.server import HttpServers, Request, Response, group_routes


def fetch(port: int, path: str, data: bytes | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", data=data,
                                    timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_routes_on_shared_and_separate_addresses() -> None:
    seen: list[Request] = []

    def hook(request: Request) -> Response:
        seen.append(request)
        return Response(202, b"queued\n")

    routes = group_routes([
        ("127.0.0.1:0", {("GET", "/healthz"): lambda r: Response()}),
        ("", {("GET", "/disabled"): lambda r: Response()}),
        ("127.0.0.1:0", {("POST", "/webhook"): hook}),
    ])
    assert list(routes) == ["127.0.0.1:0"]
    servers = HttpServers(routes)
    servers.start()
    try:
        port = servers.ports[0]
        assert fetch(port, "/healthz") == (200, b"ok\n")
        assert fetch(port, "/webhook", b'{"a": 1}') == (202, b"queued\n")
        assert seen[0].body == b'{"a": 1}' and seen[0].headers["content-length"] == "8"
        assert fetch(port, "/webhook")[0] == 405
        assert fetch(port, "/nope")[0] == 404
    finally:
        servers.stop()


def test_metrics_exposition() -> None:
    metrics = Metrics()
    metrics.observe_request("get", "rayclusters", 200, 0.01)
    metrics.observe_request("get", "rayclusters", 200, 0.01)
    metrics.apps.set("ray", AppState("OutOfSync", "Progressing"))
    metrics.apps.set("ray", AppState("Synced", "Healthy", last_sync=5.0))
    metrics.reconciles.labels("ray", "success").inc()
    text = metrics.exposition().decode()
    assert 'gitops_ray_k8s_requests_total{code="200",verb="get"} 2.0' in text
    assert ('gitops_ray_app_info{app="ray",health_status="Healthy",sync_status="Synced"} 1.0'
            in text)
    assert "OutOfSync" not in text  # no stale series after a status change
    assert 'gitops_ray_reconcile_total{app="ray",result="success"} 1.0' in text
    assert "gitops_ray_build_info" in text
    metrics.forget_app("ray")
    assert 'app="ray",health' not in metrics.exposition().decode()


def test_two_controllers_in_one_process_have_separate_metrics() -> None:
    first, second = Metrics(), Metrics()
    first.leader.set(1)
    assert "gitops_ray_leader 0.0" in second.exposition().decode()


@pytest.mark.parametrize(("url", "safe"), [
    ("https://user:tok3n@github.com/org/r.git", "https://***@github.com/org/r.git"),
    ("https://github.com/org/r.git", "https://github.com/org/r.git"),
    ("git@github.com:org/r.git", "git@github.com:org/r.git"),
])
def test_urls_are_redacted(url: str, safe: str) -> None:
    assert redact_url(url) == safe


def test_json_logs_carry_bound_context() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("auto", "info", stream)  # not a terminal: JSON
    try:
        structlog.get_logger("t").bind(app="ray").info("synced", resource="RayCluster:ns/ray")
        structlog.get_logger("t").debug("hidden")
        line = json.loads(stream.getvalue().splitlines()[-1])
        assert line["app"] == "ray" and line["resource"] == "RayCluster:ns/ray"
        assert line["event"] == "synced" and line["level"] == "info"
        assert "hidden" not in stream.getvalue()
    finally:
        structlog.reset_defaults()
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_throttle_lets_one_line_per_period_through_and_counts_the_rest() -> None:
    now = [0.0]
    throttle = Throttle(10, clock=lambda: now[0])
    assert throttle.allow("unsigned") == 0
    assert throttle.allow("unsigned") is None and throttle.allow("unsigned") is None
    assert throttle.allow("forged") == 0  # keys are independent
    now[0] = 10.0
    assert throttle.allow("unsigned") == 2
    assert throttle.allow("unsigned") is None
