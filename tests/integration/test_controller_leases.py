"""Lease leader election, the watch cache and repository credentials on the real API server."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from gitops_ray.kube import Conflict, Kube, LeaseExpired
from gitops_ray.kube.leader import LEASE_API, LeaderElector, LeaseSettings
from gitops_ray.runtime.credentials import CredentialLookup
from gitops_ray.runtime.kindwatch import WatchOptions
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.settings import RepoCredential
from gitops_ray.sync.tracking import with_tracking
from gitops_ray.types import Manifest
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.samples import role_binding


class Candidate:
    """An elector running in a thread, recording its transitions and whether it lost."""

    def __init__(self, kube: Kube, namespace: str, identity: str) -> None:
        settings = LeaseSettings("ctl", namespace, identity, lease_duration=3.0,
                                 renew_deadline=2.0, retry_period=0.2)
        self.transitions: list[str] = []
        self.lost: list[bool] = []
        self.elector = LeaderElector(kube, settings,
                                     on_started=lambda: self.transitions.append("started"),
                                     on_stopped=lambda: self.transitions.append("stopped"))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: self.lost.append(
            self.elector.run(self.stop)), daemon=True)
        self.thread.start()

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def candidates(kube: Kube, namespace: str) -> Iterator[Callable[[str], Candidate]]:
    started: list[Candidate] = []

    def start(identity: str) -> Candidate:
        started.append(Candidate(kube, namespace, identity))
        return started[-1]

    yield start
    for c in started:
        c.halt()


def holder(kube: Kube, namespace: str) -> str | None:
    lease = kube.get(LEASE_API, "Lease", name="ctl", namespace=namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def test_exactly_one_leader_and_release_hands_over(
        kube: Kube, namespace: str, candidates: Callable[[str], Candidate]) -> None:
    a, b = candidates("a"), candidates("b")
    eventually(lambda: a.elector.is_leader or b.elector.is_leader)
    leader, follower = (a, b) if a.elector.is_leader else (b, a)
    assert not follower.elector.is_leader
    assert holder(kube, namespace) == leader.elector.settings.identity

    leader.halt()  # graceful: on_stopped, then the caller releases
    assert leader.transitions == ["started", "stopped"]
    assert leader.elector.release()
    eventually(lambda: follower.elector.is_leader, timeout=10)
    assert holder(kube, namespace) == follower.elector.settings.identity
    lease = kube.get(LEASE_API, "Lease", name="ctl", namespace=namespace)
    assert lease is not None and lease["spec"]["leaseTransitions"] >= 1


def test_dead_leader_is_replaced_after_the_lease_expires(
        kube: Kube, namespace: str, candidates: Callable[[str], Candidate]) -> None:
    first = candidates("first")
    eventually(lambda: first.elector.is_leader)
    # Simulate a crash: the thread stops renewing and never releases.
    first.stop.set()
    first.thread.join(10)
    second = candidates("second")
    eventually(lambda: second.elector.is_leader, timeout=20)
    assert holder(kube, namespace) == "second"


def test_a_leader_that_finds_the_lease_taken_stops_and_its_writes_are_refused(
        kube: Kube, control_plane: LocalControlPlane, namespace: str,
        candidates: Callable[[str], Candidate]) -> None:
    leader = candidates("a")
    eventually(lambda: leader.elector.is_leader)
    assert leader.elector.last_error is None
    writer = Kube.connect(str(control_plane.kubeconfig))  # the leader's writers' client
    writer.fence = leader.elector.fence
    writer.create(configmap(namespace, "before", "1"), field_manager="tests")
    writer.apply(configmap(namespace, "dry", "1"), field_manager="tests", dry_run=True)

    with leader.elector.fence.scope() as in_term:  # a sync that started in this term
        assert in_term
        # e.g. a takeover while we were paused; the leader renews meanwhile, so re-read on 409
        eventually(lambda: take_over(kube, namespace, "intruder"), message="takeover")
        leader.thread.join(10)
        assert leader.lost == [True] and leader.transitions == ["started", "stopped"]
        with pytest.raises(LeaseExpired, match="write refused: this replica is not the "
                                               "leader"):
            writer.create(configmap(namespace, "after", "1"), field_manager="tests")
    assert writer.apply(configmap(namespace, "dry", "2"), field_manager="tests",
                        dry_run=True)["data"] == {"v": "2"}  # dry runs are not writes
    assert kube.get("v1", "ConfigMap", name="after", namespace=namespace) is None
    assert holder(kube, namespace) == "intruder"


def take_over(kube: Kube, namespace: str, identity: str) -> bool:
    """Write another holder into the lease; ``False`` when a renewal came in between."""
    lease = kube.get(LEASE_API, "Lease", name="ctl", namespace=namespace)
    assert lease is not None
    lease["spec"]["holderIdentity"] = identity
    try:
        kube.replace(lease, field_manager="tests")
    except Conflict:
        return False
    return True


def configmap(namespace: str, name: str, value: str) -> Manifest:
    return with_tracking("app-x", {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name, "namespace": namespace},
                                   "data": {"v": value}})


def reads(kube: Kube) -> dict[tuple[str, int], int]:
    """Requests a lookup could make; the watch's own (it resumes every 5 s here) excluded."""
    return {k: n for k, n in kube.stats.items() if k[0] not in ("watch", "list")}


