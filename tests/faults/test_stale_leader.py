"""Issue 13: a leader paused past its lease must not write when it resumes.

Two real controller processes share a short lease. The leader is SIGSTOPped in the middle
of syncing revision A to 40 RayClusters; the follower takes the lease over and syncs
revision B; then the old leader is resumed. Before the write fence, it went on applying
A for a while and rolled clusters back. Now its first write after resuming is refused
(its own clock says the lease may have expired), the sync is abandoned and the process
exits to be restarted as a follower.

The no-namespace half: with leader election on and no control namespace, the lease
namespace is created, or, when RBAC forbids that, a warning says which namespace and
what to do (it used to be an info line, forever).
"""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from gitops_ray.kube import Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController, service_account_kubeconfig
from tests.harness.runtime import application
from tests.harness.settings import controller_settings
from tests.samples import raycluster

CLUSTERS = 40
APP = "stale"
LEASE = {"enabled": True, "leaseDuration": "4s", "renewDeadline": "3s",
         "retryPeriod": "500ms"}


def clusters(version: str) -> list[dict[str, Any]]:
    out = []
    for i in range(CLUSTERS):
        rc = copy.deepcopy(raycluster(f"rc-{i:02d}"))
        rc["spec"]["rayVersion"] = version
        out.append(rc)
    return out


PARALLELISM = 4
"""Applies of one app in flight at once (``sync.parallelism``): each worker thread must
see the term the sync started under, so a resumed stale leader sends none of them."""


def settings(control_plane: LocalControlPlane, repo: GitRepo, namespace: str,
             control_namespace: str | None = None) -> dict[str, Any]:
    return controller_settings(
        control_plane.kubeconfig, control_namespace or namespace, interval="1s",
        applications=[application(APP, repo.url, namespace)],
        leaderElection=LEASE, sync={"parallelism": PARALLELISM})


def lease_holder(kube: Kube, namespace: str) -> str:
    lease = kube.get(LEASE_API, "Lease", name="gitops-ray", namespace=namespace) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def live_clusters(kube: Kube, namespace: str) -> dict[str, tuple[str, str]]:
    """name -> (rayVersion, resourceVersion) of every RayCluster in the namespace."""
    items, _ = kube.list("ray.io/v1", "RayCluster", namespace)
    return {rc["metadata"]["name"]: (rc["spec"]["rayVersion"],
                                     rc["metadata"]["resourceVersion"]) for rc in items}


def all_at(kube: Kube, namespace: str, version: str) -> bool:
    live = live_clusters(kube, namespace)
    return len(live) == CLUSTERS and {v for v, _ in live.values()} == {version}


def synced(records: list[dict[str, Any]], sha: str) -> list[dict[str, Any]]:
    """The non-dry-run ``resource_synced`` lines logged after the sync of ``sha`` started."""
    started = [i for i, r in enumerate(records)
               if r.get("event") == "sync_started" and r.get("revision") == sha[:12]]
    if not started:
        return []
    return [r for r in records[started[0]:]
            if r.get("event") == "resource_synced" and r.get("dry_run") is False]


def finished(process: ControllerProcess, sha: str) -> bool:
    return any(r.get("revision") == sha[:12] for r in process.events("sync_finished"))


