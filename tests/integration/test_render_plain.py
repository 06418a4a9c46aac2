"""Plain YAML/JSON directories from a real git checkout: selection, errors, namespaces."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.errors import RenderError
from gitops_ray.kube import Kube, UnknownKind
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.applications import parse_application
from gitops_ray.render.apps import Application, DirectorySource
from tests.harness.git import GitRepo

TESTDATA = Path(__file__).parent.parent / "testdata" / "render" / "repo"


@pytest.fixture
def repo(git_repo: GitRepo) -> Path:
    """The test config repo, committed to a real git repository; its work tree."""
    shutil.copytree(TESTDATA, git_repo.work, dirs_exist_ok=True)
    git_repo.commit({}, message="config repo")
    return git_repo.work


def plain_app(path: str = "plain", directory: DirectorySource | None = None) -> Application:
    return application_from_flags(name="plain", repo_url="file:///repo", path=path,
                                  dest_namespace="ray", directory=directory)


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_top_level_files_only_by_default(repo: Path) -> None:
    objs = render_app(plain_app(), repo)
    assert names(objs) == ["settings", "ray-reader", "listed-a", "listed-b", "plain", "head"]
    assert objs[0]["data"] == {"created": "2024-05-01"}  # a string, as Kubernetes reads it


def test_recurse_include_exclude(repo: Path) -> None:
    recurse = render_app(plain_app(directory=DirectorySource(recurse=True)), repo)
    assert names(recurse)[-2:] == ["deep", "smoke-test"]
    excluded = render_app(plain_app(directory=DirectorySource(
        recurse=True, exclude="*-test.yaml")), repo)
    assert names(excluded)[-1] == "deep"
    included = render_app(plain_app(directory=DirectorySource(
        recurse=True, include="{raycluster.yaml,sub/*}", exclude="sub/smoke-*")), repo)
    assert names(included) == ["plain", "deep"]


def test_disable_extension_filter_reads_what_the_globs_select(git_repo: GitRepo) -> None:
    """Argo CD 3.6's ``directory.disableExtensionFilter``: a ``*.yaml.sealed`` file is read."""
    config_map = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\n"
                  "data:\n  k: v\n")
    git_repo.commit({"sealed/a.yaml": config_map.format("plain"),
                     "sealed/b.yaml.sealed": config_map.format("sealed"),
                     "sealed/c.txt": config_map.format("text")})

    def rendered(directory: dict[str, Any]) -> list[str]:
        app = parse_application({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "sealed", "namespace": "argocd"},
            "spec": {"source": {"repoURL": git_repo.url, "path": "sealed",
                                "directory": directory},
                     "destination": {"namespace": "ray"}}})
        assert app.warnings == ()
        return names(render_app(app, git_repo.work))

    assert rendered({"include": "*.sealed"}) == []
    assert rendered({"disableExtensionFilter": True, "include": "*.sealed"}) == ["sealed"]
    assert rendered({"disableExtensionFilter": True, "exclude": "*.txt"}) == [
        "plain", "sealed"]
    assert rendered({"disableExtensionFilter": True}) == ["plain", "sealed", "text"]


def test_default_namespace_on_namespaced_objects_only(repo: Path) -> None:
    objs = {o["metadata"]["name"]: o["metadata"] for o in render_app(plain_app(), repo)}
    assert objs["plain"]["namespace"] == "ray"
    assert objs["head"]["namespace"] == "ray"
    assert objs["listed-b"]["namespace"] == "elsewhere"
    assert "namespace" not in objs["ray-reader"]  # ClusterRole: cleared, as Argo CD does


def test_namespaces_from_cluster_discovery(repo: Path, kube: Kube) -> None:
    def namespaced(api_version: str, kind: str) -> bool | None:
        try:
            return kube.resource(api_version, kind).namespaced
        except UnknownKind:
            return None

    objs = render_app(plain_app(), repo, is_namespaced=namespaced)
    scopes = {o["kind"]: o["metadata"].get("namespace") for o in objs}
    assert scopes == {"ConfigMap": "elsewhere", "ClusterRole": None, "RayCluster": "ray",
                      "Service": "ray"}


def test_malformed_yaml_names_file_and_line(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"plain/broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                          "  name: broken\n  labels: {a: b\n"})
    with pytest.raises(RenderError, match=r"^app plain: plain/broken.yaml:6:1: invalid YAML"):
        render_app(plain_app(), repo)


def test_object_without_name_names_file_and_document(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"plain/nameless.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                            "  name: ok\n---\napiVersion: v1\nkind: Secret\n"
                                            "metadata: {labels: {a: b}}\n"})
    with pytest.raises(RenderError, match=r"plain/nameless.yaml:6 \(document 2\): Secret has "
                                          r"no metadata.name"):
        render_app(plain_app(), repo)


def test_invalid_json_is_an_error(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"plain/extra.json": '{"apiVersion": "v1",\n "kind": }'})
    with pytest.raises(RenderError, match=r"plain/extra.json:2:10: invalid JSON"):
        render_app(plain_app(), repo)


def test_duplicate_objects_name_both_files(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"plain/again.yaml": {"apiVersion": "v1", "kind": "Service",
                                          "metadata": {"name": "head", "namespace": "ray"}}})
    with pytest.raises(RenderError, match=r"Service:ray/head is defined twice: "
                                          r"plain/again.yaml:1 \(document 1\) and plain/service"):
        render_app(plain_app(), repo)


def test_symlink_escaping_the_repo_is_rejected(repo: Path, git_repo: GitRepo,
                                               tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n")
    os.symlink(outside, repo / "plain" / "stolen.yaml")
    git_repo.commit({})
    with pytest.raises(RenderError, match=re.escape("app plain: symlink 'plain/stolen.yaml' points "
                                                    "outside the repository")):
        render_app(plain_app(), repo)


def test_symlinked_app_path_escaping_the_repo_is_rejected(repo: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, repo / "elsewhere")
    with pytest.raises(RenderError, match="symlink that points outside the repository"):
        render_app(plain_app(path="elsewhere"), repo)


def test_symlink_inside_the_repo_is_followed(repo: Path, git_repo: GitRepo) -> None:
    os.symlink("../kustomize/base/raycluster.yaml", repo / "plain" / "shared.yaml")
    git_repo.commit({})
    objs = render_app(plain_app(), repo)
    assert "ray" in names(objs)


def test_missing_app_path(repo: Path) -> None:
    with pytest.raises(RenderError, match=re.escape("spec.source.path 'nope' does not exist")):
        render_app(plain_app(path="nope"), repo)


def test_jsonnet_is_refused_rather_than_skipped(repo: Path, git_repo: GitRepo) -> None:
    git_repo.commit({"plain/cluster.jsonnet": "{}"})
    with pytest.raises(RenderError, match=re.escape("plain/cluster.jsonnet: Jsonnet is not")):
        render_app(plain_app(), repo)
