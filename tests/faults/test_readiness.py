"""``/readyz`` tells the truth: 503 while the API server is unreachable or RBAC denies every
refresh, with the failing checks in the body and ``gitops_ray_ready{check}`` at 0, and 200
again once the cause is gone (issue 13, item 8).

The outage is real but private: the controller reaches the session's API server through
a TCP relay this test owns, and the test cuts the relay (refusing connections and
breaking the open ones, watches included) instead of stopping the shared control plane.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gitops_ray.kube import Kube, Unreachable
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController, service_account_kubeconfig
from tests.harness.runtime import application
from tests.harness.settings import FAST_LEASE, NO_LEADER_ELECTION, controller_settings
from tests.samples import raycluster


class Relay:
    """A loopback TCP relay to ``target`` that can be cut and restored.

    Cut, it keeps its port (so no other process can take it meanwhile) but resets every
    connection, open or new, as a host whose API server went away would.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._open = True
        self._cut = threading.Event()  # set when the open connections are cut
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def cut(self) -> None:
        with self._lock:
            self._open = False
            conns, self._conns = self._conns, []
            self._cut.set()  # before any reset: no pump may pass an end on (see _pump)
            self._cut = threading.Event()  # the connections made after a restore
        for conn in conns:
            _reset(conn)

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                open_ = self._open
            if not open_:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:  # cut while connecting upstream: no survivor of the cut
                open_, cut = self._open, self._cut
                if open_:
                    self._conns += [client, upstream]
            if not open_:
                _reset(client)
                _reset(upstream)
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b, cut), daemon=True).start()


