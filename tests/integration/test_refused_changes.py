"""A change the API server will refuse is said by the comparison, before anything is applied.

KubeRay's CRD makes ``spec.managedBy`` immutable (a CEL rule, ``self == oldSelf``). The
comparison's server-side dry run of git's object meets that rule first, so ``diff`` names
the resource and the API server's reason, and a sync stops there: no object of the app
is applied, not even those that come before it (real API server, upstream CRDs).
"""

from __future__ import annotations

import copy

import pytest

from gitops_ray.errors import DiffError
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.samples import raycluster


def _config(value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
            "data": {"value": value}}


def test_a_managed_by_change_is_refused_by_the_comparison_and_nothing_lands(
        env: Env, git_repo: GitRepo) -> None:
    rc = raycluster("owned")
    rc["spec"]["managedBy"] = "ray.io/kuberay-operator"
    git_repo.commit({"manifests/rc.yaml": rc, "manifests/cm.yaml": _config("one")})
    app = env.app(git_repo, name="owned")
    assert env.reconciler.sync(app).result.ok

    moved = copy.deepcopy(rc)
    moved["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    git_repo.commit({"manifests/rc.yaml": moved, "manifests/cm.yaml": _config("two")})
    with pytest.raises(DiffError, match="the managedBy field is immutable") as refused:
        env.pipeline.compare(app)
    assert "RayCluster" in str(refused.value) and "owned" in str(refused.value)
    with pytest.raises(DiffError, match="immutable"):
        env.reconciler.sync(app)
    assert env.live("owned")["spec"]["managedBy"] == "ray.io/kuberay-operator"
    assert env.live("settings", "ConfigMap", "v1")["data"] == {"value": "one"}
