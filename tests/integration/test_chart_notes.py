"""What the chart tells and gives the pod: NOTES.txt per mode, and a HOME whose cache is a volume.

NOTES.txt is what ``helm install`` prints, so it must describe the install that was
made: git mode or Argo CD mode, sharding or one leader, the web page when it is on, and
the Service by the chart's full name. The Deployment's ``HOME`` decides where the git
mirrors go (``cacheDir`` defaults to ``~/.cache/gitops-ray/repos``): on the ``cache``
volume, not on the read-only root filesystem or the scratch ``tmp`` volume. Rendered by
the real helm (``install --dry-run=client`` prints the notes; it asks the real API server
only for its version, which the chart's ``kubeVersion`` is checked against).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from localcluster import LocalControlPlane
from tests.integration.test_chart import CHART, helm, template


def _notes(helm_bin: Path, tmp: Path, cp: LocalControlPlane, release: str, *args: str) -> str:
    out = helm(helm_bin, tmp, "install", release, str(CHART), "-n", "gitops-ray",
               "--dry-run=client", *args, kubeconfig=cp.kubeconfig)
    return out[out.index("NOTES:"):]


def test_notes_in_git_mode_name_the_sources_the_page_and_the_service(
        helm_bin: Path, tmp_path: Path, control_plane: LocalControlPlane) -> None:
    notes = _notes(helm_bin, tmp_path, control_plane, "gitops-ray",
                   "--set", "config.appSources[0].repo=https://github.com/acme/ray-config.git",
                   "--set", "config.appSources[0].path=apps")
    assert "(1 replica)" in notes
    assert "https://github.com/acme/ray-config.git @ HEAD: apps" in notes
    assert "Argo CD mode" not in notes
    assert "The web page (read-only)" in notes
    assert "port-forward svc/gitops-ray 8080" in notes  # the full name: the release's
    assert "open http://127.0.0.1:8080/" in notes
    assert "WARNING: webhook.secretName is not set" in notes


def test_notes_in_argocd_mode_tell_how_to_hand_over_and_back(
        helm_bin: Path, tmp_path: Path, control_plane: LocalControlPlane) -> None:
    notes = _notes(helm_bin, tmp_path, control_plane, "ray", "--set", "config.argocd.enabled=true",
                   "--set", "replicaCount=3", "--set", "ui.enabled=false")
    assert "(3 replicas, splitting the apps by shard Leases)" in notes
    assert "Argo CD mode: it reconciles the Applications in argocd" in notes
    assert "gitops-ray.io/managed=true argocd.argoproj.io/skip-reconcile=true" in notes
    assert "hand every\nsuch Application back" in notes
    assert "Apps from git" not in notes  # none configured, and Argo CD mode is on
    assert "web page" not in notes
    assert "port-forward svc/ray-gitops-ray 8080" in notes


def test_notes_with_one_elected_leader(helm_bin: Path, tmp_path: Path,
                                       control_plane: LocalControlPlane) -> None:
    notes = _notes(helm_bin, tmp_path, control_plane, "gitops-ray", "--set", "replicaCount=2",
                   "--set", "sharding.enabled=false")
    assert "(2 replicas, one elected leader writing)" in notes
    assert "none yet: set config.appSources" in notes


@pytest.mark.parametrize("values", [[], ["--set", "replicaCount=2"]], ids=["one", "ha"])
def test_the_git_mirrors_are_on_the_cache_volume(helm_bin: Path, tmp_path: Path,
                                                 values: list[str]) -> None:
    docs = template(helm_bin, tmp_path, *values)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    home = next(e["value"] for e in container["env"] if e["name"] == "HOME")
    volume = next(v for v in pod["volumes"] if v["name"] == "config")
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap" and
                                 d["metadata"]["name"] == volume["configMap"]["name"])
                            ["data"]["config.yaml"])
    cache_dir = Path(config.get("cacheDir", f"{home}/.cache/gitops-ray/repos"))
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    holding = max((p for p in mounts if cache_dir.is_relative_to(p)), key=len)
    assert mounts[holding] == "cache", (cache_dir, mounts)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["cache"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