def _reset(conn: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dead peer's host answers.

    ``shutdown(SHUT_RD)`` first: a plain ``close()`` does not release a socket another
    thread is blocked reading (a pump), so no RST would go out and an idle watch through
    the relay would never hear of the cut.
    """
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RD)
    conn.close()


def _pump(src: socket.socket, dst: socket.socket, cut: threading.Event) -> None:
    """Copy ``src`` to ``dst``, then pass its end on, unless the relay was cut.

    A cut wakes the pump reading the client with an end of file (``SHUT_RD``); passing
    that on would tell the API server the client left, and its clean end of the watch
    (the last chunk, then FIN) could reach the client before the reset does: the stream
    would end without an error, unlike an API server that went away (a race a busy
    machine showed).
    """
    with contextlib.suppress(OSError):
        while (data := src.recv(65536)) and not cut.is_set():
            dst.sendall(data)
    if not cut.is_set():
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def relay(control_plane: LocalControlPlane) -> Iterator[Relay]:
    r = Relay(("127.0.0.1", control_plane.port))
    yield r
    r.close()


def kubeconfig_via(source: Path, port: int, path: Path) -> Path:
    doc = yaml.safe_load(source.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def settings(kubeconfig: Path, namespace: str, repo: GitRepo) -> dict[str, Any]:
    return controller_settings(kubeconfig, namespace, interval="2s",
                               leaderElection=NO_LEADER_ELECTION,
                               applications=[application("probed", repo.url, namespace)])


def readyz(proc: ControllerProcess) -> tuple[int, dict[str, Any]]:
    with contextlib.suppress(requests.RequestException, ValueError):
        resp = requests.get(f"http://127.0.0.1:{proc.health_port}/readyz", timeout=5)
        return resp.status_code, resp.json()
    return 0, {}


def failing_checks(proc: ControllerProcess) -> dict[str, str]:
    code, body = readyz(proc)
    return dict(body.get("failing") or {}) if code == 503 else {}


def gauge(proc: ControllerProcess, check: str) -> str:
    line = f'gitops_ray_ready{{check="{check}"}} '
    return next((x[len(line):] for x in proc.metrics().splitlines() if x.startswith(line)), "")


def test_unreachable_api_server_is_503_until_it_answers_again(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        relay: Relay, tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("probed")})
    config = kubeconfig_via(control_plane.kubeconfig, relay.port, tmp_path / "relay.kubeconfig")
    proc = controller_process("ready-relay", settings(config, namespace, git_repo))
    eventually(proc.ready, message="ready through the relay")
    eventually(lambda: kube.get("ray.io/v1", "RayCluster", name="probed", namespace=namespace),
               message="synced through the relay")
    assert gauge(proc, "api_reachable") == "1.0"

    relay.cut()
    failed = eventually(lambda: failing_checks(proc).get("api_reachable"),
                        message="503 naming api_reachable")
    print(f"503 body reason: {failed}")
    assert "has not answered" in failed
    assert gauge(proc, "api_reachable") == "0.0"  # metrics still answer during the outage

    relay.restore()
    eventually(proc.ready, message="ready again once the API server answers")
    assert gauge(proc, "api_reachable") == "1.0"
    assert proc.alive()
    assert not [r for r in proc.records() if r.get("event") == "(not json)"]


def test_a_watch_cut_mid_stream_is_heard_as_the_api_server_not_answering(
        control_plane: LocalControlPlane, namespace: str, relay: Relay, tmp_path: Path) -> None:
    """A refresh that reuses its last comparison sends no request, so an idle watch is
    often the only connection open when the API server goes away: its break counts."""
    config = kubeconfig_via(control_plane.kubeconfig, relay.port, tmp_path / "relay.kubeconfig")
    watcher = Kube.connect(str(config))
    heard: list[tuple[str, str, int]] = []
    watcher.hooks.append(lambda verb, resource, status, _: heard.append((verb, resource, status)))
    stream = watcher.watch("v1", "ConfigMap", namespace, timeout_seconds=120)
    broken: list[BaseException] = []

    def read() -> None:
        try:
            for _ in stream:
                pass
        except Unreachable as e:
            broken.append(e)

    reader = threading.Thread(target=read, daemon=True)  # reads until the cut
    reader.start()
    eventually(lambda: ("watch", "configmaps", 200) in heard, message="the watch is open")
    relay.cut()
    reader.join(60)
    assert broken, "the cut ended the stream with an error"
    assert heard[-1] == ("watch", "configmaps", 0)


def test_every_refresh_forbidden_is_503_until_rbac_allows_it(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("probed")})
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "nobody", "namespace": namespace}}, field_manager="tests")
    config = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                        name="nobody", path=tmp_path / "nobody.kubeconfig")
    proc = controller_process("ready-rbac", settings(config, namespace, git_repo))

    failed = eventually(lambda: failing_checks(proc).get("api_authorized"), timeout=90,
                        message="503 naming api_authorized")
    print(f"503 body reason: {failed}")
    assert "denied" in failed
    assert gauge(proc, "api_authorized") == "0.0"
    assert readyz(proc)[0] == 503

    binding = f"gitops-ray-faults-{namespace}"
    kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": binding},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "cluster-admin"},
                 "subjects": [{"kind": "ServiceAccount", "name": "nobody",
                               "namespace": namespace}]}, field_manager="tests")
    try:
        eventually(proc.ready, timeout=90, message="ready once RBAC allows the refresh")
        assert gauge(proc, "api_authorized") == "1.0"
        eventually(lambda: kube.get("ray.io/v1", "RayCluster", name="probed", namespace=namespace),
                   message="and it syncs")
    finally:
        kube.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name=binding)


def test_leader_election_denied_is_503_until_leases_are_allowed(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("probed")})
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "no-leases", "namespace": namespace}},
                field_manager="tests")
    everything_but_leases = [{"apiGroups": ["", "ray.io"], "resources": ["*"], "verbs": ["*"]}]
    leases = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]
    name = f"gitops-ray-faults-{namespace}"
    grant(kube, "ClusterRole", name, namespace, "no-leases", everything_but_leases)
    config = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                        name="no-leases", path=tmp_path / "sa.kubeconfig")
    proc = controller_process("ready-lease", {
        **settings(config, namespace, git_repo), "leaderElection": FAST_LEASE})
    try:
        failed = eventually(lambda: failing_checks(proc).get("leader_election"),
                            message="503 naming leader_election")
        print(f"503 body reason: {failed}")
        assert "HTTP 403" in failed
        assert gauge(proc, "leader_election") == "0.0"

        grant(kube, "Role", name, namespace, "no-leases", leases)
        eventually(proc.ready, message="ready once the lease can be taken")
        eventually(lambda: kube.get("ray.io/v1", "RayCluster", name="probed", namespace=namespace),
                   message="and, leading, it syncs")
    finally:
        kube.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name=name)
        kube.delete("rbac.authorization.k8s.io/v1", "ClusterRole", name=name)


def grant(kube: Kube, kind: str, name: str, namespace: str, account: str,
          rules: list[dict[str, Any]]) -> None:
    """A (Cluster)Role with ``rules`` bound to ServiceAccount ``account``."""
    scope = {"namespace": namespace} if kind == "Role" else {}
    api = "rbac.authorization.k8s.io/v1"
    kube.create({"apiVersion": api, "kind": kind, "metadata": {"name": name, **scope},
                 "rules": rules}, field_manager="tests")
    kube.create({"apiVersion": api, "kind": f"{kind}Binding",
                 "metadata": {"name": name, **scope},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                             "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": account,
                               "namespace": namespace}]}, field_manager="tests")