def test_watch_cache_serves_live_objects_and_reports_changes(
        kube: Kube, namespace: str) -> None:
    events: list[tuple[str, str]] = []
    cache = LiveCache(kube, on_event=lambda t, o: events.append((t, o["metadata"]["name"])),
                      options=WatchOptions(timeout=5))
    try:
        kube.create(configmap(namespace, "one", "1"), field_manager="tests")
        kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "unlabelled", "namespace": namespace}},
                    field_manager="tests")
        got = cache.get("v1", "ConfigMap", namespace, "one")
        assert got is not None and got["data"] == {"v": "1"}
        assert cache.synced() and cache.kinds() == ["v1/ConfigMap"]

        before = reads(kube)
        assert cache.get("v1", "ConfigMap", namespace, "one") is not None
        assert reads(kube) == before  # served from memory: no request

        # Unlabelled objects are not watched, but a lookup still finds them (GET).
        assert cache.get("v1", "ConfigMap", namespace, "unlabelled") is not None

        kube.patch("v1", "ConfigMap", name="one", namespace=namespace, patch={"data": {"v": "2"}},
                   content_type="application/merge-patch+json")
        eventually(lambda: (cache.get("v1", "ConfigMap", namespace, "one") or {}).get(
            "data") == {"v": "2"})
        # The handler runs right after the cache is updated, in the watch thread.
        eventually(lambda: ("MODIFIED", "one") in events)

        kube.delete("v1", "ConfigMap", name="one", namespace=namespace)
        eventually(lambda: ("DELETED", "one") in events)
    finally:
        cache.stop()


def test_fresh_block_reads_through(kube: Kube, namespace: str) -> None:
    cache = LiveCache(kube, on_event=lambda t, o: None, options=WatchOptions(timeout=5))
    try:
        kube.create(configmap(namespace, "c", "1"), field_manager="tests")
        assert cache.get("v1", "ConfigMap", namespace, "c") is not None
        gets = kube.stats[("get", 200)]
        with cache.fresh():
            assert cache.get("v1", "ConfigMap", namespace, "c") is not None
        assert kube.stats[("get", 200)] == gets + 1
    finally:
        cache.stop()


