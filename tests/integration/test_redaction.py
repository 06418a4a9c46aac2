"""What the sinks write to the real API server is redacted, whatever the caller passed."""

from __future__ import annotations

import json

from gitops_ray.kube import Kube
from gitops_ray.sync.events import post_event
from gitops_ray.sync.records import RecordStore, record_name

URL = "https://ci:rec-t0ken@git.example/org/repo.git"


def test_records_and_events_never_hold_userinfo(kube: Kube, namespace: str) -> None:
    store = RecordStore(kube, namespace)
    store.update("app", lambda r: r.status.update(
        {"repoURL": URL, "error": f"source: cannot read {URL}", "history": [{"m": URL}]}))
    cm = kube.get("v1", "ConfigMap", name=record_name("app"), namespace=namespace)
    assert cm is not None and "rec-t0ken" not in json.dumps(cm)
    assert store.load("app").status["repoURL"] == "https://***@git.example/org/repo.git"
    post_event(kube, cm, reason="ComparisonError", message=f"app: cannot read {URL}")
    events, _ = kube.list("v1", "Event", namespace)
    assert events and "rec-t0ken" not in json.dumps(events)
    assert "https://***@git.example" in events[0]["message"]
