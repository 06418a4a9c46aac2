"""Helm charts stored in the repo, rendered by the real helm v3 as Argo CD would."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.errors import RenderError
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.apps import Application, HelmSource
from gitops_ray.render.tools import RenderTools
from tests.harness.git import GitRepo

TESTDATA = Path(__file__).parent.parent / "testdata" / "render" / "repo"


@pytest.fixture
def repo(git_repo: GitRepo) -> Path:
    """The test config repo, committed to a real git repository; its work tree."""
    shutil.copytree(TESTDATA, git_repo.work, dirs_exist_ok=True)
    git_repo.commit({}, message="config repo")
    return git_repo.work


def chart_app(helm: HelmSource | None = None, path: str = "charts/ray-cluster",
              name: str = "ray") -> Application:
    return application_from_flags(name=name, repo_url="file:///repo", path=path,
                                  dest_namespace="ray-prod", helm=helm)


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def test_chart_is_detected_and_rendered_like_argo_cd(repo: Path, helm_bin: Path) -> None:
    objs = render_app(chart_app(), repo, tools=RenderTools(helm_bin=helm_bin))
    assert [o["kind"] for o in objs] == ["CustomResourceDefinition", "ServiceAccount",
                                         "ConfigMap", "ClusterRole", "RayCluster"]
    kinds = by_kind(objs)
    cluster = kinds["RayCluster"]
    assert cluster["metadata"]["name"] == "ray"  # release name defaults to the app name
    assert cluster["metadata"]["labels"]["release-namespace"] == "ray-prod"
    assert cluster["metadata"]["namespace"] == "ray-prod"
    assert kinds["ServiceAccount"]["metadata"] == {"name": "ray-ray", "namespace": "ray-prod"}
    assert "namespace" not in kinds["ClusterRole"]["metadata"]
    assert kinds["ConfigMap"]["data"]["kubeVersion"] == "v1.36.3"


def test_values_in_argo_cd_order(repo: Path, helm_bin: Path) -> None:
    helm = HelmSource(
        release_name="rc", value_files=("values-prod.yaml",), values="owner: team-a\n",
        parameters=(("image.tag", "2.53.0", False), ("build", "007", True),
                    ("tags", "{a,b}", False), ("env", "staging,eu", False)))
    kinds = by_kind(render_app(chart_app(helm), repo,
                               kube_version="1.31.2", api_versions=("ray.io/v1",),
                               tools=RenderTools(helm_bin=helm_bin)))
    cluster = kinds["RayCluster"]
    assert cluster["metadata"]["name"] == "rc"
    assert [g["groupName"] for g in cluster["spec"]["workerGroupSpecs"]] == ["cpu", "gpu"]
    assert cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == \
        "rayproject/ray:2.53.0"
    assert kinds["ConfigMap"]["data"] == {
        "env": "staging,eu", "owner": "team-a", "build": "007", "buildKind": "string",
        "tags": "a;b", "kubeVersion": "v1.31.2", "hasRayApi": "true"}


def test_values_object_wins_over_values(repo: Path, helm_bin: Path) -> None:
    helm = HelmSource(values="owner: from-values\n", values_object={"owner": "from-object"})
    kinds = by_kind(render_app(chart_app(helm), repo, tools=RenderTools(helm_bin=helm_bin)))
    assert kinds["ConfigMap"]["data"]["owner"] == "from-object"


def test_skip_crds(repo: Path, helm_bin: Path) -> None:
    kinds = by_kind(render_app(chart_app(HelmSource(skip_crds=True)), repo,
                               tools=RenderTools(helm_bin=helm_bin)))
    assert "CustomResourceDefinition" not in kinds and "RayCluster" in kinds


def test_helm_namespace_overrides_release_namespace_only(repo: Path, helm_bin: Path) -> None:
    kinds = by_kind(render_app(chart_app(HelmSource(namespace="release-ns")), repo,
                               tools=RenderTools(helm_bin=helm_bin)))
    meta = kinds["RayCluster"]["metadata"]
    assert (meta["labels"]["release-namespace"], meta["namespace"]) == ("release-ns", "ray-prod")


def test_value_files_must_exist_and_stay_in_the_repo(repo: Path, helm_bin: Path) -> None:
    with pytest.raises(RenderError, match=re.escape(
            "app ray: helm value file 'values-qa.yaml' (charts/ray-cluster/values-qa.yaml) "
            "does not exist")):
        render_app(chart_app(HelmSource(value_files=("values-qa.yaml",))), repo,
                   tools=RenderTools(helm_bin=helm_bin))
    ignored = HelmSource(value_files=("values-qa.yaml",), ignore_missing_value_files=True)
    assert render_app(chart_app(ignored), repo, tools=RenderTools(helm_bin=helm_bin))
    with pytest.raises(RenderError, match="resolves outside the repository"):
        render_app(chart_app(HelmSource(value_files=("../../../../etc/passwd",))), repo,
                   tools=RenderTools(helm_bin=helm_bin))


def test_value_file_relative_to_repo_root(repo: Path, git_repo: GitRepo,
                                          helm_bin: Path) -> None:
    git_repo.commit({"env/prod/values.yaml": "owner: platform\n"})
    helm = HelmSource(value_files=("/env/prod/values.yaml", "../../env/prod/values.yaml"))
    kinds = by_kind(render_app(chart_app(helm), repo, tools=RenderTools(helm_bin=helm_bin)))
    assert kinds["ConfigMap"]["data"]["owner"] == "platform"


def test_file_dependency_is_built_without_touching_the_checkout(repo: Path,
                                                               helm_bin: Path) -> None:
    objs = render_app(chart_app(path="charts/with-dep", name="dep"), repo,
                      tools=RenderTools(helm_bin=helm_bin))
    assert sorted(o["metadata"]["name"] for o in objs) == ["dep-from-lib", "dep-own"]
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_template_failure_carries_helm_stderr(repo: Path, git_repo: GitRepo,
                                              helm_bin: Path) -> None:
    git_repo.commit({"charts/ray-cluster/templates/broken.yaml":
                     "value: {{ .Values.nope.deeper }}\n"})
    with pytest.raises(RenderError, match=r"^app ray: helm template charts/ray-cluster failed "
                                          r"\(exit 1\): .*broken.yaml.*nil pointer"):
        render_app(chart_app(), repo, tools=RenderTools(helm_bin=helm_bin))


def test_bad_inline_values_are_named_as_the_field(repo: Path, helm_bin: Path) -> None:
    # helm names the temp file holding helm.values; the error names the Application field.
    with pytest.raises(RenderError, match=re.escape("failed to parse spec.source.helm.values: ")):
        render_app(chart_app(HelmSource(values="a: [\n")), repo,
                   tools=RenderTools(helm_bin=helm_bin))


def test_missing_helm_binary(repo: Path) -> None:
    with pytest.raises(RenderError, match="/nonexistent/helm not found; install helm v3"):
        render_app(chart_app(), repo, tools=RenderTools(helm_bin="/nonexistent/helm"))


def test_explicit_helm_source_without_chart(repo: Path, helm_bin: Path) -> None:
    app = application_from_flags(name="x", repo_url="r", path="plain",
                                 helm=HelmSource(release_name="x"))
    with pytest.raises(RenderError, match=r"helm template plain failed .*Chart.yaml"):
        render_app(app, repo, tools=RenderTools(helm_bin=helm_bin))
