"""Pure helpers of the controller: event-to-app mapping and write avoidance."""

from __future__ import annotations

import json

from gitops_ray.reconcile.pause import PAUSE_KEY, Pause
from gitops_ray.runtime.controller import (
    app_of_event,
    fingerprint,
    record_app,
    record_pause,
    record_status,
)
from gitops_ray.sync.records import record_name
from gitops_ray.sync.tracking import TRACKING_ANNOTATION, with_tracking


def rc(name: str = "ray", namespace: str = "ns") -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": namespace}}


def test_event_maps_to_the_app_in_the_tracking_id() -> None:
    assert app_of_event(with_tracking("team-a", rc())) == "team-a"


def test_copied_or_missing_tracking_ids_map_to_nothing() -> None:
    assert app_of_event(rc()) is None
    copied = with_tracking("team-a", rc("original"))
    copied["metadata"]["name"] = "copy"  # annotation copied onto another object
    assert app_of_event(copied) is None
    broken = rc()
    broken["metadata"]["annotations"] = {TRACKING_ANNOTATION: "garbage"}
    assert app_of_event(broken) is None


def test_fingerprint_ignores_the_comparison_time() -> None:
    status = {"revision": "abc", "sync": "Synced", "comparedAt": 1.0, "history": [{}]}
    later = {**status, "comparedAt": 99.0, "history": [{}, {}]}
    assert fingerprint(status) == fingerprint(later)
    assert fingerprint(status) != fingerprint({**status, "sync": "OutOfSync"})


def record(app: str, status: dict, namespace: str = "gitops-ray") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": record_name(app), "namespace": namespace},
            "data": {"app": app, "status": json.dumps(status), "inventory": "[]"}}


def test_a_records_pause_is_read_from_its_event() -> None:
    pause = Pause(since=1.0, rollback_id=2)
    paused = record("prod", {"sync": "OutOfSync", PAUSE_KEY: pause.to_record()})
    assert record_app(paused, "gitops-ray") == "prod"
    assert record_pause(paused) == pause
    assert record_status(record("prod", {"sync": "Synced"}), quick=True) is None
    assert record_pause(record("prod", {"sync": "Synced"})) is None
    assert record_app(paused, "elsewhere") is None  # an app's own ConfigMap elsewhere
    mimic = record("prod", {})
    mimic["metadata"]["name"] = "prod-settings"  # an app's ConfigMap with the label
    assert record_app(mimic, "gitops-ray") is None
    garbled = record("prod", {})
    garbled["data"]["status"] = "{not json"
    assert record_pause(garbled) is None
