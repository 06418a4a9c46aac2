"""Features wired through their seams: from what the user writes to what the cluster shows.

Each test starts at the user's input (a chart in git, an Event the operator posts) and
ends at the observable effect (a live object, a recorded health), with the real API
server, real git and the real helm in between.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.localcluster import LocalControlPlane
from tests.conftest import GitRepo

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
    live = kube.get("v1", "ConfigMap", "caps", namespace)
    assert live is not None
    server = kube.call("GET", "/version")["gitVersion"]
    assert live["data"] == {"kubeVersion": server, "hasRayApi": "true",
                            "hasRayClusterKind": "true", "hasMadeUpApi": "false"}
