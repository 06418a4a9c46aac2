"""Hostile input is refused before it is built: alias bombs, deep nesting, huge texts,
too many objects, a tool that prints without end, and object typos that would prune."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gitops_ray import limits
from gitops_ray.errors import ConfigError, LimitExceeded, RenderError
from gitops_ray.render.applications import application_from_flags, parse_application
from gitops_ray.render.bounds import check_value, check_yaml
from gitops_ray.render.documents import parse_json, parse_yaml
from gitops_ray.render.manifests import file_documents
from gitops_ray.render.notes import collecting
from gitops_ray.render.pipeline import render_app
from gitops_ray.render.shapes import load_catalog, load_patches
from gitops_ray.render.tools import run_tool


def alias_bomb(width: int = 10, levels: int = 6, leaf: str = "lol") -> str:
    """The classic "billion laughs": ``width`` aliases per level, ``levels`` levels."""
    lines = ["a0: &a0 [" + ",".join([f'"{leaf}"'] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_the_462_byte_bomb_of_the_issue_is_refused_with_file_and_line() -> None:
    bomb = alias_bomb()
    assert len(bomb) < 600
    with pytest.raises(LimitExceeded, match=r"^ray/bomb.yaml:\d+: the number of nodes added "
                                            r"by expanding aliases is over the limit"):
        parse_yaml(bomb, origin="ray/bomb.yaml")


def test_a_fat_leaf_bomb_is_refused_by_the_alias_text_bound() -> None:
    bomb = alias_bomb(width=4, levels=6, leaf="x" * 4000)  # few nodes, 16 MB of text
    with pytest.raises(LimitExceeded, match="text added by expanding aliases"):
        check_yaml(bomb, origin="f.yaml")


def test_many_aliases_are_refused() -> None:
    text = "a: &a x\nb: [" + ",".join(["*a"] * (limits.MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(LimitExceeded, match="the number of aliases"):
        check_yaml(text, origin="f.yaml")


def test_real_anchors_and_merge_keys_still_load() -> None:
    text = ("base: &base {cpu: '1', memory: 2Gi}\nhead: {<<: *base, gpu: '0'}\n"
            "workers: [*base, *base]\n")
    [doc] = parse_yaml(text, origin="f.yaml")
    assert doc.body["head"] == {"cpu": "1", "memory": "2Gi", "gpu": "0"}
    assert doc.body["workers"] == [{"cpu": "1", "memory": "2Gi"}] * 2


def test_anchors_are_scoped_to_their_document() -> None:
    docs = parse_yaml("a: &x [1, 2]\n---\na: &x 3\nb: *x\n", origin="f.yaml")
    assert docs[1].body == {"a": 3, "b": 3}


@pytest.mark.parametrize("depth", [limits.MAX_DEPTH + 1, 200_000])
def test_deep_yaml_nesting_is_refused_without_recursion(depth: int) -> None:
    """Our bound, or libyaml's own (PyYAML 6.0.4's libyaml refuses flow nesting past 1000
    while scanning ahead, before our check sees the events): a clear error either way."""
    with pytest.raises(RenderError, match=r"^f\.yaml:.*nesting depth"):
        parse_yaml("[" * depth + "]" * depth, origin="f.yaml")


def test_nesting_at_the_limit_loads() -> None:
    depth = limits.MAX_DEPTH
    [doc] = parse_yaml("[" * depth + "]" * depth, origin="f.yaml")
    assert doc.body is not None


def test_deep_json_is_refused() -> None:
    with pytest.raises(LimitExceeded, match="nesting depth"):
        parse_json("[" * (limits.MAX_DEPTH + 1) + "]" * (limits.MAX_DEPTH + 1), origin="f.json")
    with pytest.raises(RenderError, match=r"f\.json: "):
        parse_json("[" * 200_000 + "]" * 200_000, origin="f.json")


def test_json_node_count_is_bounded() -> None:
    with pytest.raises(LimitExceeded, match="number of nodes"):
        check_value(list(range(limits.MAX_DOCUMENT_NODES)), origin="f.json")


def test_a_document_with_too_many_nodes_is_refused() -> None:
    text = "[" + "0," * limits.MAX_DOCUMENT_NODES + "0]"
    with pytest.raises(LimitExceeded, match="nodes in one document"):
        check_yaml(text, origin="f.yaml")


def test_a_huge_text_is_refused_before_parsing() -> None:
    text = "a: " + "x" * limits.MAX_FILE_BYTES
    with pytest.raises(LimitExceeded, match=r"^f.yaml: 8.0 MiB is over the limit of 8.0 MiB"):
        parse_yaml(text, origin="f.yaml")


def test_a_huge_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as out:
        out.truncate(limits.MAX_FILE_BYTES + 1)
    with pytest.raises(LimitExceeded, match=r"big\.yaml: "):
        file_documents(path, origin="big.yaml")


def test_an_alias_bomb_is_an_error_even_where_non_manifests_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(alias_bomb())
    with pytest.raises(LimitExceeded):
        file_documents(path, origin="app/values.yaml")


# -- every other loader --------------------------------------------------------------------

def test_pod_shape_files_are_bounded() -> None:
    with pytest.raises(LimitExceeded):
        load_patches(alias_bomb(), origin=".gitops-ray/patches.yaml")
    with pytest.raises(LimitExceeded):
        load_catalog(alias_bomb(), origin=".gitops-ray/instance-types.yaml")


def test_helm_values_in_an_application_are_bounded() -> None:
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
           "metadata": {"name": "a"},
           "spec": {"source": {"repoURL": "https://x", "path": "a",
                               "helm": {"values": alias_bomb()}}}}
    with pytest.raises(ConfigError, match=r"spec.source.helm.values:\d+: the number of nodes"):
        parse_application(doc, origin="apps/a.yaml")


# -- objects per app and tool output -------------------------------------------------------

def test_too_many_objects_fail_the_app(tmp_path: Path) -> None:
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}}
             for i in range(limits.MAX_OBJECTS + 1)]
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "list.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    app = application_from_flags(name="many", repo_url="https://x", path="app")
    with pytest.raises(LimitExceeded, match=r"^app many: renders 10,001 objects, over the "
                                            r"limit of 10,000 per app"):
        render_app(app, tmp_path)


def test_a_tool_that_prints_too_much_is_stopped() -> None:
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    with pytest.raises(LimitExceeded, match=r"^helm template big: printed more than 1 MiB"):
        run_tool(endless, what="helm template big", max_output=limits.MIB)


def test_a_tool_within_the_bound_is_read_whole() -> None:
    script = "import sys\nsys.stdout.write('y' * 100000)\nsys.stderr.write('e' * 50000)"
    result = run_tool([sys.executable, "-c", script], what="t", max_output=100000)
    assert (result.returncode, len(result.stdout)) == (0, 100000)
    assert result.stderr.endswith("e") and len(result.stderr) < 50000


# -- object typos (issue 13 item 6) --------------------------------------------------------

RAYCLUSTER = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: rc\nspec: {}\n"


@pytest.mark.parametrize(("text", "missing"), [
    (RAYCLUSTER.replace("kind: RayCluster\n", ""), "kind"),
    (RAYCLUSTER.replace("kind:", "kidn:"), "kind"),
    (RAYCLUSTER.replace("apiVersion: ray.io/v1\n", ""), "apiVersion"),
    (RAYCLUSTER.replace("apiVersion:", "apiVerison:"), "apiVersion"),
    ("kind: RayCluster\nspec: {}\n", "apiVersion"),
])
def test_a_typo_in_kind_or_api_version_is_an_error(tmp_path: Path, text: str,
                                                   missing: str) -> None:
    path = tmp_path / "rc.yaml"
    path.write_text(text)
    with pytest.raises(RenderError, match=f"object has no {missing}"):
        render_app(application_from_flags(name="a", repo_url="https://x", path="."), tmp_path)


def test_yaml_that_does_not_look_like_an_object_is_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text("jobs:\n  test: {runs-on: ubuntu}\n")
    assert file_documents(path, origin="ci.yaml") == []


def test_a_skipped_unparseable_file_is_a_tolerated_problem(tmp_path: Path) -> None:
    path = tmp_path / "rc.yaml"
    path.write_text("apiVersion: ray.io/v1\nmetadata: {name: a\n")
    with collecting() as problems:
        assert file_documents(path, origin="app/rc.yaml") == []
    assert len(problems) == 1 and problems[0].startswith("skipped app/rc.yaml: not valid YAML")


def test_many_files_under_the_bounds_cannot_add_up_past_the_app_budget(
        tmp_path: Path) -> None:
    per_file = limits.MAX_DOCUMENT_NODES - 10
    (tmp_path / "app").mkdir()
    for index in range(limits.MAX_NODES // per_file + 1):
        (tmp_path / "app" / f"f{index:02}.json").write_text(json.dumps([0] * (per_file - 1)))
    app = application_from_flags(name="wide", repo_url="https://x", path="app")
    with pytest.raises(LimitExceeded, match="counted over the app's whole render"):
        render_app(app, tmp_path)


def test_json_nesting_at_the_limit_loads() -> None:
    depth = limits.MAX_DEPTH
    assert parse_json("[" * depth + "]" * depth, origin="f.json")[0].body is not None