def test_a_syncs_own_lookups_stay_cached_in_a_fresh_block(kube: Kube, namespace: str) -> None:
    """A sync's read before its write (and a record's) may be a little behind: the write
    carries the version. What the cache does not hold is still asked of the API server."""
    cache = LiveCache(kube, on_event=lambda t, o: None, options=WatchOptions(timeout=5))
    try:
        kube.create(configmap(namespace, "c", "1"), field_manager="tests")
        assert cache.get("v1", "ConfigMap", namespace, "c") is not None  # starts the watch
        eventually(lambda: cache.cached("v1", "ConfigMap", namespace, "c") is not None)
        gets = kube.stats[("get", 200)], kube.stats[("get", 404)]
        with cache.fresh():
            assert (cache.lookup(configmap(namespace, "c", "0")) or {})["data"] == {"v": "1"}
            assert cache.known("v1", "ConfigMap", namespace, "c") is not None
            assert (kube.stats[("get", 200)], kube.stats[("get", 404)]) == gets
            assert cache.lookup(configmap(namespace, "absent", "0")) is None
        assert kube.stats[("get", 404)] == gets[1] + 1  # absence is the server's word
    finally:
        cache.stop()


def test_repo_credentials_from_files_and_secrets(kube: Kube, namespace: str,
                                                 tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("file-t0ken\n")
    kube.create({"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": "org-creds", "namespace": namespace},
                 "data": {"username": base64.b64encode(b"bot").decode(),
                          "password": base64.b64encode(b"secret-t0ken").decode()}},
                field_manager="tests")
    lookup = CredentialLookup([
        RepoCredential("https://git.example.com/", username="me", password_file=str(token)),
        RepoCredential("https://git.example.com/org/", secret="org-creds"),
        RepoCredential("https://other.example.com/", secret="missing")], kube, namespace)
    org = lookup("https://git.example.com/org/config.git")
    assert org is not None and (org.username, org.token) == ("bot", "secret-t0ken")
    plain = lookup("https://git.example.com/team/config.git")
    assert plain is not None and (plain.username, plain.token) == ("me", "file-t0ken")
    assert lookup("https://other.example.com/x.git") is None  # logged by name only
    assert "t0ken" not in repr(org) + repr(plain)


def limited_kube(kube: Kube, control_plane: LocalControlPlane, namespace: str,
                 tmp_path: Path) -> Kube:
    """A client whose RBAC only covers ConfigMaps in ``namespace`` (chart: clusterWide off)."""
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "limited", "namespace": namespace}}, field_manager="tests")
    kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                 "metadata": {"name": "limited", "namespace": namespace},
                 "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                            "verbs": ["get", "list", "watch"]}]}, field_manager="tests")
    kube.create(role_binding("limited", namespace), field_manager="tests")
    token = kube.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/limited/token",
                      body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 3600}})["status"]["token"]
    config = tmp_path / "limited.kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "limited",
        "clusters": [{"name": "cp", "cluster": {
            "server": control_plane.url,
            "certificate-authority": str(control_plane.workdir / "ca.crt")}}],
        "users": [{"name": "limited", "user": {"token": token}}],
        "contexts": [{"name": "limited", "context": {"cluster": "cp", "user": "limited"}}]}))
    return Kube.connect(str(config))


def test_watches_fall_back_to_namespaces_where_rbac_is_namespaced(
        kube: Kube, control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> None:
    limited = limited_kube(kube, control_plane, namespace, tmp_path)
    kube.create(configmap(namespace, "scoped", "1"), field_manager="tests")
    events: list[str] = []
    cache = LiveCache(limited, on_event=lambda t, o: events.append(o["metadata"]["name"]),
                      options=WatchOptions(timeout=5))
    try:
        got = cache.get("v1", "ConfigMap", namespace, "scoped")
        assert got is not None and got["data"] == {"v": "1"}
        assert cache.kinds() == ["v1/ConfigMap", f"v1/ConfigMap in {namespace}"]
        assert cache.synced()
        before = reads(limited)
        assert cache.get("v1", "ConfigMap", namespace, "scoped") is not None
        assert reads(limited) == before  # served by the namespace's watch
        kube.patch("v1", "ConfigMap", name="scoped",
                   namespace=namespace, patch={"data": {"v": "2"}},
                   content_type="application/merge-patch+json")
        eventually(lambda: "scoped" in events[1:])
    finally:
        cache.stop()
