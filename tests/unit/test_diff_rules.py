"""ignoreDifferences rules: Argo CD's matching, jq, JSON pointer and managed-fields vectors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.diff import compile_rules
from gitops_ray.diff.jqrule import compile_jq
from gitops_ray.diff.paths import delete_paths
from gitops_ray.errors import ConfigError
from tests.samples import raycluster

TESTDATA = Path(__file__).parents[1] / "testdata" / "diff"


def load(name: str) -> Any:
    return json.loads((TESTDATA / name).read_text())


def deployment(name: str = "web", namespace: str = "apps") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "s:1"}]}}}}


def configmap(name: str = "cm", namespace: str = "apps", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


def normalized(rule: dict[str, Any], obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    result = compile_rules([rule], builtin=False, **kw).normalize(obj)
    assert result.warnings == []
    return result.obj


# -- matching ----------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "obj", "matches"), [
    ({"kind": "ConfigMap"}, configmap(), True),  # omitted group = core group
    ({"kind": "Deployment"}, deployment(), False),  # ... only (argo-cd #28590)
    ({"group": "apps", "kind": "Deployment"}, deployment(), True),
    ({"group": "*", "kind": "ConfigMap"}, configmap(), True),  # "*" matches "" too
    ({"group": "*", "kind": "*"}, deployment(), True),
    ({"group": "*.io", "kind": "RayCluster"}, raycluster(), True),  # "*" matches "."
    ({"group": "ray.io", "kind": "Ray*"}, raycluster(), True),
    ({"group": "ray.io", "kind": "{RayJob,RayCluster}"}, raycluster(), True),
    ({"group": "ray.io", "kind": "raycluster"}, raycluster(), False),  # case-sensitive
    ({"group": "Ray.io", "kind": "RayCluster"}, raycluster(), False),
    ({"group": "apps", "kind": "Deployment", "name": "web"}, deployment(), True),
    ({"group": "apps", "kind": "Deployment", "name": "we*"}, deployment(), False),  # exact
    ({"group": "apps", "kind": "Deployment", "namespace": "apps"}, deployment(), True),
    ({"group": "apps", "kind": "Deployment", "namespace": "other"}, deployment(), False),
    ({"group": "apps", "kind": "Deployment", "name": "", "namespace": ""}, deployment(), True),
])
def test_matching(rule: dict[str, Any], obj: dict[str, Any], matches: bool) -> None:
    rules = compile_rules([{**rule, "jsonPointers": ["/metadata/name"]}], builtin=False)
    assert ("name" not in rules.normalize(obj).obj["metadata"]) is matches


# -- jq ----------------------------------------------------------------------------------

def test_jq_deletes_a_field_of_every_list_element() -> None:
    obj = deployment()
    out = normalized({"group": "apps", "kind": "Deployment", "jqPathExpressions": [
        ".spec.template.spec.containers[].image"]}, obj)
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "app"},
                                                             {"name": "sidecar"}]
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "app:1"  # a copy


def test_jq_select_deletes_one_element() -> None:
    out = normalized({"group": "apps", "kind": "Deployment", "jqPathExpressions": [
        '.spec.template.spec.containers[] | select(.name == "sidecar")']}, deployment())
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["app"]


def test_jq_missing_path_is_a_silent_no_op() -> None:
    obj = deployment()
    assert normalized({"group": "apps", "kind": "Deployment", "jqPathExpressions": [
        ".spec.nothing.deeper", ".metadata.annotations[\"a/b\"]", ".spec.x[]?"]}, obj) == obj


def test_jq_runtime_error_skips_only_that_rule_with_a_warning() -> None:
    rules = compile_rules([
        {"kind": "ConfigMap", "jqPathExpressions": [".missing[]", ".data.b"]},
        {"kind": "ConfigMap", "jsonPointers": ["/data/c"]},
    ], builtin=False)
    result = rules.normalize(configmap(a="1", b="2", c="3"))
    assert result.obj["data"] == {"a": "1"}  # the other expression and rule still apply
    [warning] = result.warnings
    assert "ignoreDifferences[0].jqPathExpressions[0] '.missing[]'" in warning
    assert "ConfigMap:apps/cm" in warning and "Cannot iterate over null" in warning


def test_jq_multiple_outputs_skip_the_rule() -> None:
    result = compile_rules([{"kind": "ConfigMap", "jqPathExpressions": [".data.a) , (.data.b"]}],
                           builtin=False).normalize(configmap(a="1", b="2"))
    assert result.obj["data"] == {"a": "1", "b": "2"}
    assert "returned multiple objects" in result.warnings[0]


def test_jq_no_output_skips_the_rule() -> None:
    result = compile_rules([{"kind": "ConfigMap", "jqPathExpressions": [".data.a) | empty | (."]}],
                           builtin=False).normalize(configmap(a="1"))
    assert result.obj["data"] == {"a": "1"}
    assert "did not return any data" in result.warnings[0]


def test_jq_is_wrapped_textually_like_argo() -> None:
    # argo-cd's own vector: the expression closes del( and rewrites a JSON string
    rule = {"kind": "ConfigMap", "jqPathExpressions": [
        '.nothing) | .data["config.yaml"] |= (fromjson | del(.auth) | tojson']}
    obj = configmap(**{"config.yaml": '{"auth":{"token":"x"},"port":1}'})
    assert normalized(rule, obj)["data"]["config.yaml"] == '{"port":1}'


def test_jq_syntax_error_is_a_config_error_naming_rule_and_expression() -> None:
    with pytest.raises(ConfigError) as err:
        compile_rules([{"kind": "ConfigMap"},
                       {"kind": "ConfigMap", "jqPathExpressions": [".ok", ".spec["]}],
                      where="Application demo")
    message = str(err.value)
    assert message.startswith("Application demo: ignoreDifferences[1].jqPathExpressions[1]")
    assert "'.spec['" in message and "syntax error" in message


def test_jq_timeout_skips_the_rule_and_the_worker_recovers() -> None:
    rules = compile_rules([{"kind": "ConfigMap", "jqPathExpressions": [
        "until(false; .)", ".nothing) | del(.data.b) | (."]}], builtin=False, jq_timeout=0.3)
    result = rules.normalize(configmap(a="1", b="2"))
    assert result.obj["data"] == {"a": "1"}  # the next expression ran in a fresh worker
    assert len(result.warnings) == 1 and "timed out (0.3s)" in result.warnings[0]


def test_jq_warnings_never_quote_object_values() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"token": "aHVudGVyMg=="}}
    rules = compile_rules([{"kind": "Secret", "jqPathExpressions": [
        ".data.token[]", ".data.token | ascii_downcase", '.x) | error(.data.token) | (.']}],
        builtin=False)
    warnings = rules.normalize(secret).warnings
    assert len(warnings) == 3
    assert not any("aHVudGVyMg" in w or "ahvudgvymg" in w for w in warnings)


def test_jq_worker_sees_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITOPS_RAY_TEST_TOKEN", "do-not-leak")
    rules = compile_rules([{"kind": "ConfigMap", "jqPathExpressions": [
        '.nothing) | .data.env = ($ENV | tostring) | (.']}], builtin=False)
    assert "do-not-leak" not in rules.normalize(configmap()).obj["data"]["env"]


def test_each_expression_is_compiled_once() -> None:
    rule = {"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [".spec.x[]?.y"]}
    first = compile_rules([rule]).rules[0].jq[0]
    assert compile_rules([rule]).rules[0].jq[0] is first
    assert first is compile_jq(".spec.x[]?.y") and first.is_fast


# -- JSON pointers -----------------------------------------------------------------------

def test_pointer_escaping() -> None:
    obj = configmap(**{"a~b": "1", "c": "2"})
    obj["metadata"]["annotations"] = {"example.com/team": "ml", "keep": "x"}
    out = normalized({"kind": "ConfigMap", "jsonPointers": [
        "/metadata/annotations/example.com~1team", "/data/a~0b"]}, obj)
    assert out["metadata"]["annotations"] == {"keep": "x"}
    assert out["data"] == {"c": "2"}


@pytest.mark.parametrize("pointer", ["/spec/nothing", "/spec/replicas/x", "/spec/template/spec/"
                                     "containers/5", "/spec/template/spec/containers/x",
                                     "/spec/template/spec/containers/-"])
def test_missing_pointer_is_a_silent_no_op(pointer: str) -> None:
    obj = deployment()
    assert normalized({"group": "apps", "kind": "Deployment", "jsonPointers": [pointer]},
                      obj) == obj


def test_pointer_array_indexes_including_negative_like_json_patch_v5() -> None:
    rule = {"group": "apps", "kind": "Deployment", "jsonPointers": [
        "/spec/template/spec/containers/1/image", "/spec/template/spec/containers/-1/name"]}
    assert normalized(rule, deployment())["spec"]["template"]["spec"]["containers"] == [
        {"name": "app", "image": "app:1"}, {}]


@pytest.mark.parametrize("pointer", ["spec/replicas", "", "/a~2b"])
def test_malformed_pointer_is_a_config_error(pointer: str) -> None:
    with pytest.raises(ConfigError, match=r"ignoreDifferences\[0\]\.jsonPointers\[0\]"):
        compile_rules([{"kind": "ConfigMap", "jsonPointers": [pointer]}])


def test_pointers_run_before_jq_within_a_rule_and_rules_in_order() -> None:
    obj = configmap()
    obj["list"] = ["a", "b", "c", "d"]
    rules = compile_rules([
        {"kind": "ConfigMap", "jqPathExpressions": [".list[0]"], "jsonPointers": ["/list/0"]},
        {"kind": "ConfigMap", "jsonPointers": ["/list/0"]},
    ], builtin=False)
    assert rules.normalize(obj).obj["list"] == ["d"]
    # ignored_paths names the elements as they were in the original object
    assert rules.ignored_paths(obj) == [("list", 0), ("list", 1), ("list", 2)]


# -- managedFieldsManagers ---------------------------------------------------------------

def test_managed_fields_of_the_autoscaler_hide_the_atomic_worker_list() -> None:
    live = load("raycluster-live.json")
    rules = compile_rules([{"group": "ray.io", "kind": "RayCluster",
                            "managedFieldsManagers": ["python-requests"]}], builtin=False)
    assert "workerGroupSpecs" not in rules.normalize(live, live=live).obj["spec"]
    desired = raycluster("demo", "ray-demo")
    assert "workerGroupSpecs" not in rules.normalize(desired, live=live).obj["spec"]
    assert rules.normalize(desired).obj == desired  # no live object: no managed fields


def pod_with_sidecar() -> tuple[dict[str, Any], dict[str, Any]]:
    """A Deployment as git has it, and live with an injected sidecar owned by "injector"."""
    desired = deployment()
    desired["spec"]["template"]["spec"]["containers"].pop()
    live = copy.deepcopy(desired)
    live["metadata"]["labels"] = {"team": "ml", "injected": "yes"}
    live["metadata"]["finalizers"] = ["example.com/cleanup", "keep"]
    live["spec"]["template"]["spec"]["containers"].insert(
        0, {"name": "proxy", "image": "proxy:1", "ports": [{"containerPort": 15001}]})
    live["spec"]["template"]["spec"]["containers"][1]["env"] = [{"name": "INJECTED",
                                                                  "value": "1"}]
    live["metadata"]["managedFields"] = [
        {"manager": "gitops-ray", "operation": "Apply", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "injector", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:injected": {}},
                           "f:finalizers": {"v:\"example.com/cleanup\"": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                'k:{"name":"proxy"}': {".": {}, "f:name": {}, "f:image": {},
                                       "f:ports": {}},
                'k:{"name":"app"}': {"f:env": {}},
            }}}}}},
    ]
    return desired, live


def test_managed_fields_with_keyed_list_items_set_items_and_maps() -> None:
    desired, live = pod_with_sidecar()
    rules = compile_rules([{"group": "apps", "kind": "Deployment",
                            "managedFieldsManagers": ["injector"]}], builtin=False)
    out = rules.normalize(live, live=live).obj
    assert out["metadata"]["labels"] == {"team": "ml"}  # only the owned label
    assert out["metadata"]["finalizers"] == ["keep"]
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "app", "image": "app:1"}]
    assert out["spec"]["replicas"] == 3  # owned by another manager: kept
    assert rules.normalize(desired, live=live).obj == desired  # nothing injected in git
    assert set(rules.ignored_paths(live, live=live)) == {
        ("metadata", "labels", "injected"), ("metadata", "finalizers", 0),
        ("spec", "template", "spec", "containers", 1, "env"),
        ("spec", "template", "spec", "containers", 0)}


# -- ignored_paths agrees with normalize --------------------------------------------------

RULE_SETS = [
    [{"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [
        ".spec.workerGroupSpecs[1]", ".spec.workerGroupSpecs[].replicas"]}],
    [{"group": "ray.io", "kind": "*", "jsonPointers": ["/spec/workerGroupSpecs/0",
                                                      "/spec/workerGroupSpecs/0/minReplicas"]},
     {"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [
         '.spec.workerGroupSpecs[] | select(.groupName == "gpu")']}],
    [{"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [
        ".spec.workerGroupSpecs[-1].template", ".spec.headGroupSpec.template.spec.containers[]"
        " | select(.name | startswith(\"ray\")) | .ports"]}],  # libjq fallback
    [{"group": "ray.io", "kind": "RayCluster", "managedFieldsManagers": ["gitops-ray"]}],
]


@pytest.mark.parametrize("specs", RULE_SETS)
@pytest.mark.parametrize("builtin", [True, False])
def test_ignored_paths_agree_with_normalize(specs: list[dict[str, Any]], builtin: bool) -> None:
    live = load("raycluster-live.json")
    live["spec"]["workerGroupSpecs"].append(copy.deepcopy(live["spec"]["workerGroupSpecs"][0]))
    live["spec"]["workerGroupSpecs"][-1]["groupName"] = "extra"
    rules = compile_rules(specs, builtin=builtin)
    paths = rules.ignored_paths(live, live=live)
    assert paths
    assert delete_paths(copy.deepcopy(live), paths) == rules.normalize(live, live=live).obj


def test_ignored_paths_are_concrete_per_element() -> None:
    obj = raycluster(groups=None)
    obj["spec"]["workerGroupSpecs"][1]["scaleStrategy"] = {"workersToDelete": ["w"]}
    assert compile_rules([]).ignored_paths(obj) == [
        ("spec", "workerGroupSpecs", 0, "replicas"), ("spec", "workerGroupSpecs", 1, "replicas"),
        ("spec", "workerGroupSpecs", 1, "scaleStrategy")]


def test_ignored_paths_skip_rules_that_are_not_path_expressions() -> None:
    rules = compile_rules([{"kind": "ConfigMap", "jqPathExpressions": [
        '.nothing) | .data["x"] |= ascii_upcase | (.', ".data.y"]}], builtin=False)
    assert rules.ignored_paths(configmap(x="a", y="b")) == [("data", "y")]


# -- configuration errors ----------------------------------------------------------------

@pytest.mark.parametrize(("spec", "message"), [
    ({"group": "apps"}, r"ignoreDifferences\[0\]: 'kind' is required"),
    ({"kind": "X", "jqPathExpression": [".a"]}, "unknown field.*jqPathExpression"),
    ({"kind": "X", "jsonPointers": "/a"}, r"jsonPointers: expected a list of strings"),
    ({"kind": "X", "name": 3}, r"\.name: expected a string"),
    ("kind: X", "expected a mapping"),
])
def test_malformed_rules_are_config_errors(spec: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_rules([spec])


@pytest.mark.parametrize("field", ["group", "kind"])
def test_an_invalid_glob_matches_nothing_with_a_warning_like_argo(field: str) -> None:
    spec = {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"],
            field: "[secret-looking"}
    rules = compile_rules([{"kind": "ConfigMap", "jsonPointers": ["/data"]}, spec],
                          builtin=False, where="Application demo")
    assert rules.warnings == (
        f"Application demo: ignoreDifferences[1].{field} is not a valid glob "
        "(unclosed or empty '['): the rule matches nothing",)
    assert "secret-looking" not in rules.warnings[0]
    assert rules.normalize(deployment()).obj == deployment()  # matches nothing
    assert "data" not in rules.normalize(configmap(x="1")).obj  # the others still apply


def test_zero_timeout_means_the_default_and_negative_is_an_error() -> None:
    assert compile_rules([], jq_timeout=0).jq_timeout == 1.0
    with pytest.raises(ConfigError, match="must not be negative"):
        compile_rules([], jq_timeout=-1)
