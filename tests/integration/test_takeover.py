"""Taking over objects that kubectl or Argo CD applied client-side, against the real API server.

The starting state is made by the real tools' writes: ``kubectl apply`` (client-side
apply, manager ``kubectl-client-side-apply``, the last-applied annotation), an Argo CD
style client-side apply (an Update as manager ``argocd-controller``), the Ray
autoscaler's JSON patch (``python-requests``) and a human's ``kubectl edit``.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import Kube
from gitops_ray.sync.engine import SyncRequest
from localcluster import LocalControlPlane
from tests.conftest import GitRepo
from tests.integration.test_sync import Env, autoscaler_patch
from tests.samples import raycluster, worker_group

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.fixture
def env(kube: Kube, namespace: str, tmp_path: Path, helm_bin: Path) -> Env:
    return Env(kube, namespace, tmp_path, helm_bin)


def kubectl_apply(cp: LocalControlPlane, namespace: str, obj: dict[str, Any]) -> None:
    """The real ``kubectl apply`` (client-side apply)."""
    subprocess.run(["kubectl", "--kubeconfig", str(cp.kubeconfig), "-n", namespace,
                    "apply", "-f", "-"], input=json.dumps(obj), text=True, check=True,
                   capture_output=True)


def write_as(cp: LocalControlPlane, obj: dict[str, Any], *, manager: str,
             method: str = "PUT", body: Any = None, content_type: str = "application/json",
             subresource: str = "") -> dict[str, Any]:
    """One raw write as ``manager`` (an Update, unless ``content_type`` is apply-patch)."""
    meta = obj["metadata"]
    group, _, version = obj["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    plural = {"ConfigMap": "configmaps", "RayCluster": "rayclusters"}.get(
        obj["kind"], obj["kind"].lower() + "s")
    url = f"{cp.url}{base}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
    if subresource:
        url += "/" + subresource
    response = requests.request(
        method, url, params={"fieldManager": manager}, data=json.dumps(body or obj),
        timeout=10, verify=str(cp.workdir / "ca.crt"),
        headers={"Authorization": f"Bearer {cp.token}", "Content-Type": content_type})
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or [] if not e.get("subresource")}


def cm(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def rc_with(labels: dict[str, str], params: dict[str, str]) -> dict[str, Any]:
    rc = raycluster("ray", groups=[worker_group("cpu", replicas=1)])
    rc["metadata"]["labels"] = labels
    rc["spec"]["headGroupSpec"]["rayStartParams"] = params
    return rc


def resource(diff: Any, kind: str) -> Any:
    return next(r for r in diff.resources if r.key.kind == kind)


def test_fields_removed_from_git_leave_kubectl_applied_objects(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    before_rc = rc_with({"team": "ml", "tier": "gold"},
                        {"dashboard-host": "0.0.0.0", "num-cpus": "0"})
    before_cm = cm("settings", {"a": "1", "b": "2"}, labels={"team": "ml", "tier": "gold"})
    for obj in (before_rc, before_cm):
        kubectl_apply(control_plane, env.namespace, obj)
    after_rc = rc_with({"team": "ml"}, {"dashboard-host": "0.0.0.0"})
    after_cm = cm("settings", {"a": "1"}, labels={"team": "ml"})
    git_repo.commit({"manifests/rc.yaml": after_rc, "manifests/cm.yaml": after_cm})
    app = env.app(git_repo)

    before = env.pipeline.compare(app)
    assert resource(before.diff, "RayCluster").out_of_sync
    assert resource(before.diff, "ConfigMap").out_of_sync
    shown = resource(before.diff, "ConfigMap")
    assert "b" in shown.live_normalized["data"]
    assert "b" not in shown.desired_normalized["data"]
    assert "tier" not in shown.desired_normalized["metadata"]["labels"]

    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    rc, live_cm = env.live("ray"), env.live("settings", "ConfigMap", "v1")
    assert "tier" not in rc["metadata"]["labels"] and rc["metadata"]["labels"]["team"] == "ml"
    assert rc["spec"]["headGroupSpec"]["rayStartParams"] == {"dashboard-host": "0.0.0.0"}
    assert live_cm["data"] == {"a": "1"}
    assert "tier" not in live_cm["metadata"]["labels"]
    for obj in (rc, live_cm):
        assert LAST_APPLIED not in obj["metadata"].get("annotations", {})
        assert [m for m, _ in managers(obj)] == [FIELD_MANAGER]
    assert outcome.after is not None and outcome.after.diff.status == "Synced"
