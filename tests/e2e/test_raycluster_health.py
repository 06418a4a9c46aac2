"""A RayCluster from git, reconciled by the real KubeRay operator onto Pods that run.

gitops-ray's health of a RayCluster is its reading of what the operator writes; here the
operator really writes it (v1.6.2, with kube-scheduler and kwok nodes under it), so each
test checks gitops-ray's verdict against the operator's own status, not a fixture.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gitops_ray.kube import Kube
from tests.e2e.raycluster import (
    POOL_LABEL,
    conditions,
    live_status,
    node_pool,
    operator_ready,
    phases,
    wait,
)
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload
from tests.samples import raycluster, worker_group

APP = "ray"
SYNC_TIMEOUT = 120.0


def start(start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str,
          rc: dict[str, Any]) -> Controller:
    git_repo.commit({"manifests/rc.yaml": rc})
    return start_controller({"applications": [application(APP, git_repo.url, namespace)]})


def push(ctl: Controller, git_repo: GitRepo, rc: dict[str, Any], message: str) -> None:
    """Commit a new version of the cluster and tell the controller (GitHub push webhook)."""
    sha = git_repo.commit({"manifests/rc.yaml": rc}, message)
    assert ctl.webhook(push_payload(git_repo, sha)).ok


def health(ctl: Controller) -> tuple[str, str]:
    status = ctl.status(APP)
    return str(status.get("health", "")), str(status.get("healthMessage", ""))


def test_healthy_exactly_when_the_operator_says_ready(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    rc = raycluster("ready", groups=[worker_group("cpu", replicas=2)])
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {
        POOL_LABEL: namespace}  # no such node yet: the workers cannot be scheduled
    ctl = start(start_controller, git_repo, namespace, rc)

    eventually(lambda: conditions(live_status(kube, namespace, "ready")).get("HeadPodReady")
               == "True", SYNC_TIMEOUT, "head pod ready (operator)")
    eventually(lambda: health(ctl) == ("Progressing", "Waiting for all Ray pods to be running "
                                       "and ready (0/2 workers ready)"), SYNC_TIMEOUT,
               "Progressing with the operator's worker count")
    assert not operator_ready(kube, namespace, "ready")
    assert sorted(phases(kube, namespace, "ready").values()) == ["Pending", "Pending",
                                                                "Running"]

    with node_pool(kube, namespace):
        seen: list[tuple[str, bool]] = []

        def healthy() -> bool:
            verdict = health(ctl)[0]
            seen.append((verdict, operator_ready(kube, namespace, "ready")))
            return verdict == "Healthy"

        eventually(healthy, SYNC_TIMEOUT, "Healthy once the workers run")
        assert all(ready for verdict, ready in seen if verdict == "Healthy"), seen
        assert set(phases(kube, namespace, "ready").values()) == {"Running"}
        assert len(phases(kube, namespace, "ready")) == 3
        assert ctl.status(APP)["sync"] == "Synced"


def test_a_spec_the_operator_rejects_is_degraded_with_its_reason(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    good = raycluster("rejected", groups=[worker_group("cpu", replicas=1)])
    bad = copy.deepcopy(good)  # Ray resources both in rayStartParams and in resources
    bad["spec"]["workerGroupSpecs"][0].update(rayStartParams={"num-cpus": "1"},
                                               resources={"CPU": "1"})
    ctl = start(start_controller, git_repo, namespace, bad)

    eventually(lambda: health(ctl)[0] == "Degraded", SYNC_TIMEOUT, "Degraded")
    message = health(ctl)[1]
    assert message.startswith("InvalidRayClusterSpec: The RayCluster spec is invalid"), message
    assert "resource fields should not be set in both rayStartParams and Resources" in message
    assert live_status(kube, namespace, "rejected") == {}  # the operator wrote no status
    assert phases(kube, namespace, "rejected") == {}

    push(ctl, git_repo, good, "fix the worker group")
    wait(lambda: health(ctl)[0] == "Healthy",
         lambda: (health(ctl), live_status(kube, namespace, "rejected")), SYNC_TIMEOUT,
         "Healthy after the fix")
    assert operator_ready(kube, namespace, "rejected")

    # Broken again while running: the operator keeps its last (ready) status and only
    # posts the Event; the Event is newer than the spec, so the app is Degraded again.
    push(ctl, git_repo, bad, "break it again")
    wait(lambda: health(ctl)[0] == "Degraded",
         lambda: (health(ctl), live_status(kube, namespace, "rejected")), SYNC_TIMEOUT,
         "Degraded again")
    assert "resource fields should not be set in both" in health(ctl)[1]
    assert operator_ready(kube, namespace, "rejected")  # the running cluster is untouched


def test_a_suspended_cluster_is_suspended_and_resumes_from_git(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    rc = raycluster("paused", groups=[worker_group("cpu", replicas=1)])
    suspended = copy.deepcopy(rc)
    suspended["spec"]["suspend"] = True
    ctl = start(start_controller, git_repo, namespace, suspended)

    eventually(lambda: health(ctl) == ("Suspended", "RayCluster is suspended"), SYNC_TIMEOUT,
               "Suspended")
    status = live_status(kube, namespace, "paused")
    assert conditions(status).get("RayClusterSuspended") == "True"
    assert phases(kube, namespace, "paused") == {}

    # KubeRay 1.6.2 (status conditions on) resumes only on an explicit `suspend: false`:
    # deleting the field leaves the cluster Suspended for good (seen in this test).
    resumed = copy.deepcopy(rc)
    resumed["spec"]["suspend"] = False
    push(ctl, git_repo, resumed, "resume")
    wait(lambda: health(ctl)[0] == "Healthy",
         lambda: (health(ctl), live_status(kube, namespace, "paused"),
                  phases(kube, namespace, "paused")), SYNC_TIMEOUT, "Healthy after resuming")
    assert operator_ready(kube, namespace, "paused")
    assert set(phases(kube, namespace, "paused").values()) == {"Running"}
