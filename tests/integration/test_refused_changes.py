"""A change the API server will refuse is said by the comparison, before anything is applied.

KubeRay's CRD makes ``spec.managedBy`` immutable (a CEL rule, ``self == oldSelf``). The
comparison's server-side dry run of git's object meets that rule first, so the comparison
names the resource, the field and the API server's reason, and a sync fails
``ChangeRefused`` before its first write: no object of the app is applied, not even those
that come before it (real API server, upstream CRDs).
"""

from __future__ import annotations

import copy

from gitops_ray.diff.refusals import API_SERVER
from gitops_ray.sync.reasons import Reason
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
    refusals = env.pipeline.compare(app).diff.refusals
    assert [(r.key.kind, r.key.name, r.field, r.by) for r in refusals] == [
        ("RayCluster", "owned", "spec.managedBy", API_SERVER)]
    assert "the managedBy field is immutable" in refusals[0].why
    assert "multikueue" not in str(refusals[0])  # the API server's echo of git's value is cut
    outcome = env.reconciler.sync(app)
    assert not outcome.result.ok and outcome.result.reason is Reason.CHANGE_REFUSED
    assert "spec.managedBy" in outcome.result.message
    assert env.live("owned")["spec"]["managedBy"] == "ray.io/kuberay-operator"
    assert env.live("settings", "ConfigMap", "v1")["data"] == {"value": "one"}
