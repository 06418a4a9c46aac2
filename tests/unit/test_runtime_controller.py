"""Pure helpers of the controller: event-to-app mapping and write avoidance."""

from __future__ import annotations

from gitops_ray.runtime.controller import app_of_event, fingerprint
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
