"""A leader killed while a sync waits for a wave: the next leader continues that sync.

Real controller processes with leader election: the first one applies wave 0 (a
RayCluster nobody reports ready yet) and is SIGKILLed while waiting; the test then plays
the KubeRay operator and starts a second process, which must take the lease and continue
the recorded operation (same start time, wave 0 not re-applied) rather than start afresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import StartController
from tests.harness.runtime import application
from tests.harness.settings import FAST_LEASE, controller_settings
from tests.integration.test_sync_waves import (
    cm_exists,
    config_map,
    finished,
    in_wave,
    recorded_running,
    report,
)
from tests.samples import raycluster


def settings(kubeconfig: Path, namespace: str, repo: GitRepo) -> dict[str, Any]:
    return controller_settings(kubeconfig, namespace, leaderElection=FAST_LEASE,
                               applications=[application("waves", repo.url, namespace)])


def _recorded_by_controller(store: RecordStore) -> dict[str, Any] | None:
    operation = finished(store.load("waves").status)
    return operation if operation and "controller" in operation else None


def test_the_next_leader_continues_a_sync_waiting_for_a_wave(
        controller_process: StartController, control_plane: LocalControlPlane, kube: Kube,
        namespace: str, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [raycluster("w0"), in_wave(config_map("w1"), 1)]})
    config = settings(control_plane.kubeconfig, namespace, git_repo)
    store = RecordStore(kube, namespace)

    first = controller_process("wave-a", config)
    running = eventually(lambda: recorded_running(store.load("waves").status), timeout=90,
                         message="the first leader waits for wave 0")
    assert (running["wave"], running["controller"]) == (0, "wave-a")
    first.stop()  # SIGKILL: no chance to tidy up
    assert not cm_exists(kube, namespace, "w1")

    report(kube, namespace, "w0", "ready")
    second = controller_process("wave-b", config)
    eventually(lambda: cm_exists(kube, namespace, "w1"), timeout=90, message="wave 1 applied")
    # the sync's result and the controller's fields (who, why) are two record writes:
    # wait for the second, not only for a finished phase
    operation = eventually(lambda: _recorded_by_controller(store), message="operation finished")
    assert operation["phase"] == "Succeeded", operation
    assert operation["startedAt"] == running["startedAt"]
    assert operation["controller"] == "wave-b"
    actions = {r["key"]: r["action"] for r in operation["resources"]}
    assert actions[f"ray.io/RayCluster:{namespace}/w0"] == "created"  # not re-applied
    assert second.events("sync_continued")
    assert not second.events("sync_started")
