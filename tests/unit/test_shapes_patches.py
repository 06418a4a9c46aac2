"""JSON Patch overlays: add creates parents, ordered application, precise errors."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_ray.errors import RenderError
from gitops_ray.render.shapes import (
    apply_ops,
    apply_patches,
    load_patches,
    parse_selector,
    patches_from_configmap,
)
from gitops_ray.render.shapes.patches import Patch


def template(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"annotations": dict(annotations)},
            "spec": {"containers": [{"name": "ray-worker"}]}}


def test_add_creates_missing_parents() -> None:
    target = template()
    apply_ops(target, [
        {"op": "add", "path": "/spec/nodeSelector/example.com~1pool", "value": "a"},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "k"}},
        {"op": "add", "path": "/spec/affinity/nodeAffinity/required/terms/0", "value": 1},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "A", "value": "1"}},
    ], where="t")
    assert target["spec"]["nodeSelector"] == {"example.com/pool": "a"}
    assert target["spec"]["tolerations"] == [{"key": "k"}]
    assert target["spec"]["affinity"] == {"nodeAffinity": {"required": {"terms": [1]}}}
    assert target["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_add_replaces_null_parents_and_copy_creates_parents() -> None:
    target = {"metadata": {"annotations": {"zone": "z1"}}, "spec": {"nodeSelector": None}}
    apply_ops(target, [{"op": "copy", "from": "/metadata/annotations/zone",
                        "path": "/spec/nodeSelector/topology.kubernetes.io~1zone"}], where="t")
    assert target["spec"]["nodeSelector"] == {"topology.kubernetes.io/zone": "z1"}


@pytest.mark.parametrize(("op", "message"), [
    ({"op": "replace", "path": "/spec/nodeSelector/a", "value": 1}, "path not found"),
    ({"op": "remove", "path": "/spec/tolerations/0"}, "path not found"),
    ({"op": "copy", "from": "/metadata/labels/x", "path": "/spec/a"}, "path not found"),
    ({"op": "add", "path": "/spec/containers/3/env/-", "value": 1}, "path not found"),
    ({"op": "test", "path": "/spec/containers/0/name", "value": "ray-head"}, "test failed"),
])
def test_errors_name_the_patch_op_and_target(op: dict[str, Any], message: str) -> None:
    patches = [Patch("Pod", ({"op": "add", "path": "/spec/x", "value": 1}, op),
                     origin=".gitops-ray/patches.yaml patches[3]")]
    with pytest.raises(RenderError) as error:
        apply_patches(template(), patches, kind="Pod", where="RayCluster demo head group")
    assert str(error.value).startswith(
        f".gitops-ray/patches.yaml patches[3] (kind Pod) on RayCluster demo head group: "
        f"patch[1] {op['op']} {op['path']}: {message}")


def test_later_patches_override_earlier_and_see_their_result() -> None:
    patches = load_patches("""
- kind: Pod
  patch: [{op: add, path: /spec/nodeSelector/pool, value: first}]
- kind: Pod
  patch:
    - {op: add, path: /spec/nodeSelector/pool, value: second}
    - {op: add, path: /metadata/labels/stage, value: two}
- kind: Pod
  selector: stage in (two)
  patch: [{op: add, path: /spec/priorityClassName, value: late}]
- kind: Pod
  selector: stage notin (two)
  patch: [{op: add, path: /spec/priorityClassName, value: never}]
""", origin="p.yaml")
    target = template()
    apply_patches(target, patches, kind="Pod", where="t")
    assert target["spec"]["nodeSelector"] == {"pool": "second"}
    assert target["spec"]["priorityClassName"] == "late"


def test_selector_sees_labels_annotations_and_facts() -> None:
    patches = [Patch("Pod", ({"op": "add", "path": "/spec/hit", "value": True},),
                     parse_selector("a=1,b=2,c=3"))]
    target = template(b="2")
    target["metadata"]["labels"] = {"a": "1", "b": "overridden-by-annotation"}
    apply_patches(target, patches, kind="Pod", where="t", facts={"c": "3"})
    assert target["spec"]["hit"] is True
    assert "c" not in target["metadata"]["annotations"]  # facts are not written


def test_other_kinds_and_non_matching_selectors_do_nothing() -> None:
    patches = load_patches("""
