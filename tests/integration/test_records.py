"""App records against the real API server: the first write creates a missing control
namespace, without reading Namespaces first (the chart's ServiceAccount may not; writing
as that ServiceAccount is tested in tests/faults/test_chart_rbac.py)."""

from __future__ import annotations

import secrets

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore, record_name
from localcluster import LocalControlPlane


def test_first_record_creates_a_missing_namespace(control_plane: LocalControlPlane) -> None:
    kube = Kube.connect(str(control_plane.kubeconfig))  # its own client: its own hooks
    requests: list[tuple[str, str, int]] = []
    kube.hooks.append(lambda verb, resource, status, _seconds: requests.append(
        (verb, resource, status)))
    namespace = f"t-{secrets.token_hex(4)}"
    store = RecordStore(kube, namespace)
    try:
        store.update("app", lambda r: r.status.update({"sync": "Synced"}))
        assert kube.get("v1", "ConfigMap", name=record_name("app"), namespace=namespace) is not None
        store.update("app", lambda r: r.status.update({"health": "Healthy"}))
        assert RecordStore(kube, namespace).load("app").status == {
            "sync": "Synced", "health": "Healthy"}
    finally:
        kube.delete("v1", "Namespace", name=namespace)
    assert ("create", "namespaces", 201) in requests
    assert not [r for r in requests if r[0] == "get" and r[1] == "namespaces"]
