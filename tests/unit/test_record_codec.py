"""The record codec: every record the previous version wrote reads and writes back as it was.

``tests/testdata/records/`` holds record ConfigMaps' ``data`` written by the version
before the typed records (recorded from its integration tests: syncs, waves, hooks, a
rollback with its pause, auto-sync's backoff, a failed refresh, the web page's Rollback).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.sync.appstatus import (
    AppStatus,
    Operation,
    decode_operation,
    decode_status,
    encode_operation,
    encode_status,
)
from gitops_ray.sync.records import _data, _decode

RECORDS = sorted((Path(__file__).parent.parent / "testdata" / "records").glob("*.json"))


def _cm(path: Path) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"},
            "data": json.loads(path.read_text())}


def test_there_are_recorded_fixtures() -> None:
    assert len(RECORDS) >= 5


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_a_recorded_record_round_trips_through_the_codec(path: Path) -> None:
    cm = _cm(path)
    status = json.loads(cm["data"]["status"])
    assert encode_status(decode_status(status)) == status
    record = _decode(cm)
    assert _data(cm["data"]["app"], record) == cm["data"]  # the same text, byte for byte


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_the_typed_view_reads_what_the_record_says(path: Path) -> None:
    raw = json.loads(json.loads(path.read_text())["status"])
    typed = decode_status(raw)
    assert typed.sync == raw.get("sync") and typed.revision == raw.get("revision")
    assert not {"sync", "revision", "history", "operation"} & set(typed.extra)
    if "operation" in raw:
        assert isinstance(typed.operation, Operation)
        assert typed.operation.phase == raw["operation"]["phase"]
        assert typed.operation.started_at == raw["operation"]["startedAt"]
    assert [e.id for e in typed.entries] == [e.get("id") for e in raw.get("history", [])]
    for row, typed_row in zip(raw.get("resources") or [], typed.resources or (), strict=True):
        assert typed_row.key == row["key"] and typed_row.status == row["status"]


def test_unknown_keys_and_values_of_another_type_are_kept_as_they_are() -> None:
    raw = {"sync": 3, "newKey": {"a": [1]}, "history": "not a list",
           "operation": {"phase": "Succeeded", "startedAt": True, "future": 1},
           "resources": [{"key": "k", "health": "odd"}], "selfHeal": "yes"}
    typed = decode_status(raw)
    assert typed.sync is None and typed.extra["sync"] == 3
    assert typed.history is None and typed.operation is not None
    assert typed.operation.started_at is None and typed.operation.extra["startedAt"] is True
    assert encode_status(typed) == raw


def test_absent_and_empty_stay_apart() -> None:
    assert encode_status(AppStatus()) == {}
    assert encode_status(decode_status({"error": ""})) == {"error": ""}
    op = Operation(revision="abc", phase="Failed", resources=())
    assert encode_operation(op) == {"revision": "abc", "phase": "Failed", "resources": []}
    assert decode_operation(encode_operation(op)) == op


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_a_headline_reads_the_same_fields_without_the_rows(path: Path) -> None:
    raw = json.loads(json.loads(path.read_text())["status"])
    full, headline = decode_status(raw), decode_status(raw, headline=True)
    assert headline.resources is None and headline.history is None
    assert not {"resources", "history", "impact"} & set(headline.extra)
    assert (headline.sync, headline.operation, headline.running, headline.pause) == \
        (full.sync, full.operation, full.running, full.pause)
