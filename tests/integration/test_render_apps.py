"""App-of-apps: reading Argo CD Applications from a real git checkout, then rendering them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.render import load_applications, render_app
from tests.harness.git import GitRepo

TESTDATA = Path(__file__).parent.parent / "testdata" / "render" / "repo"


@pytest.fixture
def repo(git_repo: GitRepo) -> Path:
    """The test config repo, committed to a real git repository; its work tree."""
    shutil.copytree(TESTDATA, git_repo.work, dirs_exist_ok=True)
    git_repo.commit({}, message="config repo")
    return git_repo.work


def test_app_of_apps_reads_every_application(repo: Path) -> None:
    apps = load_applications(repo, "apps")
    assert [a.name for a in apps] == ["ray-helm", "ray-plain", "ray-kustomize"]
    helm, plain, kustomize = apps
    assert helm.source.helm is not None and helm.source.helm.release_name == "rc"
    assert helm.sync_policy.automated and helm.sync_policy.self_heal
    assert helm.ignore_differences[0].kind == "RayCluster"
    assert helm.namespace == "argocd" and helm.warnings == ()
    assert plain.source.directory is not None and plain.source.directory.recurse
    assert kustomize.destination.namespace == "ray-kustomize"


def test_unsupported_fields_become_warnings_naming_the_file(repo: Path) -> None:
    kustomize = load_applications(repo, "apps/team-b")[1]
    text = "\n".join(kustomize.warnings)
    assert text.count("apps/team-b/apps.yaml:21 (document 3): ") == 3
    for field in ("spec.source.plugin", "spec.source.kustomize.images", "spec.syncPolicy.retry"):
        assert field in text
    # another cluster is not a render warning: the destination resolves through cluster
    # Secrets or the app is refused (tests/integration/test_destinations.py)
    assert "prod.example.com" not in text


def test_a_single_file_can_be_loaded(repo: Path) -> None:
    assert [a.name for a in load_applications(repo, "apps/ray-helm.yaml")] == ["ray-helm"]


def test_every_app_of_the_repo_renders(repo: Path, helm_bin: Path) -> None:
    rendered = {app.name: render_app(app, repo, helm_bin=helm_bin)
                for app in load_applications(repo, "apps")}
    assert {o["kind"] for o in rendered["ray-helm"]} >= {"RayCluster", "CustomResourceDefinition"}
    assert any(o["metadata"]["name"] == "deep" for o in rendered["ray-plain"])
    assert all(o["metadata"]["namespace"] == "ray-kustomize" for o in rendered["ray-kustomize"])


def test_duplicate_application_names_are_rejected(repo: Path, git_repo: GitRepo) -> None:
    copy = (repo / "apps" / "ray-helm.yaml").read_text()
    git_repo.commit({"apps/zz/copy.yaml": copy})
    with pytest.raises(ConfigError, match=re.escape("duplicate Application name 'ray-helm': "
                                                    "apps/ray-helm.yaml and apps/zz/copy.yaml")):
        load_applications(repo, "apps")


def test_malformed_application_names_file_and_line(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"apps/broken.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\n"
                                         "metadata:\n  name: broken\nspec:\n  source: [\n"})
    with pytest.raises(ConfigError, match=r"^apps/broken.yaml:7:1: invalid YAML"):
        load_applications(repo, "apps")


def test_invalid_application_names_file_and_field(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"apps/bad.yaml": {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "bad"}, "spec": {"source": {"path": "plain"}}}})
    with pytest.raises(ConfigError, match=r"^apps/bad\.yaml: spec\.source\.repoURL is required"):
        load_applications(repo, "apps")


def test_missing_or_escaping_apps_path(repo: Path) -> None:
    with pytest.raises(ConfigError, match="'nope' does not exist"):
        load_applications(repo, "nope")
    with pytest.raises(ConfigError, match="escapes the repository"):
        load_applications(repo, "../..")
