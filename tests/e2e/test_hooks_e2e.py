"""Resource hooks in the standalone controller, with real Jobs completing on kwok nodes.

The Ray stack's kube-scheduler places a hook Job's Pod on a fake node, kwok runs it and,
since a Job owns it, its default ``pod-complete`` stage makes it succeed; the Job
controller (kube-controller-manager's, started for these tests only:
:meth:`~localcluster.controlplane.LocalControlPlane.job_controller`) then marks the Job
complete. gitops-ray reads only that: a PreSync Job's completion lets the sync go on, a
PostSync Job with ``HookSucceeded`` is deleted once the operation succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.integration.test_hooks import config_map, job
from tests.samples import raycluster

TIMEOUT = 180.0


@pytest.fixture
def jobs_run(control_plane: LocalControlPlane) -> Iterator[None]:
    with control_plane.job_controller():
        yield


def complete(kube: Kube, namespace: str, name: str) -> bool:
    live = kube.get("batch/v1", "Job", name=name, namespace=namespace) or {}
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (live.get("status") or {}).get("conditions") or ())


def operation(ctl: Controller, app: str) -> dict[str, Any]:
    op = ctl.status(app).get("operation")
    return op if isinstance(op, dict) else {}


def test_a_presync_job_runs_to_completion_before_the_app_is_applied(
        jobs_run: None, start_controller: Callable[..., Controller], git_repo: GitRepo,
        kube: Kube, namespace: str) -> None:
    git_repo.commit({"manifests/app.yaml": [
        job("migrate", "PreSync"), raycluster("ray"), config_map("settings"),
        job("smoke", "PostSync", policy="HookSucceeded")]})
    ctl = start_controller({"applications": [application("hooked", git_repo.url, namespace)]})

    eventually(lambda: complete(kube, namespace, "migrate"), TIMEOUT,
               "the PreSync Job completed on a kwok node")
    eventually(lambda: operation(ctl, "hooked").get("phase") == "Succeeded", TIMEOUT,
               "the operation succeeded")
    assert ctl.live("ray") is not None
    hooks = {r["name"]: (r["hookType"], r["hookPhase"])
             for r in operation(ctl, "hooked")["resources"] if r.get("hookType")}
    assert hooks == {"migrate": ("PreSync", "Succeeded"), "smoke": ("PostSync", "Succeeded")}
    eventually(lambda: kube.get("batch/v1", "Job", name="smoke", namespace=namespace) is None,
               TIMEOUT, "the PostSync Job deleted (HookSucceeded)")
    migrate = kube.get("batch/v1", "Job", name="migrate", namespace=namespace)
    assert migrate is not None  # BeforeHookCreation: kept until the next run replaces it
    inventory = RecordStore(kube, namespace).load("hooked").inventory
    assert not any(e.kind == "Job" for e in inventory)  # hooks are not the app's resources
