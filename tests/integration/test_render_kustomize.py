"""Kustomize overlays, built by the real ``kubectl kustomize``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gitops_ray.errors import RenderError
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.apps import Application, KustomizeSource
from gitops_ray.render.tools import RenderTools
from tests.harness.git import GitRepo

TESTDATA = Path(__file__).parent.parent / "testdata" / "render" / "repo"
OVERLAY = "kustomize/overlays/prod"


@pytest.fixture
def repo(git_repo: GitRepo) -> Path:
    """The test config repo, committed to a real git repository; its work tree."""
    shutil.copytree(TESTDATA, git_repo.work, dirs_exist_ok=True)
    git_repo.commit({}, message="config repo")
    return git_repo.work


def overlay_app(kustomize: KustomizeSource | None = None, path: str = OVERLAY) -> Application:
    return application_from_flags(name="ray-k", repo_url="file:///repo", path=path,
                                  dest_namespace="ray", kustomize=kustomize)


def test_overlay_is_detected_and_built(repo: Path) -> None:
    objs = render_app(overlay_app(), repo)
    names = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert names[1] == ("RayCluster", "prod-ray")
    assert names[0][0] == "ConfigMap" and names[0][1].startswith("prod-ray-settings-")
    cluster = next(o for o in objs if o["kind"] == "RayCluster")
    assert cluster["spec"]["rayVersion"] == "2.53.0"  # the overlay's patch
    assert {o["metadata"]["namespace"] for o in objs} == {"ray"}


def test_source_kustomize_overrides_like_kustomize_edit(repo: Path) -> None:
    before = (repo / OVERLAY / "kustomization.yaml").read_text()
    app = overlay_app(KustomizeSource(name_prefix="blue-", name_suffix="-v2", namespace="ml"))
    objs = render_app(app, repo)
    cluster = next(o for o in objs if o["kind"] == "RayCluster")
    assert cluster["metadata"] == {"name": "blue-ray-v2", "namespace": "ml"}
    assert (repo / OVERLAY / "kustomization.yaml").read_text() == before
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout
    assert status == ""


def test_kustomize_errors_carry_kubectl_stderr(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({f"{OVERLAY}/kustomization.yaml":
                     "resources:\n  - ../../base\npatches:\n  - path: missing.yaml\n"})
    with pytest.raises(RenderError, match=r"^app ray-k: kubectl kustomize kustomize/overlays/"
                                          r"prod failed \(exit 1\): (?s:.*)missing.yaml"):
        render_app(overlay_app(), repo)


def test_overrides_need_a_kustomization_file(repo: Path) -> None:
    with pytest.raises(RenderError, match=re.escape(
            "plain: spec.source.kustomize is set but the directory has no kustomization.yaml")):
        render_app(overlay_app(KustomizeSource(namespace="x"), path="plain"), repo)


def test_missing_kubectl_is_explained(repo: Path) -> None:
    with pytest.raises(RenderError, match="/nonexistent/kubectl not found; Kustomize apps are "
                                          "rendered with `kubectl kustomize`"):
        render_app(overlay_app(), repo, tools=RenderTools(kubectl_bin="/nonexistent/kubectl"))
