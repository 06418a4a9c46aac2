"""The Kube client's transport promises, against real servers.

Retries: a tiny HTTP server on loopback answers the way a busy API server does (429 with
``Retry-After``, 503) — the real API server only does that under overload, which a test
cannot summon on demand. Everything else runs against the real kube-apiserver: a watch
from a compacted version is ``410 Gone`` and the watch cache relists and reports what
changed; a record that keeps changing under a writer gives up with ``Conflict``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.kube import Conflict, Gone, Kube, KubeError, UnknownKind
from gitops_ray.kube.fence import WriteFence
from gitops_ray.kube.outbox import Outbox
from gitops_ray.runtime.kindwatch import KindWatch, WatchOptions
from gitops_ray.sync.events import post_event
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane


class Script:
    """Answers, in order, for each request; the last one repeats."""

    def __init__(self, *answers: tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.seen: list[str] = []

    def next(self, method: str) -> tuple[int, dict[str, str]]:
        self.seen.append(method)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@contextlib.contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, headers = script.next(self.command)
            body = json.dumps({"kind": "ConfigMap", "apiVersion": "v1",
                               "metadata": {"name": "x"}} if status < 300 else
                              {"kind": "Status", "code": status, "message": "busy"}).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = _answer  # noqa: N815

    with serving(Handler) as url:
        yield url


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a loopback port, in a thread, for the block; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def client(url: str, tmp_path: Path) -> Kube:
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return Kube.connect(str(config))


def test_429_is_retried_honouring_retry_after(tmp_path: Path) -> None:
    script = Script((429, {"Retry-After": "1"}), (200, {}))
    with scripted_server(script) as url:
        kube = client(url, tmp_path)
        assert kube.call("POST", "/api/v1/namespaces/n/configmaps", body={})["metadata"]
    assert script.seen == ["POST", "POST"] and kube.retries == 1


def test_5xx_is_retried_only_when_repeating_is_safe(tmp_path: Path) -> None:
    with scripted_server(Script((503, {}), (200, {}))) as url:
        kube = client(url, tmp_path)
        assert kube.call("GET", "/api/v1/namespaces/n/configmaps/x") is not None
        assert kube.retries == 1
    script = Script((503, {}), (200, {}))
    with scripted_server(script) as url:
        kube = client(url, tmp_path)
        with pytest.raises(KubeError) as raised:
            kube.call("POST", "/api/v1/namespaces/n/configmaps", body={})
        assert raised.value.status == 503 and script.seen == ["POST"]


def test_retries_are_bounded(tmp_path: Path) -> None:
    script = Script((500, {}))
    with scripted_server(script) as url, pytest.raises(KubeError):
        client(url, tmp_path).call("GET", "/api/v1/namespaces/n/configmaps/x")
    assert len(script.seen) == 4  # the request and three resends


def test_an_unknown_kind_is_not_looked_up_again_and_again(kube: Kube) -> None:
    before = sum(n for (verb, _), n in kube.stats.items() if verb == "discovery")
    for _ in range(5):
        with pytest.raises(UnknownKind):
            kube.resource("nothing.example.com/v1", "Nothing")
    after = sum(n for (verb, _), n in kube.stats.items() if verb == "discovery")
    assert after - before <= 2  # one lookup and one refresh, then remembered


class GoneOnce(KindWatch):
    """A watch whose first stream the server ends with ``410 Gone`` (the version it
    resumed from was compacted), after an object was created while it was away."""

    gone = True

    def _stream(self, version: str) -> str:
        if self.gone:
            self.gone = False
            self.kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "while-away", "namespace": self.namespace}},
                             field_manager="tests")
            raise Gone("too old resource version", status=410)
        return super()._stream(version)


def test_the_watch_cache_relists_after_gone_and_reports_what_changed(
        kube: Kube, namespace: str) -> None:
    events: list[tuple[str, str]] = []
    seen = threading.Condition()

    def on_event(kind: str, obj: dict[str, Any]) -> None:
        with seen:
            events.append((kind, obj["metadata"]["name"]))
            seen.notify_all()

    kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "before", "namespace": namespace}},
                field_manager="tests")
    stop = threading.Event()
    watch = GoneOnce(kube, "v1", "ConfigMap", namespace, on_event=on_event, stop=stop,
                     options=WatchOptions(label_selector=None, timeout=5))
    threading.Thread(target=watch.run, daemon=True).start()
    try:
        with seen:  # the relist reports the object created while away as ADDED
            assert seen.wait_for(lambda: ("ADDED", "while-away") in events, timeout=60)
        assert watch.get(namespace, "while-away") is not None
        assert events.count(("ADDED", "before")) == 1  # unchanged: not reported again
        kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "after", "namespace": namespace}},
                    field_manager="tests")
        with seen:  # and the watch resumes
            assert seen.wait_for(lambda: ("ADDED", "after") in events, timeout=60)
    finally:
        stop.set()


def test_a_record_that_keeps_changing_gives_up_with_conflict(kube: Kube,
                                                            namespace: str) -> None:
    store = RecordStore(kube, namespace)
    store.update("busy", lambda r: r.status.update({"n": 0}))
    other = RecordStore(kube, namespace)

    def change(record: Any) -> None:  # another writer lands between our read and write
        other.update("busy", lambda r: r.status.update({"n": r.status["n"] + 1}))
        record.status["mine"] = True

    with pytest.raises(Conflict, match="kept changing"):
        store.update("busy", change, attempts=3)
    assert "mine" not in store.load("busy").status


def test_as_many_requests_in_flight_as_the_settings_allow_reuse_their_connections(
        control_plane: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The controller keeps ``workers`` x ``sync.parallelism`` (+ room) connections per
    cluster: that many requests at once open none that is dropped afterwards (a TLS
    handshake each, and urllib3's "Connection pool is full" warning)."""
    from concurrent.futures import ThreadPoolExecutor

    from gitops_ray.settings import WATCH_CONNECTIONS, load_settings

    settings = load_settings(flags={"workers": 3, "sync.parallelism": 4})
    assert settings.connections == 3 * 4 + WATCH_CONNECTIONS

    def burst(kube: Kube) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="urllib3.connectionpool"), \
                ThreadPoolExecutor(3 * 4) as pool:
            for _ in range(3):
                list(pool.map(lambda _: kube.list("v1", "ConfigMap", "default"), range(12)))
        return [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()]

    small = Kube.connect(str(control_plane.kubeconfig))
    small.keep_connections(2)
    assert burst(small)  # what the fleet runs logged: connections opened and dropped
    sized = Kube.connect(str(control_plane.kubeconfig))
    sized.keep_connections(settings.connections)
    assert burst(sized) == []


