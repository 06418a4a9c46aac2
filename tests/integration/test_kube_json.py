"""The kube client's JSON (gitops_ray.jsonio): the API server's values exactly, bounded refusals.

Against the real kube-apiserver: an object of a schemaless kind holding int64's extremes,
floats, non-ASCII text and deep nesting reads back through GET, LIST and a watch exactly
as it was written. A loopback HTTP server plays a hostile API server (the real one sends
only what Go's ``encoding/json`` writes): a body that is not JSON, or nested past orjson's
1,024 levels, fails that request with a ``KubeError`` naming a position, never a value,
and a watch stream with such an event ends as ``Unreachable``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from gitops_ray import jsonio
from gitops_ray.kube import AlreadyExists, Kube, KubeError, UnknownKind, Unreachable
from tests.harness import eventually
from tests.integration.test_kube_client import client, serving

BLOBS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "blobs.jsonio.gitops-ray.io"},
    "spec": {"group": "jsonio.gitops-ray.io", "scope": "Namespaced",
             "names": {"plural": "blobs", "singular": "blob", "kind": "Blob"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]},
}
API = "jsonio.gitops-ray.io/v1"
SECRET = "s3cret-value"


def _nested(depth: int) -> Any:
    value: Any = {"leaf": "é"}
    for _ in range(depth):
        value = {"n": value}
    return value


VALUES = {"ints": [0, -1, 2**63 - 1, -(2**63)], "floats": [0.1, 1e300, -2.5e-308, 1.5],
          "text": "é ☃ \u2028 \U0001f600 \"quoted\" \\", "bools": [True, False], "none": None,
          "deep": _nested(60)}


@pytest.fixture
def blobs(kube: Kube) -> str:
    with contextlib.suppress(AlreadyExists):
        kube.create(BLOBS, field_manager="tests")

    def served() -> bool:
        try:
            kube.resource(API, "Blob")
        except UnknownKind:
            return False
        return True

    eventually(served, message="the Blob CRD is served")
    return API


def test_values_read_back_exactly_through_get_list_and_watch(kube: Kube, namespace: str,
                                                             blobs: str) -> None:
    obj = {"apiVersion": blobs, "kind": "Blob",
           "metadata": {"name": "b", "namespace": namespace}, "data": VALUES}
    kube.create(obj, field_manager="tests")
    got = kube.get(blobs, "Blob", name="b", namespace=namespace)
    assert got is not None and got["data"] == VALUES
    assert [type(v) for v in got["data"]["floats"]] == [float] * 4
    items, version = kube.list(blobs, "Blob", namespace)
    assert [i["data"] for i in items] == [VALUES]
    changed = {**VALUES, "ints": [*VALUES["ints"], 7]}
    kube.patch(blobs, "Blob", name="b", namespace=namespace,
               patch=[{"op": "replace", "path": "/data/ints", "value": changed["ints"]}],
               field_manager="tests")
    events = (e for e in kube.watch(blobs, "Blob", namespace, resource_version=version,
                                    timeout_seconds=30) if e.type != "BOOKMARK")
    event = next(events)
    assert event.type == "MODIFIED" and event.object["data"] == changed
    events.close()


class Hostile:
    """A loopback server answering discovery truthfully and everything else with ``body``."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def answer(self, path: str) -> bytes:
        if path.split("?", maxsplit=1)[0] == "/api/v1":
            return json.dumps({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "namespaced": True, "kind": "ConfigMap",
                 "verbs": ["get", "list", "watch"]}]}).encode()
        return self.body


@contextlib.contextmanager
def hostile_server(hostile: Hostile) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            body = hostile.answer(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Handler) as url:
        yield url


@pytest.mark.parametrize("body", [
    b'{"data": {"token": "' + SECRET.encode() + b'"',  # cut short
    b'{"data": ' + SECRET.encode() + b"}",  # not JSON
    b'{"replicas": NaN, "token": "' + SECRET.encode() + b'"}',  # Python's json took NaN
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,  # nested past orjson's bound
], ids=["truncated", "not-json", "nan", "deep"])
def test_a_response_that_is_not_json_fails_that_request_naming_no_value(
        tmp_path: Path, body: bytes) -> None:
    with hostile_server(Hostile(body)) as url:
        kube = client(url, tmp_path)
        with pytest.raises(KubeError) as raised:
            kube.get("v1", "ConfigMap", name="x", namespace="n")
    message = str(raised.value)
    assert "the response is not JSON" in message and "GET /api/v1/namespaces/n" in message
    assert SECRET not in message and len(message) <= 512


def test_a_watch_event_nested_past_the_bound_ends_the_stream(tmp_path: Path) -> None:
    deep = b'{"type":"ADDED","object":' + b"[" * (jsonio.MAX_DECODE_DEPTH + 1) \
        + b"]" * (jsonio.MAX_DECODE_DEPTH + 1) + b"}\n"
    with hostile_server(Hostile(deep)) as url:
        kube = client(url, tmp_path)
        with pytest.raises(Unreachable) as raised:
            list(kube.watch("v1", "ConfigMap", "n", timeout_seconds=5))
    assert "stream broken" in str(raised.value) and "depth" in str(raised.value)


def test_an_apply_sends_the_values_exactly_and_refuses_what_json_cannot_hold(
        kube: Kube, namespace: str, blobs: str) -> None:
    """Server-side apply's body is encoded by jsonio (orjson), as every response is read.

    The API server parses it as YAML: YAML's line breaks and non-printables come back as
    they were (escaped), and so does a character past U+FFFF (raw; ``json.dumps``
    escaped it as a surrogate pair, which YAML refuses).
    """
    values = {k: v for k, v in VALUES.items() if v is not None}  # null: "not mine"
    values["yaml"] = "a \x85 b \u2029 c \ufeff d \x9f e \x7f f \uffff g \U0001f600 h \x80"
    obj = {"apiVersion": blobs, "kind": "Blob",
           "metadata": {"name": "applied", "namespace": namespace}, "data": values}
    written = kube.apply(obj, field_manager="tests")
    assert written["data"] == values
    got = kube.get(blobs, "Blob", name="applied", namespace=namespace)
    assert got is not None and got["data"] == values
    for bad in (float("nan"), 2**70):
        with pytest.raises(KubeError) as caught:
            kube.apply({**obj, "data": {"token": SECRET, "bad": bad}}, field_manager="tests")
        assert SECRET not in str(caught.value)