def stopped(process: ControllerProcess) -> bool:
    """Whether the kernel has stopped the process (state ``T`` in /proc/<pid>/stat)."""
    stat = Path(f"/proc/{process.pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def pause_mid_sync(leader: ControllerProcess, sha: str) -> None:
    """SIGSTOP ``leader`` once it has applied its first objects of revision ``sha``."""
    deadline = time.monotonic() + 120
    while len(synced(leader.records(), sha)) < 2:
        assert time.monotonic() < deadline, "the leader never started applying revision A"
        assert not finished(leader, sha), "the sync finished before it could be paused"
        time.sleep(0.01)
    leader.pause()
    eventually(lambda: stopped(leader), message="SIGSTOP delivered")


def test_a_resumed_stale_leader_writes_nothing(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": clusters("2.51.0")})
    config = settings(control_plane, git_repo, namespace)
    old = controller_process("ctl-a", config)
    eventually(lambda: lease_holder(kube, namespace) == "ctl-a", message="a leads")
    new = controller_process("ctl-b", config)
    eventually(new.ready, message="b ready")
    eventually(lambda: all_at(kube, namespace, "2.51.0"), message="first sync by a")

    rev_a = git_repo.commit({"manifests/rc.yaml": clusters("2.52.0")})
    pause_mid_sync(old, rev_a)
    assert not finished(old, rev_a)
    paused_log = len(old.records())

    rev_b = git_repo.commit({"manifests/rc.yaml": clusters("2.53.0")})
    eventually(lambda: lease_holder(kube, namespace) == "ctl-b", message="b takes over")
    eventually(lambda: all_at(kube, namespace, "2.53.0"), message="b syncs revision B")
    eventually(lambda: finished(new, rev_b), message="b's sync of B finished")
    before_resume = live_clusters(kube, namespace)

    old.resume()
    assert old.proc.wait(60) == 1  # lost the lease: exits to restart as a follower
    after = old.records()[paused_log:]
    events = [r.get("event") for r in after]
    assert "leader_lease_lost" in events
    assert live_clusters(kube, namespace) == before_resume  # not one write since
    assert all_at(kube, namespace, "2.53.0")
    # At most the applies in flight when it was stopped are logged after resuming (they
    # were answered before the follower's writes, as the resourceVersions above prove).
    assert len([r for r in after if r.get("event") == "resource_synced"
                and r.get("dry_run") is False]) <= PARALLELISM
    assert "sync_finished" not in events  # the sync under the old term never finished
    operation = RecordStore(kube, namespace).load(APP).status["operation"]
    assert (operation["controller"], operation["revision"]) == ("ctl-b", rev_b)
    aborted = [r for r in after if r.get("event") == "sync_aborted_lease_expired"]
    assert aborted and "write refused" in aborted[0]["error"]
    assert lease_holder(kube, namespace) == "ctl-b" and new.alive()


@pytest.fixture
def missing_namespace(kube: Kube) -> Iterator[str]:
    """A namespace name that does not exist yet (deleted after the test if created)."""
    name = f"ctl-{secrets.token_hex(4)}"
    yield name
    kube.delete("v1", "Namespace", name=name)


def test_the_lease_namespace_is_created_when_missing(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        missing_namespace: str, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": clusters("2.51.0")[:1]})
    config = settings(control_plane, git_repo, namespace, control_namespace=missing_namespace)
    ctl = controller_process("ctl-ns", config)
    eventually(lambda: lease_holder(kube, missing_namespace) == "ctl-ns", message="leads")
    assert ctl.events("lease_namespace_created")[0]["namespace"] == missing_namespace
    eventually(lambda: len(live_clusters(kube, namespace)) == 1, message="the leader syncs")


def limited_service_account(kube: Kube, namespace: str) -> tuple[str, str]:
    """A ServiceAccount that may use Leases and read namespaces, but not create them."""
    name = f"no-ns-{namespace}"
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "controller", "namespace": namespace}},
                field_manager="tests")
    kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": name},
                 "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "verbs": ["get", "create", "update"]},
                           {"apiGroups": [""], "resources": ["namespaces", "configmaps"],
                            "verbs": ["get", "list", "watch"]}]}, field_manager="tests")
    kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": name},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": "controller",
                               "namespace": namespace}]}, field_manager="tests")
    return "controller", name


def test_a_missing_lease_namespace_that_cannot_be_created_is_a_clear_warning(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        missing_namespace: str, tmp_path: Path, controller_process: StartController) -> None:
    account, binding = limited_service_account(kube, namespace)
    try:
        kubeconfig = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                                name=account, path=tmp_path / "sa.yaml")
        git_repo.commit({"manifests/rc.yaml": clusters("2.51.0")[:1]})
        config = {**settings(control_plane, git_repo, namespace,
                             control_namespace=missing_namespace),
                  "kubeconfig": str(kubeconfig)}
        ctl = controller_process("ctl-rbac", config)
        warning = eventually(lambda: [r for r in ctl.events("lease_not_acquired")
                                      if r.get("level") == "warning"], message="a warning")
        error = warning[0]["error"]
        assert f"lease namespace '{missing_namespace}' does not exist" in error
        assert f"kubectl create namespace {missing_namespace}" in error
        assert "leaderElection.namespace" in error
        assert kube.get("v1", "Namespace", name=missing_namespace) is None
        assert ctl.alive()
        # ... and readiness says so, with the same advice.
        eventually(lambda: ctl.readyz() == 503, message="not ready without a lease")
        body = requests.get(f"http://127.0.0.1:{ctl.health_port}/readyz", timeout=10).json()
        assert "does not exist" in body["failing"]["leader_election"]
    finally:
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            kube.delete("rbac.authorization.k8s.io/v1", kind, name=binding)