def test_queued_events_are_posted_by_the_outbox_under_the_fence_they_were_queued_in(
        kube: Kube, namespace: str, control_plane: LocalControlPlane) -> None:
    """The controller's Events leave the worker (kube/outbox.py), not the lease: one queued
    by a sync whose term was revoked before it was sent is refused, never written."""
    fenced = Kube.connect(str(control_plane.kubeconfig))  # its own client, as a controller
    fenced.fence, fenced.outbox = WriteFence(), Outbox()
    fenced.fence.grant(1, valid_until=time.monotonic() + 600)
    record = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "app-record", "namespace": namespace}}
    with fenced.fence.scope():
        post_event(fenced, record, reason="SyncSucceeded", message="posted")
    assert fenced.outbox.flush(60)
    assert _reasons(kube, namespace, "app-record") == ["SyncSucceeded"]

    opened = threading.Event()
    fenced.outbox.put(lambda: opened.wait(60), "gate")  # holds what is queued after it
    with fenced.fence.scope():
        post_event(fenced, record, reason="SyncFailed", message="too late", warning=True)
    fenced.fence.revoke()  # the lease was lost after the sync queued its Event
    opened.set()
    assert fenced.outbox.flush(60)
    assert fenced.outbox.failed == 1 and fenced.fence.refused == 1
    assert _reasons(kube, namespace, "app-record") == ["SyncSucceeded"]


def _reasons(kube: Kube, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in kube.list("v1", "Event", namespace)[0]
            if e["involvedObject"]["name"] == name]
