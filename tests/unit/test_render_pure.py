"""Pure parts of the render stage: decoding, globs, namespaces, helm's command line."""

from __future__ import annotations

import json

import pytest

from gitops_ray.errors import RenderError
from gitops_ray.globs import GlobError, compile_glob, glob_matches
from gitops_ray.render.apps import HelmSource
from gitops_ray.render.documents import parse_json, parse_yaml, to_manifests
from gitops_ray.render.helm import HelmRun, escape_set_value, template_args
from gitops_ray.render.scope import apply_default_namespace
from tests.samples import raycluster

# -- documents -----------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_line_and_column() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n data: x\n"
    with pytest.raises(RenderError, match=r"^clusters/a.yaml:5:2: invalid YAML: "):
        parse_yaml(text, origin="clusters/a.yaml")


def test_documents_keep_index_and_line() -> None:
    docs = parse_yaml("---\n# c\n---\na: 1\n---\nb: 2\n", origin="f.yaml")
    assert [(d.index, d.line, d.body) for d in docs] == [(1, 3, None), (2, 4, {"a": 1}),
                                                         (3, 6, {"b": 2})]


def test_timestamps_and_binary_stay_strings() -> None:
    docs = parse_yaml("d: 2024-01-02\nt: 2024-01-02T03:04:05Z\nb: !!binary |\n  aGVs\n  bG8=\n",
                      origin="f")
    assert docs[0].body == {"d": "2024-01-02", "t": "2024-01-02T03:04:05Z", "b": "aGVsbG8="}
    json.dumps(docs[0].body)


def test_helm_source_comments_become_origins() -> None:
    out = ("---\n# Source: ray/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\n"
           "metadata: {name: a}\n---\n# Source: ray/templates/b.yaml\n- 1\n")
    docs = parse_yaml(out, origin="helm template charts/ray", helm_sources=True)
    assert docs[1].origin == "helm template charts/ray: ray/templates/b.yaml"
    with pytest.raises(RenderError, match=r"ray/templates/b.yaml:8 \(document 2\): expected a "
                                          r"Kubernetes object \(a mapping\), got a list"):
        to_manifests(docs)


def test_lists_are_expanded_and_empty_documents_dropped() -> None:
    text = ("apiVersion: v1\nkind: List\nitems:\n"
            "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
            "- {apiVersion: v1, kind: ConfigMapList, items: "
            "[{apiVersion: v1, kind: ConfigMap, metadata: {name: b}}]}\n---\n---\n"
            "apiVersion: v1\nkind: List\nitems: null\n")
    names = [m["metadata"]["name"] for m in to_manifests(parse_yaml(text, origin="f"))]
    assert names == ["a", "b"]


@pytest.mark.parametrize(("text", "message"), [
    ("kind: ConfigMap\nmetadata: {name: a}\n", r"f.yaml:1 \(document 1\): object has no "
                                                "apiVersion"),
    ("apiVersion: v1\nmetadata: {name: a}\n", "object has no kind"),
    ("apiVersion: v1\nkind: ConfigMap\n", "ConfigMap has no metadata"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {}}\n", "has no metadata.name"),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: j-}\n", "generateName"),
    ("just a string\n", "got a string"),
])
def test_invalid_objects_name_file_and_document(text: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        to_manifests(parse_yaml(text, origin="f.yaml"))


def test_json_errors_name_line() -> None:
    with pytest.raises(RenderError, match=r"^x.json:2:1: invalid JSON"):
        parse_json('{"a": 1,\n}', origin="x.json")
    with pytest.raises(RenderError, match="Extra data"):
        parse_json('{"a": 1}\n{"b": 2}', origin="x.json")

# -- globs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    ("*.yaml", "a.yaml", True),
    ("*.yaml", "sub/dir/a.yaml", True),  # no separators: * crosses /
    ("*.yaml", "a.yml", False),
    ("{config.json,deployment.yaml}", "deployment.yaml", True),
    ("{config.json,deployment.yaml}", "service.yaml", False),
    ("prod/{a,b{1,2}}.yaml", "prod/b2.yaml", True),
    ("prod/{a,b{1,2}}.yaml", "prod/b3.yaml", False),
    ("?.yaml", "a.yaml", True),
    ("[a-c]*.yaml", "b.yaml", True),
    ("[!a-c]*.yaml", "b.yaml", False),
    ("\\*.yaml", "*.yaml", True),
    ("\\*.yaml", "x.yaml", False),
    ("a.yaml", "a.yaml", True),
    ("a.yaml", "axyaml", False),
])
def test_globs_match_like_argo(pattern: str, path: str, matches: bool) -> None:
    assert glob_matches(pattern, path) is matches


