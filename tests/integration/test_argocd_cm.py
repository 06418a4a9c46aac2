"""Argo CD's argocd-cm through the seams users touch: the CLI and the running controller.

Real API server, real git: a RayCluster whose git says ``cpu: 2000m`` while the live
object says ``"2"`` is OutOfSync until an argocd-cm in the cluster declares the pod specs
as ``core/v1/PodSpec`` (knownTypeFields); a Lua health check there replaces the built-in
one (which, with no KubeRay operator here, would say Progressing); and the controller
picks up an argocd-cm edit without a restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.kube import Kube
from gitops_ray.types import SyncStatus
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.samples import raycluster

KNOWN_TYPES = yaml.safe_dump([
    {"field": "spec.headGroupSpec.template.spec", "type": "core/v1/PodSpec"},
    {"field": "spec.workerGroupSpecs.template.spec", "type": "core/v1/PodSpec"}])
HEALTH = 'return {status = "Degraded", message = "checked by argocd-cm"}'


def argocd_cm(namespace: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "argocd-cm", "namespace": namespace}, "data": data}


def open_project(kube: Kube, namespace: str) -> None:
    """Argo CD's ``default`` AppProject, allowing everything (Argo CD creates one)."""
    kube.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "default", "namespace": namespace},
                "spec": {"sourceRepos": ["*"], "sourceNamespaces": ["*"],
                         "destinations": [{"server": "*", "namespace": "*"}],
                         "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}},
               field_manager="tests", force=True)


def head_cpu(rc: dict[str, Any], cpu: str) -> dict[str, Any]:
    resources = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["cpu"] = resources["limits"]["cpu"] = cpu
    return rc


def set_live_head_cpu(kube: Kube, namespace: str, name: str, cpu: Any) -> None:
    path = "/spec/headGroupSpec/template/spec/containers/0/resources"
    kube.patch("ray.io/v1", "RayCluster", name=name, namespace=namespace, patch=[
        {"op": "replace", "path": f"{path}/requests/cpu", "value": cpu},
        {"op": "replace", "path": f"{path}/limits/cpu", "value": cpu}])


def test_cli_reads_argocd_cm_from_the_cluster_or_a_file(
        cli: Cli, git_repo: GitRepo, kube: Kube, argocd_crds: None,
        extra_namespace: Callable[[str], str], tmp_path: Path) -> None:
    argocd = extra_namespace("argocd")
    open_project(kube, argocd)
    git_repo.commit({"apps/ray.yaml": app_yaml(git_repo, "ray", cli.namespace, "ray"),
                     "ray/rc.yaml": head_cpu(raycluster("cpu"), "2000m")})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args).exit_code == 0
    set_live_head_cpu(kube, cli.namespace, "cpu", "2")  # what a Go writer would store
    drift = cli("diff", *args, "--argocd-namespace", argocd)  # no argocd-cm there yet
    assert drift.exit_code == 1, drift.output
    assert "cpu" in drift.output

    kube.create(argocd_cm(argocd, **{
        "resource.customizations.knownTypeFields.ray.io_RayCluster": KNOWN_TYPES,
        "resource.customizations.health.ray.io_RayCluster": HEALTH}), field_manager="tests")
    quiet = cli("diff", *args, "--argocd-namespace", argocd)
    assert quiet.exit_code == 0, quiet.output
    status = cli("status", "--refresh", *args, "--argocd-namespace", argocd, "-o", "json")
    [row] = json.loads(status.stdout)
    assert row["sync"] == SyncStatus.SYNCED.value, status.output
    assert (row["health"], row["healthMessage"]) == ("Degraded", "checked by argocd-cm")
    assert cli("diff", *args).exit_code == 1  # without --argocd*: no system settings

    broken = tmp_path / "argocd-cm.yaml"  # a file wins over the cluster's
    broken.write_text(yaml.safe_dump(argocd_cm("x", **{
        "resource.customizations.knownTypeFields.ray.io_RayCluster": "[unclosed"})))
    failed = cli("diff", *args, "--argocd-namespace", argocd, "--argocd-cm", str(broken))
    assert failed.exit_code == 2, failed.output
    assert "resource.customizations.knownTypeFields.ray.io_RayCluster" in failed.output
    assert "[unclosed" not in failed.output
    broken.write_text(yaml.safe_dump(argocd_cm("x", **{  # typed when read: a wrong type
        "resource.customizations.ignoreDifferences.ray.io_RayCluster":
            "jsonPointers: /spec/secret-value"})))
    refused = cli("sync", *args, "--argocd-cm", str(broken))
    assert refused.exit_code != 0, refused.output
    assert "SystemSettingsInvalid" in refused.output
    assert "ignoreDifferences.ray.io_RayCluster: jsonPointers: expected a list" in \
        refused.output
    assert "secret-value" not in refused.output


def test_controller_picks_up_an_argocd_cm_change_without_a_restart(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, extra_namespace: Callable[[str], str], argocd_crds: None) -> None:
    argocd = extra_namespace("argocd")
    open_project(kube, argocd)
    rc = raycluster("sys")
    rc["metadata"]["annotations"] = {"team": "git"}
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application("sys", git_repo.url, namespace)]},
                           **{"argocd.enabled": True, "argocd.namespace": argocd})
    eventually(lambda: ctl.status("sys").get("sync") == SyncStatus.SYNCED.value,
               message="first auto-sync")
    kube.patch("ray.io/v1", "RayCluster", name="sys", namespace=namespace, patch=[
        {"op": "replace", "path": "/metadata/annotations/team", "value": "someone else"}])
    # no selfHeal: auto-sync does not sync the same commit again, so the drift stays
    eventually(lambda: ctl.status("sys").get("sync") == SyncStatus.OUT_OF_SYNC.value,
               message="annotation drift")

    kube.create(argocd_cm(argocd, **{
        "resource.customizations.ignoreDifferences.ray.io_RayCluster":
            "jsonPointers: [/metadata/annotations/team]"}), field_manager="tests")
    eventually(lambda: ctl.status("sys").get("sync") == SyncStatus.SYNCED.value,
               message="Synced once argocd-cm ignores the annotation")

    kube.patch("v1", "ConfigMap", name="argocd-cm", namespace=argocd, patch=[
        {"op": "replace", "path": "/data/resource.customizations.ignoreDifferences."
                                  "ray.io_RayCluster", "value": "[broken"}])
    failed = eventually(lambda: ctl.status("sys").get("error", ""),
                        message="a broken key fails the comparison of its kind")
    assert "resource.customizations.ignoreDifferences.ray.io_RayCluster" in failed
    assert ctl.status("sys")["errorReason"] == "SystemSettingsInvalid"