- {kind: RayCluster, patch: [{op: add, path: /spec/x, value: 1}]}
- {kind: Pod, selector: "gitops-ray.io/market-type in (SPOT)",
   patch: [{op: add, path: /spec/x, value: 1}]}
""", origin="p.yaml")
    target = template(**{"gitops-ray.io/market-type": "ON_DEMAND"})
    apply_patches(target, patches, kind="Pod", where="t")
    assert target == template(**{"gitops-ray.io/market-type": "ON_DEMAND"})


def test_values_are_not_shared_between_targets() -> None:
    patches = load_patches("- {kind: Pod, patch: [{op: add, path: /spec/tolerations, "
                           "value: [{key: a}]}]}", origin="p.yaml")
    first, second = template(), template()
    apply_patches(first, patches, kind="Pod", where="1")
    apply_patches(second, patches, kind="Pod", where="2")
    first["spec"]["tolerations"][0]["key"] = "changed"
    assert second["spec"]["tolerations"] == [{"key": "a"}]


@pytest.mark.parametrize(("text", "message"), [
    ("{kind: Pod}", "p.yaml: expected a list of {kind, selector, patch} entries, got dict"),
    ("- {kind: Pod, patch: []}", "p.yaml patches[0]: 'patch' must be a non-empty list"),
    ("- {patch: [{op: add, path: /a, value: 1}]}", "p.yaml patches[0]: 'kind' must be a kind"),
    ("- {kind: Pod, selectors: x, patch: [{op: remove, path: /a}]}",
     "p.yaml patches[0]: unknown field(s) selectors (allowed: kind, selector, patch)"),
    ("- {kind: Pod, patch: [{op: remove, path: /a}]}\n"
     "- {kind: Pod, selector: 'a in (b', patch: [{op: remove, path: /a}]}",
     "p.yaml patches[1]: selector 'a in (b': expected ')' at column 8"),
    ("- {kind: Pod, selector: [a], patch: [{op: remove, path: /a}]}",
     "p.yaml patches[0]: 'selector' must be a string"),
    ("- {kind: Pod, patch: [{op: merge, path: /a}]}",
     "p.yaml patches[0].patch[0]: expected an operation with op one of add, copy, move"),
    ("- {kind: Pod, patch: [{op: add, path: /a}]}",
     "p.yaml patches[0].patch[0]: add needs 'value'"),
    ("- {kind: Pod, patch: [{op: copy, path: /a}]}",
     "p.yaml patches[0].patch[0]: copy needs 'from'"),
    ("- {kind: Pod, patch: [{op: remove, path: spec/a}]}",
     "p.yaml patches[0].patch[0].path: 'spec/a' must be a JSON pointer below the root"),
    ("- {kind: Pod, patch: [{op: remove, path: ''}]}", "must be a JSON pointer below the root"),
    ("- {kind: Pod, patch: [{op: remove, path: /a~2}]}", "invalid JSON pointer '/a~2'"),
    ("- [", "p.yaml: invalid YAML"),
])
def test_load_errors_name_file_and_index(text: str, message: str) -> None:
    with pytest.raises(RenderError) as error:
        load_patches(text, origin="p.yaml")
    assert message in str(error.value)


def test_configmap() -> None:
    patches = patches_from_configmap({
        "metadata": {"name": "patches", "namespace": "gitops-ray"},
        "data": {"version": "v1", "patches.yaml": "- {kind: Pod, patch: [{op: add, "
                                                  "path: /spec/a, value: 1}]}"}})
    assert patches[0].origin == "ConfigMap gitops-ray/patches patches[0]"
    assert load_patches("", origin="x") == []


def test_the_charts_form_under_a_patches_key() -> None:
    text = "- {kind: Pod, patch: [{op: add, path: /spec/a, value: 1}]}"
    assert load_patches("patches:\n" + text.replace("- ", "  - "), origin="x") == \
        load_patches(text, origin="x")
    assert load_patches("patches: []", origin="x") == []