@pytest.mark.parametrize("pattern", ["{a,b", "[ab", "a\\", "[z-a]", "[]"])
def test_invalid_globs(pattern: str) -> None:
    with pytest.raises(GlobError):
        compile_glob(pattern)

# -- default namespace ---------------------------------------------------------------------


def _objects() -> list[dict[str, object]]:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}}}
    return [
        raycluster("rc"),
        raycluster("elsewhere", namespace="other"),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "cr", "namespace": "stray"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray"}},
        crd,
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
        {"apiVersion": "unknown.example/v1", "kind": "Gadget", "metadata": {"name": "g"}},
    ]


def _namespaces(objs: list[dict[str, object]]) -> list[object]:
    return [o["metadata"].get("namespace") for o in objs]  # type: ignore[attr-defined]


def test_default_namespace_with_builtin_scopes() -> None:
    objs = _objects()
    result = apply_default_namespace(objs, "ray")
    assert _namespaces(result) == ["ray", "other", None, None, None, None, "ray"]
    assert objs[2]["metadata"] == {"name": "cr", "namespace": "stray"}  # inputs untouched


def test_default_namespace_prefers_the_callers_discovery() -> None:
    def lookup(api_version: str, kind: str) -> bool | None:
        return {"RayCluster": False, "Gadget": False}.get(kind)

    result = apply_default_namespace(_objects(), "ray", lookup=lookup)
    assert _namespaces(result) == [None, None, None, None, None, None, None]


def test_no_destination_namespace_leaves_objects_alone() -> None:
    assert _namespaces(apply_default_namespace(_objects(), ""))[:2] == [None, "other"]

# -- helm command line ---------------------------------------------------------------------


def test_template_args_follow_argo_cd() -> None:
    helm = HelmSource(parameters=(("a", "1", False), ("list", "{x,y}", False),
                                  ("s", "0x1,2", True), ("a", "2", False)),
                      skip_crds=False, skip_tests=True)
    run = HelmRun(release="rc", namespace="ray", kube_version="1.36.3",
                  api_versions=("ray.io/v1",), value_files=("/r/v1.yaml", "/r/v2.yaml"),
                  extra_values="/tmp/values.yaml", helm=helm)
    assert template_args("./charts/ray", run) == [
        "template", "./charts/ray", "--name-template", "rc", "--namespace", "ray",
        "--kube-version", "1.36.3", "--set", "a=2", "--set", "list={x,y}",
        "--set-string", "s=0x1\\,2", "--values", "/r/v1.yaml", "--values", "/r/v2.yaml",
        "--values", "/tmp/values.yaml", "--api-versions", "ray.io/v1", "--include-crds",
        "--skip-tests"]


def test_skip_crds_drops_include_crds() -> None:
    run = HelmRun("r", "", "", (), (), "", HelmSource(skip_crds=True))
    assert template_args(".", run) == ["template", ".", "--name-template", "r"]


@pytest.mark.parametrize(("value", "escaped"), [
    ("a,b", "a\\,b"), ("a\\,b", "a\\,b"), ("{a,b}", "{a,b}"), ("plain", "plain")])
def test_escape_set_value(value: str, escaped: str) -> None:
    assert escape_set_value(value) == escaped
