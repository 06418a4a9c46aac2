"""Synced, rollout pending: a git edit to a worker template that KubeRay does not roll out.

KubeRay v1.6.2 without ``upgradeStrategy: Recreate`` applies a template edit only to Pods
it creates later, so after the edit Argo CD and the operator's status both look done while
the Pods run the old template. Here the real operator runs the cluster, the Ray
autoscaler's own provider code changes ``replicas``/``workersToDelete``, and gitops-ray
must report exactly the groups and Pod counts still on an older template: never the
autoscaler's changes, and the no-op pass still without a single API request.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from tests.e2e.raycluster import live_status, operator_ready, pods, wait
from tests.e2e.test_autoscaler import CLUSTER, running_workers
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload
from tests.samples import raycluster, worker_group

APP = "rollout"
TIMEOUT = 120.0
KEY = "ray.io/RayCluster:{namespace}/" + CLUSTER


def with_image(rc: dict[str, Any], image: str) -> dict[str, Any]:
    """``rc`` with the ``edited`` group's image and an env var changed (a template edit)."""
    out = copy.deepcopy(rc)
    container = out["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    container["image"] = image
    container["env"] = [{"name": "EDIT", "value": image}]
    return out


def worker_names(kube: Kube, namespace: str, group: str) -> set[str]:
    return {p["metadata"]["name"] for p in pods(kube, namespace, CLUSTER)
            if p["metadata"]["labels"].get("ray.io/group") == group
            and not p["metadata"].get("deletionTimestamp")}


def refresh_count(ctl: Controller) -> float:
    series = f'gitops_ray_reconcile_total{{app="{APP}",result="success"}}'
    for line in ctl.metrics().splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_template_edit_is_synced_with_rollout_pending_and_autoscaling_is_not(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, control_plane: LocalControlPlane, tmp_path: Path) -> None:
    rc = raycluster(CLUSTER, groups=[worker_group("autoscaled", replicas=1, max_replicas=5),
                                     worker_group("edited", replicas=2)])
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application(APP, git_repo.url, namespace)]})
    key = KEY.format(namespace=namespace)

    def status() -> dict[str, Any]:
        return ctl.status(APP)

    def describe() -> Any:
        return (status(), live_status(kube, namespace, CLUSTER))

    wait(lambda: status().get("health") == "Healthy" and operator_ready(kube, namespace,
                                                                         CLUSTER),
         describe, TIMEOUT, "Healthy")
    assert status().get("rolloutPending") == []

    # The autoscaler scales up, then names a worker to delete: replicas and
    # workersToDelete change, the templates do not. Nothing is pending.
    autoscaler = Autoscaler(control_plane, kube, namespace, CLUSTER, tmp_path)
    autoscaler.run("scale", "autoscaled", "3")
    wait(lambda: len(running_workers(kube, namespace, "autoscaled")) == 3, describe, TIMEOUT,
         "3 autoscaled workers running")
    victim = running_workers(kube, namespace, "autoscaled")[0]
    autoscaler.run("delete", victim)
    wait(lambda: victim not in worker_names(kube, namespace, "autoscaled"), describe, TIMEOUT,
         "the operator deleted the named worker")
    before = refresh_count(ctl)
    ctl.runtime.queue.submit(APP, "test")  # a comparison after all the autoscaler's edits
    wait(lambda: refresh_count(ctl) > before and not ctl.runtime.queue.busy(), describe,
         TIMEOUT, "refreshed after autoscaling")
    assert status().get("sync") == "Synced"
    assert status().get("health") == "Healthy"
    assert status().get("rolloutPending") == [], status()
    assert "rollout pending" not in str(status().get("healthMessage"))

    # A git edit of the worker template: Synced, but the operator rolls no Pod.
    edited_before = worker_names(kube, namespace, "edited")
    assert len(edited_before) == 2
    sha = git_repo.commit({"manifests/rc.yaml": with_image(rc, "rayproject/ray:2.52.1")},
                          "new worker image")
    assert ctl.webhook(push_payload(git_repo, sha)).ok
    pending = [f"{key}: group edited 2/2 pods on an older template"]
    wait(lambda: status().get("revision") == sha and status().get("sync") == "Synced"
         and status().get("rolloutPending") == pending, describe, TIMEOUT,
         "Synced, rollout pending")
    assert status().get("health") == "Healthy"
    assert status().get("healthMessage") == "rollout pending: " + pending[0]
    assert worker_names(kube, namespace, "edited") == edited_before  # really not rolled

    # The CLI (no watch cache) lists the Pods itself and shows the same.
    args = ["status", "--refresh", "--kubeconfig", str(control_plane.kubeconfig),
            "--control-namespace", namespace, "--cache-dir", str(tmp_path / "cli"),
            "--repo", git_repo.url, "--path", "manifests", "--dest-namespace", namespace,
            "--name", "rollout-cli"]
    shown = CliRunner().invoke(main, [*args, "-o", "json"])
    assert shown.exit_code == 0, shown.output
    row = json.loads(shown.stdout)[0]
    assert row["health"] == "Healthy"
    assert row["rolloutPending"] == pending
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "Healthy (rollout pending)" in table.stdout
    assert f"rollout-cli: rollout pending: {pending[0]}" in table.stdout

    # The autoscaler adds nothing pending; a Pod created after the edit is current.
    autoscaler.run("scale", "edited", "3")
    pending = [f"{key}: group edited 2/3 pods on an older template"]
    wait(lambda: status().get("rolloutPending") == pending, describe, TIMEOUT,
         "the new Pod has the new template")
    assert status().get("sync") == "Synced"

    # Deleting the old Pods (what Recreate would do) clears it.
    for name in edited_before:
        kube.delete("v1", "Pod", name=name, namespace=namespace)
    wait(lambda: status().get("rolloutPending") == [] and status().get("health") == "Healthy",
         describe, TIMEOUT, "rolled out")
    assert not edited_before & worker_names(kube, namespace, "edited")

    # The no-op pass reads Pods from the watch cache: not a single request.
    def idle() -> bool:
        return not ctl.runtime.queue.busy() and ctl.runtime.scheduler.pending(APP) is None

    def refresh() -> None:
        count = refresh_count(ctl)
        ctl.runtime.queue.submit(APP, "test")
        eventually(lambda: refresh_count(ctl) > count and idle(), TIMEOUT, "refresh")

    refresh()
    assert ctl.runtime.kube.outbox is not None
    assert ctl.runtime.kube.outbox.flush(60)  # the syncs' Events are posted by now
    seen: list[tuple[str, str]] = []
    ctl.runtime.kube.hooks.append(lambda verb, res, code, s: seen.append((verb, res)))
    refresh()
    assert seen == []
    assert requests.get(f"{ctl.url}/healthz", timeout=5).ok
