"""Parsing Argo CD Applications: what is honoured, what warns, what is rejected."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.render import application_from_flags, parse_application
from gitops_ray.render.apps import DirectorySource, HelmSource, KustomizeSource, SyncPolicy


def app_doc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "source": {"repoURL": "https://git.example.com/ray.git", "path": "clusters/prod",
                   "targetRevision": "main"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "ray"},
    }
    base.update(spec)
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "ray-prod", "namespace": "argocd",
                         "annotations": {"argocd.argoproj.io/compare-options": "x"}},
            "spec": base}


def test_full_application_is_mapped() -> None:
    doc = app_doc(
        project="ml",
        syncPolicy={"automated": {"prune": True, "selfHeal": True},
                    "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"]},
        ignoreDifferences=[{"group": "ray.io", "kind": "RayCluster",
                            "jqPathExpressions": [".spec.workerGroupSpecs[].replicas"]}])
    app = parse_application(doc, origin="apps/ray.yaml")
    assert app.name == "ray-prod" and app.namespace == "argocd" and app.project == "ml"
    assert app.source.repo_url == "https://git.example.com/ray.git"
    assert (app.source.path, app.source.target_revision) == ("clusters/prod", "main")
    assert app.destination.namespace == "ray"
    assert app.sync_policy == SyncPolicy(automated=True, prune=True, self_heal=True,
                                         sync_options=("CreateNamespace=true",
                                                       "ServerSideApply=true"))
    assert app.ignore_differences[0].kind == "RayCluster"
    assert app.annotations == {"argocd.argoproj.io/compare-options": "x"}
    assert app.warnings == ()


def test_defaults() -> None:
    doc = app_doc(source={"repoURL": "https://x/r.git"}, destination={})
    app = parse_application(doc)
    assert (app.source.path, app.source.target_revision, app.project) == (".", "HEAD", "default")
    assert app.sync_policy == SyncPolicy()
    assert app.source.helm is None and app.source.kustomize is None


def test_automated_enabled_false_turns_automation_off() -> None:
    doc = app_doc(syncPolicy={"automated": {"enabled": False, "prune": True}})
    policy = parse_application(doc).sync_policy
    assert not policy.automated and policy.prune


def test_helm_source_is_mapped() -> None:
    doc = app_doc(source={"repoURL": "https://x/r.git", "path": "charts/ray", "helm": {
        "releaseName": "rc", "valueFiles": ["values-prod.yaml"], "values": "a: 1\n",
        "parameters": [{"name": "image.tag", "value": "2.52.0"},
                       {"name": "x", "value": "007", "forceString": True}],
        "skipCrds": True, "namespace": "other", "ignoreMissingValueFiles": True,
        "apiVersions": ["ray.io/v1"], "kubeVersion": "1.31.0"}})
    helm = parse_application(doc).source.helm
    assert helm == HelmSource(value_files=("values-prod.yaml",), values="a: 1\n",
                              parameters=(("image.tag", "2.52.0", False), ("x", "007", True)),
                              release_name="rc", skip_crds=True, namespace="other",
                              ignore_missing_value_files=True, kube_version="1.31.0",
                              api_versions=("ray.io/v1",))


def test_values_object_wins_over_values_with_a_warning() -> None:
    doc = app_doc(source={"repoURL": "r", "helm": {"values": "a: 1", "valuesObject": {"a": 2}}})
    app = parse_application(doc, origin="apps/x.yaml")
    assert app.source.helm is not None and app.source.helm.values_object == {"a": 2}
    assert any("helm.values is ignored" in w for w in app.warnings)


def test_directory_and_kustomize_sources() -> None:
    directory = parse_application(app_doc(source={"repoURL": "r", "directory": {
        "recurse": True, "include": "{a,b}/*.yaml", "exclude": "*-test.yaml"}})).source
    assert directory.directory == DirectorySource(True, "{a,b}/*.yaml", "*-test.yaml")
    kustomize = parse_application(app_doc(source={"repoURL": "r", "kustomize": {
        "namePrefix": "p-", "namespace": "n"}})).source
    assert kustomize.kustomize == KustomizeSource(name_prefix="p-", namespace="n")


def test_empty_sections_do_not_force_a_source_type() -> None:
    source = parse_application(app_doc(source={
        "repoURL": "r", "helm": {}, "directory": {"recurse": False}, "kustomize": None})).source
    assert (source.helm, source.directory, source.kustomize) == (None, None, None)


def test_unsupported_fields_warn() -> None:
    doc = app_doc(
        source={"repoURL": "r", "path": "p", "plugin": {"name": "cdk8s"},
                "helm": {"fileParameters": [{"name": "a", "path": "f"}], "releaseName": "x"}},
        syncPolicy={"retry": {"limit": 3}, "automated": {"prune": True, "bogus": 1}},
        destination={"server": "https://prod.example.com:6443", "namespace": "ray"},
        sourceHydrator={"drySource": {}})
    doc["operation"] = {"sync": {}}
    warnings = "\n".join(parse_application(doc, origin="apps/a.yaml").warnings)
    for needle in ("spec.source.plugin (cdk8s) is ignored",
                   "spec.source.helm.fileParameters is ignored",
                   "spec.syncPolicy.retry is ignored",
                   "spec.syncPolicy.automated.bogus is ignored (unknown",
                   "spec.sourceHydrator is ignored", "operation is ignored"):
        assert needle in warnings
    assert all(w.startswith("apps/a.yaml: ") for w in warnings.splitlines())


def test_tag_prefix_of_argo_cd_3_6_warns_that_the_tag_must_be_named_whole() -> None:
    doc = app_doc(source={"repoURL": "r", "targetRevision": "1.0.*",
                          "tagPrefix": "component-b/"})
    [warning] = parse_application(doc).warnings
    assert "spec.source.tagPrefix is ignored (git tags are not resolved as semver" in warning


def test_gitops_ray_plugin_is_not_a_warning() -> None:
    doc = app_doc(source={"repoURL": "r", "plugin": {"name": "gitops-ray"}})
    assert parse_application(doc).warnings == ()


def test_helm_repository_chart_is_honoured() -> None:
    doc = app_doc(source={"repoURL": "https://ray-project.github.io/kuberay-helm/",
                          "chart": "ray-cluster", "targetRevision": "1.4.0"})
    app = parse_application(doc)
    assert app.source.chart == "ray-cluster"
    assert app.warnings == ()
    bad = app_doc(source={"repoURL": "oci://r.example/c", "chart": "../x"})
    with pytest.raises(ConfigError, match="must be a chart name"):
        parse_application(bad)


def test_multi_source() -> None:
    one = app_doc(sources=[{"repoURL": "r", "path": "p"}])
    del one["spec"]["source"]
    assert parse_application(one).source.path == "p"
    two = app_doc(sources=[{"repoURL": "r", "chart": "c", "targetRevision": "1.*",
                            "helm": {"valueFiles": ["$values/v.yaml"]}},
                           {"repoURL": "s", "ref": "values"}])
    del two["spec"]["source"]
    app = parse_application(two, origin="apps/m.yaml")
    assert [(s.repo_url, s.ref, s.ref_only) for s in app.all_sources] == [
        ("r", "", False), ("s", "values", True)]
    assert app.source == app.sources[0]
    both = app_doc(sources=[{"repoURL": "s"}])  # as Argo CD: sources wins over source
    parsed = parse_application(both)
    assert parsed.source.repo_url == "s"
    assert any("spec.source is ignored" in w for w in parsed.warnings)
    refs = app_doc(sources=[{"repoURL": "r", "ref": "a"}, {"repoURL": "s", "ref": "a"}])
    with pytest.raises(ConfigError, match="same ref"):
        parse_application(refs)


@pytest.mark.parametrize(("spec", "message"), [
    ({"source": {"path": "p"}}, "apps/ray.yaml: spec.source.repoURL is required"),
    ({"source": None}, "spec.source is required"),
    ({"source": {"repoURL": "r", "path": "/etc"}}, "must be relative"),
    ({"source": {"repoURL": "r", "path": "a/../../x"}}, "points outside the repository"),
    ({"source": {"repoURL": "r", "helm": {"releaseName": "x"}, "directory": {"recurse": True}}},
     "multiple application sources defined: Helm,Directory"),
    ({"source": {"repoURL": "r", "helm": {"skipCrds": "yes"}}},
     "spec.source.helm.skipCrds must be true or false"),
    ({"source": {"repoURL": "r", "helm": {"values": "a: [1"}}},
     "spec.source.helm.values is not valid YAML"),
    ({"source": {"repoURL": "r", "helm": {"values": "- 1"}}}, "must hold a YAML mapping"),
    ({"source": {"repoURL": "r", "helm": {"parameters": [{"value": "1"}]}}},
     r"parameters\[0\].name is required"),
    ({"source": {"repoURL": "r", "targetRevision": 1.0}}, "targetRevision must be a string"),
    ({"source": {"repoURL": "r", "directory": {"include": "{a,b"}}}, "unclosed"),
    ({"destination": {"server": "https://kubernetes.default.svc", "name": "in-cluster"}},
     "can't have both name and server"),
    ({"ignoreDifferences": ["x"]}, r"spec.ignoreDifferences\[0\] must be a mapping"),
    ({"syncPolicy": {"syncOptions": [True]}}, "syncOptions must be a list of strings"),
])
def test_invalid_applications(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_application(app_doc(**spec), origin="apps/ray.yaml")


def test_invalid_metadata() -> None:
    doc = app_doc()
    doc["metadata"]["name"] = "Ray_Prod"
    with pytest.raises(ConfigError, match="'Ray_Prod' is not a valid name"):
        parse_application(doc)
    doc["apiVersion"] = "app.k8s.io/v1beta1"
    with pytest.raises(ConfigError, match=r"expected apiVersion argoproj\.io/v1alpha1"):
        parse_application(doc)


def test_error_names_the_app_without_origin() -> None:
    with pytest.raises(ConfigError, match=r"^Application ray-prod: spec\.source\.repoURL"):
        parse_application(app_doc(source={"path": "x"}))


def test_application_from_flags() -> None:
    app = application_from_flags(name="demo", repo_url="https://x/r.git", path="clusters/a",
                                 dest_namespace="ray")
    assert (app.name, app.source.repo_url, app.source.path) == ("demo", "https://x/r.git",
                                                                 "clusters/a")
    assert (app.source.target_revision, app.destination.namespace) == ("HEAD", "ray")
    assert app.sync_policy == SyncPolicy() and app.warnings == ()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "", "repo_url": "r"}, "--name"),
    ({"name": "a", "repo_url": ""}, "--repo is required"),
    ({"name": "a", "repo_url": "r", "path": "../x"}, "--path '../x' must be relative"),
    ({"name": "a", "repo_url": "r", "helm": HelmSource(), "kustomize": KustomizeSource()},
     "multiple application sources"),
])
def test_application_from_flags_rejects(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        application_from_flags(**kwargs)
