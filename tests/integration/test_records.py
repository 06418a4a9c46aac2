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


def test_writes_in_a_row_read_nothing_and_lose_no_concurrent_update(
        kube: Kube, control_plane: LocalControlPlane, namespace: str) -> None:
    """A store starts an update from the copy it last wrote: no read for the usual two or
    three writes of one sync. Another writer in between makes that copy stale: its 409
    costs a read and a retry, and both changes are kept."""
    counted = Kube.connect(str(control_plane.kubeconfig))  # its own client: its own hooks
    requests: list[tuple[str, int]] = []
    counted.hooks.append(lambda verb, resource, status, _seconds: requests.append(
        (verb, status)) if resource == "configmaps" else None)
    ours, theirs = RecordStore(counted, namespace), RecordStore(kube, namespace)
    ours.update("app", lambda r: r.status.update({"sync": "Synced"}))  # read (404), create
    ours.update("app", lambda r: r.status.update({"health": "Healthy"}))
    ours.update("app", lambda r: r.status.update({"health": "Healthy"}))  # no change
    assert requests == [("get", 404), ("create", 201), ("update", 200), ("get", 200)]
    theirs.update("app", lambda r: r.status.update({"theirs": True}))
    requests.clear()
    ours.update("app", lambda r: r.status.update({"ours": True}))  # from a stale copy
    assert requests == [("update", 409), ("get", 200), ("update", 200)]
    assert RecordStore(kube, namespace).read("app").status == {
        "sync": "Synced", "health": "Healthy", "theirs": True, "ours": True}
    kube.delete("v1", "ConfigMap", name=record_name("app"), namespace=namespace)
    requests.clear()
    ours.update("app", lambda r: r.status.update({"again": True}))  # deleted meanwhile
    assert [verb for verb, _ in requests] == ["update", "get", "create"]
    assert RecordStore(kube, namespace).read("app").status == {"again": True}


def test_a_store_that_only_reads_sees_every_write(kube: Kube, namespace: str) -> None:
    """``wait`` polls ``load`` on a store that writes nothing: each poll reads the server,
    while a store's own write is read back from memory."""
    watcher, writer = RecordStore(kube, namespace), RecordStore(kube, namespace)
    writer.update("app", lambda r: r.status.update({"sync": "OutOfSync"}))
    assert watcher.load("app").status == {"sync": "OutOfSync"}
    writer.update("app", lambda r: r.status.update({"sync": "Synced"}))
    assert watcher.load("app").status == {"sync": "Synced"}
    assert writer.load("app").status == {"sync": "Synced"}


def test_a_new_writer_starts_from_the_cached_copy_and_a_stale_one_costs_a_retry(
        kube: Kube, control_plane: LocalControlPlane, namespace: str) -> None:
    """A replica that takes a shard over has written none of its records: its first update
    starts from the watch cache's copy (``lookup``) instead of reading the server. A copy
    the cache has not caught up on costs a 409 and a read, and loses nothing."""
    previous = RecordStore(kube, namespace)
    previous.update("app", lambda r: r.status.update({"sync": "Synced"}))
    cache = {"copy": kube.get("v1", "ConfigMap", name=record_name("app"), namespace=namespace)}
    counted = Kube.connect(str(control_plane.kubeconfig))  # its own client: its own hooks
    requests: list[tuple[str, int]] = []
    counted.hooks.append(lambda verb, resource, status, _seconds: requests.append(
        (verb, status)) if resource == "configmaps" else None)
    new_owner = RecordStore(counted, namespace, lookup=lambda *_: cache["copy"])
    new_owner.update("app", lambda r: r.status.update({"health": "Healthy"}))
    assert requests == [("update", 200)]  # no read

    previous.update("app", lambda r: r.status.update({"theirs": True}))  # not cached yet
    fresh = RecordStore(counted, namespace, lookup=lambda *_: cache["copy"])
    requests.clear()
    fresh.update("app", lambda r: r.status.update({"ours": True}))
    assert requests == [("update", 409), ("get", 200), ("update", 200)]
    assert RecordStore(kube, namespace).read("app").status == {
        "sync": "Synced", "health": "Healthy", "theirs": True, "ours": True}
    lister = RecordStore(kube, namespace)
    lister.update("other", lambda r: r.status.update({"sync": "Synced"}))
    assert set(lister.list_apps()) == {"app", "other"}
    assert list(lister.list_apps(lambda name: name == "other")) == ["other"]
