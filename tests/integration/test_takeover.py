"""Taking over objects that kubectl or Argo CD applied client-side, against the real API server.

The starting state is made by the real tools' writes: ``kubectl apply`` (client-side
apply, manager ``kubectl-client-side-apply``, the last-applied annotation), an Argo CD
style client-side apply (an Update as manager ``argocd-controller``), the Ray
autoscaler's JSON patch (``python-requests``) and a human's ``kubectl edit``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import AlreadyExists, Conflict, Kube, UnknownKind
from gitops_ray.sync.request import SyncRequest
from gitops_ray.sync.takeover import take_over
from gitops_ray.sync.tracking import with_tracking
from gitops_ray.types import IgnoreRule
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env, autoscaler_patch
from tests.samples import raycluster, worker_group

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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


def test_autoscaler_human_and_ignored_fields_survive_the_takeover(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    kubectl_apply(control_plane, env.namespace,
                  rc_with({"team": "ml"}, {"num-cpus": "0", "port": "6379"}))
    kubectl_apply(control_plane, env.namespace,
                  cm("settings", {"a": "1", "b": "2", "kept": "live"}))
    autoscaler_patch(control_plane, env.namespace, "ray", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 5}])
    live_cm = env.live("settings", "ConfigMap", "v1")
    write_as(control_plane, live_cm, manager="kubectl-edit", method="PATCH",
             body={"data": {"c": "human"}}, content_type="application/merge-patch+json")
    rc = env.live("ray")
    scaler_fields = managers(rc)[("python-requests", "Update")]
    migrated = take_over(env.kube, rc)  # what the sync does first; here to look at it
    assert managers(migrated)[("python-requests", "Update")] == scaler_fields
    assert [m for m, _ in managers(migrated)] == [FIELD_MANAGER, "python-requests"]
    assert migrated["spec"] == rc["spec"]
    git_repo.commit({"manifests/rc.yaml": rc_with({"team": "ml"}, {"port": "6379"}),
                     "manifests/cm.yaml": cm("settings", {"a": "1"})})
    app = replace(env.app(git_repo), ignore_differences=(
        IgnoreRule("ConfigMap", json_pointers=("/data/kept",)),))

    shown = resource(env.pipeline.compare(app).diff, "ConfigMap")
    assert shown.out_of_sync
    assert "b" not in shown.desired_normalized["data"]
    assert shown.desired_normalized["data"]["c"] == "human"  # kubectl-edit's: not removed
    assert "kept" not in shown.desired_normalized["data"]  # ignored: not shown at all
    assert "kept" not in shown.live_normalized["data"]

    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    live_cm = env.live("settings", "ConfigMap", "v1")
    assert live_cm["data"] == {"a": "1", "c": "human", "kept": "live"}
    assert managers(live_cm)[("kubectl-edit", "Update")] == {"f:data": {"f:c": {}}}
    rc = env.live("ray")
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 5
    assert rc["spec"]["headGroupSpec"]["rayStartParams"] == {"port": "6379"}
    assert ("kubectl-client-side-apply", "Update") not in managers(rc)
    assert outcome.after is not None and outcome.after.diff.status == "Synced"


def test_argo_cd_client_side_and_server_side_applies_are_taken_over(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    """Argo CD applies as ``argocd-controller``: an Update (default), an Apply (SSA)."""
    kubeconfig = str(control_plane.kubeconfig)
    for name, extra in (("csa", []), ("ssa", ["--server-side"])):
        subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "-n", env.namespace, "apply",
                        "--field-manager=argocd-controller", *extra, "-f", "-"],
                       input=json.dumps(cm(name, {"a": "1", "b": "2"}, {"tier": "gold"})),
                       text=True, check=True, capture_output=True)
    assert ("argocd-controller", "Update") in managers(env.live("csa", "ConfigMap", "v1"))
    assert ("argocd-controller", "Apply") in managers(env.live("ssa", "ConfigMap", "v1"))
    git_repo.commit({"manifests/cm.yaml": [cm("csa", {"a": "1"}), cm("ssa", {"a": "1"})]})
    app = env.app(git_repo)

    dry = env.reconciler.sync(app, dry_run=True)
    assert dry.result.ok, dry.result.message
    assert {r.action for r in dry.result.resources} == {"configured"}
    assert env.live("csa", "ConfigMap", "v1")["data"]["b"] == "2"  # a dry run writes nothing
    for r in dry.before.diff.resources:
        assert r.out_of_sync and "b" not in r.desired_normalized["data"]

    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    for name in ("csa", "ssa"):
        live = env.live(name, "ConfigMap", "v1")
        assert live["data"] == {"a": "1"}
        assert "tier" not in (live["metadata"].get("labels") or {})
        assert [m for m, _ in managers(live)] == [FIELD_MANAGER]


def test_a_write_between_read_and_takeover_wins(
        env: Env, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    """The takeover patch carries the resourceVersion it was computed from."""
    kubectl_apply(control_plane, env.namespace,
                  rc_with({"team": "ml"}, {"num-cpus": "0", "port": "6379"}))
    git_repo.commit({"manifests/rc.yaml": rc_with({"team": "ml"}, {"port": "6379"})})
    app = env.app(git_repo)
    stale = env.live("ray")
    autoscaler_patch(control_plane, env.namespace, "ray", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 7}])
    with pytest.raises(Conflict):
        take_over(env.kube, stale)
    assert ("kubectl-client-side-apply", "Update") in managers(env.live("ray"))  # untouched

    before = env.pipeline.compare(app)
    stale_reads: list[int] = []

    def stale_then_autoscale(obj: dict[str, Any]) -> dict[str, Any] | None:
        stale = env.kube.get("ray.io/v1", obj["kind"], name=obj["metadata"]["name"],
                             namespace=env.namespace)
        autoscaler_patch(control_plane, env.namespace, "ray", [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 9}])
        stale_reads.append(1)
        return stale

    syncer = type(env.syncer)(env.kube, env.store, live_lookup=stale_then_autoscale)
    result = syncer.sync(SyncRequest(app, before.manifests(), before.revision),
                         env.pipeline.rules(app))
    assert result.ok, result.message
    assert stale_reads == [1]
    rc = env.live("ray")
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 9
    assert rc["spec"]["headGroupSpec"]["rayStartParams"] == {"port": "6379"}


WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.takeover.gitops-ray.io"},
    "spec": {"group": "takeover.gitops-ray.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,  # no subresources
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


@pytest.fixture
def widgets(kube: Kube) -> str:
    """A kind whose ``status`` is not a subresource (as Argo CD's Application)."""
    with contextlib.suppress(AlreadyExists):
        kube.create(WIDGETS, field_manager="tests")

    def established() -> bool:
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                       name=WIDGETS["metadata"]["name"])
        conditions = (crd or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    eventually(established, message="the Widget CRD is established")
    eventually(lambda: _served(kube), message="Widget is served")
    return "takeover.gitops-ray.io/v1"


def _served(kube: Kube) -> bool:
    try:
        kube.resource("takeover.gitops-ray.io/v1", "Widget")
    except UnknownKind:
        return False
    return True


def widget(api: str, namespace: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Widget",
            "metadata": {"name": "w", "namespace": namespace}, **fields}


def status_apply(cp: LocalControlPlane, api: str, namespace: str, phase: str) -> None:
    """The status writer's own server-side apply, without force: a conflict raises."""
    obj = widget(api, namespace, status={"phase": phase})
    write_as(cp, obj, manager="status-writer", method="PATCH",
             content_type="application/apply-patch+yaml")


def test_status_is_never_applied(env: Env, git_repo: GitRepo, widgets: str,
                                 control_plane: LocalControlPlane) -> None:
    git_repo.commit({"manifests/w.yaml": widget(widgets, env.namespace, spec={"size": 1},
                                                status={"phase": "FromGit"})})
    app = replace(env.app(git_repo), ignore_differences=(
        IgnoreRule("Widget", "takeover.gitops-ray.io", json_pointers=("/status",)),))
    assert env.reconciler.sync(app).result.ok
    assert "status" not in env.live("w", "Widget", widgets)  # git's status is not created
    status_apply(control_plane, widgets, env.namespace, "Ready")

    git_repo.commit({"manifests/w.yaml": widget(widgets, env.namespace, spec={"size": 2})})
    assert env.pipeline.compare(app).diff.status == "OutOfSync"
    dry = env.reconciler.sync(app, dry_run=True)
    assert [r.action for r in dry.result.resources] == ["configured"]
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    live = env.live("w", "Widget", widgets)
    assert live["spec"] == {"size": 2} and live["status"] == {"phase": "Ready"}
    assert "f:status" not in managers(live)[(FIELD_MANAGER, "Apply")]
    assert "f:status" in managers(live)[("status-writer", "Apply")]
    status_apply(control_plane, widgets, env.namespace, "Done")  # no conflict
    assert env.live("w", "Widget", widgets)["status"] == {"phase": "Done"}
    assert env.pipeline.compare(app).diff.status == "Synced"


def test_status_an_earlier_sync_applied_is_released(
        env: Env, git_repo: GitRepo, widgets: str, control_plane: LocalControlPlane) -> None:
    """Our entry owning ``status`` (an earlier gitops-ray applied it): left, unowned."""
    old = widget(widgets, env.namespace, spec={"size": 1}, status={"phase": "Old"})
    write_as(control_plane, old, manager=FIELD_MANAGER, method="PATCH",
             content_type="application/apply-patch+yaml")
    git_repo.commit({"manifests/w.yaml": widget(widgets, env.namespace, spec={"size": 1})})
    outcome = env.reconciler.sync(env.app(git_repo))
    assert outcome.result.ok, outcome.result.message
    live = env.live("w", "Widget", widgets)
    assert live["status"] == {"phase": "Old"}
    assert "f:status" not in managers(live)[(FIELD_MANAGER, "Apply")]
    status_apply(control_plane, widgets, env.namespace, "New")  # no conflict


def test_cli_diff_shows_the_removal_then_sync_makes_it(
        git_repo: GitRepo, control_plane: LocalControlPlane, namespace: str,
        tmp_path: Path, helm_bin: Path) -> None:
    """The reproduction of the issue: without the three-way view this diff says Synced."""
    cli = Cli(control_plane, namespace, tmp_path / "cache", helm_bin)
    settings = cm("settings", {"a": "1", "b": "2"})
    settings["metadata"]["namespace"] = namespace
    kubectl_apply(control_plane, namespace, with_tracking("ray", settings))
    git_repo.commit({"apps/ray.yaml": app_yaml(git_repo, "ray", namespace, "ray"),
                     "ray/cm.yaml": cm("settings", {"a": "1"})})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    before = cli("diff", *args)
    assert before.exit_code == 1, before.output
    removed = [line for line in before.output.splitlines() if line.startswith("-  ")]
    assert removed == ["-  b: '2'"], before.output
    assert cli("sync", *args).exit_code == 0
    after = cli("diff", *args)
    assert after.exit_code == 0, after.output
