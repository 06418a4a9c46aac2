"""Features wired through their seams: from what the user writes to what the cluster shows.

Each test starts at the user's input (a chart in git, an Event the operator posts) and
ends at the observable effect (a live object, a recorded health), with the real API
server, real git and the real helm in between.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.conftest import GitRepo
from tests.integration.test_controller import (  # noqa: F401 (fixture)
    Controller,
    application,
    eventually,
    start_controller,
)
from tests.samples import raycluster

CAPABILITIES_CHART = {
    "chart/Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
    "chart/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
        "  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        "  hasRayApi: {{ .Capabilities.APIVersions.Has \"ray.io/v1\" | quote }}\n"
        "  hasRayClusterKind: {{ .Capabilities.APIVersions.Has \"ray.io/v1/RayCluster\""
        " | quote }}\n"
        "  hasMadeUpApi: {{ .Capabilities.APIVersions.Has \"made.up/v9\" | quote }}\n"),
}


def test_helm_capabilities_come_from_the_target_cluster(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, helm_bin: Path) -> None:
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
           "metadata": {"name": "caps", "namespace": "argocd"},
           "spec": {"destination": {"namespace": namespace},
                    "source": {"repoURL": git_repo.url, "path": "chart",
                               "targetRevision": "main"}}}
    git_repo.commit({**CAPABILITIES_CHART, "apps/caps.yaml": yaml.safe_dump(app)})
    result = CliRunner().invoke(main, [
        "sync", "--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
        namespace, "--cache-dir", str(tmp_path / "cache"), "--helm", str(helm_bin),
        "--repo", git_repo.url, "--apps", "apps"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    live = kube.get("v1", "ConfigMap", name="caps", namespace=namespace)
    assert live is not None
    server = kube.call("GET", "/version")["gitVersion"]
    assert live["data"] == {"kubeVersion": server, "hasRayApi": "true",
                            "hasRayClusterKind": "true", "hasMadeUpApi": "false"}


def rejection_event(live: dict, message: str) -> dict:
    """The Warning the KubeRay operator posts when it rejects a spec (and writes no status)."""
    meta = live["metadata"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.rejected", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                               "name": meta["name"], "namespace": meta["namespace"],
                               "uid": meta["uid"]},
            "type": "Warning", "reason": "InvalidRayClusterSpec", "message": message,
            "source": {"component": "raycluster-controller"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1}


def test_a_rejected_raycluster_is_degraded_with_the_operators_reason(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,  # noqa: F811
        namespace: str) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("bad")})
    controller = start_controller({"applications": [
        application("rejected", git_repo.url, namespace)]})
    eventually(lambda: controller.status("rejected").get("health") == "Progressing",
               message="synced, waiting for the operator")
    live = controller.live("bad")
    assert live is not None
    kube.create(rejection_event(live, "workerGroupSpecs[0]: maxReplicas must be >= "
                                      "minReplicas"), field_manager="tests")
    # The Event alone (the RayCluster does not change) turns the app Degraded.
    eventually(lambda: controller.status("rejected").get("health") == "Degraded",
               message="Degraded from the operator's Event")
    message = controller.status("rejected")["healthMessage"]
    assert "InvalidRayClusterSpec" in message and "maxReplicas" in message
