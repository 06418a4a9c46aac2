"""The Ray autoscaler and git change the same RayCluster, with the real operator acting.

The autoscaler's own provider code (``localcluster/autoscaler.py``) scales one worker group
up and down (``replicas`` and ``workersToDelete``), authenticated as the ServiceAccount the
operator creates for it, while git edits another group's pod template. gitops-ray must
land every git edit, keep the autoscaler's values, and not sync again because of them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from tests.e2e.raycluster import live_status, operator_ready, pods, wait
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, application, push_payload
from tests.samples import raycluster, worker_group

APP = "scaled"
CLUSTER = "scaled"
TIMEOUT = 120.0


def group(live: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in live["spec"]["workerGroupSpecs"] if g["groupName"] == name)


def running_workers(kube: Kube, namespace: str, name: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods(kube, namespace, CLUSTER)
                  if p["metadata"]["labels"].get("ray.io/group") == name
                  and not p["metadata"].get("deletionTimestamp")
                  and p.get("status", {}).get("phase") == "Running")


def with_env(rc: dict[str, Any], value: str) -> dict[str, Any]:
    """``rc`` with the ``edited`` group's container env ``EDIT=value`` (a template edit)."""
    out = copy.deepcopy(rc)
    container = out["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "EDIT", "value": value}]
    return out


def test_autoscaler_and_git_share_a_raycluster(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, control_plane: LocalControlPlane, tmp_path: Path) -> None:
    rc = raycluster(CLUSTER, groups=[worker_group("autoscaled", replicas=1, max_replicas=5),
                                     worker_group("edited", replicas=1)])
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application(APP, git_repo.url, namespace)]})
    store = ctl.live

    def healthy() -> bool:
        return bool(ctl.status(APP).get("health") == "Healthy")

    def edit(value: str) -> None:
        sha = git_repo.commit({"manifests/rc.yaml": with_env(rc, value)}, f"edit {value}")
        assert ctl.webhook(push_payload(git_repo, sha)).ok
        eventually(lambda: ctl.status(APP).get("revision") == sha
                   and ctl.status(APP).get("sync") == "Synced", TIMEOUT, f"synced {value}")

    def edited_env() -> list[dict[str, str]]:
        live = store(CLUSTER) or {}
        template = group(live, "edited")["template"]["spec"]["containers"][0]
        return list(template.get("env") or [])

    eventually(healthy, TIMEOUT, "Healthy")
    autoscaler = Autoscaler(control_plane, kube, namespace, CLUSTER, tmp_path)

    autoscaler.run("scale", "autoscaled", "3")  # up
    edit("one")
    eventually(lambda: len(running_workers(kube, namespace, "autoscaled")) == 3, TIMEOUT,
               "3 autoscaled workers running")
    assert edited_env() == [{"name": "EDIT", "value": "one"}]
    assert group(store(CLUSTER) or {}, "autoscaled")["replicas"] == 3

    victim = running_workers(kube, namespace, "autoscaled")[0]
    autoscaler.run("delete", victim)  # down, naming the worker
    live = store(CLUSTER) or {}
    assert group(live, "autoscaled")["replicas"] == 2
    assert group(live, "autoscaled")["scaleStrategy"]["workersToDelete"] == [victim]
    edit("two")
    eventually(lambda: victim not in running_workers(kube, namespace, "autoscaled")
               and len(running_workers(kube, namespace, "autoscaled")) == 2, TIMEOUT,
               "the operator deleted the named worker")
    assert edited_env() == [{"name": "EDIT", "value": "two"}]
    live = store(CLUSTER) or {}
    assert group(live, "autoscaled")["replicas"] == 2
    assert group(live, "autoscaled")["scaleStrategy"]["workersToDelete"] == [victim]
    assert autoscaler.run("cleanup") == "True"
    assert not group(store(CLUSTER) or {}, "autoscaled")["scaleStrategy"].get("workersToDelete")

    wait(lambda: healthy() and operator_ready(kube, namespace, CLUSTER),
         lambda: (ctl.status(APP), live_status(kube, namespace, CLUSTER),
                  (store(CLUSTER) or {}).get("metadata", {}).get("generation")),
         TIMEOUT, "Healthy at the autoscaler's size")
    history = ctl.status(APP).get("history") or []
    assert len(history) == 3, history  # the first sync and the two edits, nothing else
    assert group(kube.get(RC_API, "RayCluster", name=CLUSTER, namespace=namespace) or {},
                 "autoscaled")["replicas"] == 2
