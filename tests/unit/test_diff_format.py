"""Output: unified diffs like ``kubectl diff``, ``-o json`` patches, Secret masking."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from gitops_ray.diff import AppDiff, compare, compile_rules
from gitops_ray.diff.format import MASK, mask_secret_values, to_json, unified

TESTDATA = Path(__file__).parents[1] / "testdata" / "diff"
RULES = compile_rules([])
KEY = "ray.io/RayCluster:ray-demo/demo"


def load(name: str) -> Any:
    text = (TESTDATA / name).read_text()
    return yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)


def modified() -> Any:
    predicted, live = load("raycluster-predicted.json"), load("raycluster-live.json")
    predicted["spec"]["rayVersion"] = "2.53.0"
    return compare(desired=load("raycluster-desired.yaml"), predicted=predicted, live=live,
                   rules=RULES)


def secret(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "ray-demo"}, "data": dict(data)}


def test_unified_diff_has_kubectl_like_headers_and_only_the_change() -> None:
    text = unified(modified())
    lines = text.splitlines()
    assert lines[:2] == [f"--- live/{KEY}", f"+++ desired/{KEY}"]
    assert lines[2].startswith("@@ ")
    changed = [line for line in lines[3:] if line[:1] in "+-"]
    assert changed == ["-  rayVersion: 2.52.0", "+  rayVersion: 2.53.0"]
    assert text.endswith("\n") and "\x1b[" not in text


def test_unified_diff_in_color() -> None:
    text = unified(modified(), color=True)
    assert "\x1b[31m-  rayVersion: 2.52.0\x1b[0m" in text
    assert "\x1b[32m+  rayVersion: 2.53.0\x1b[0m" in text
    assert text.startswith(f"\x1b[1m--- live/{KEY}\x1b[0m\n")


def test_synced_resource_has_an_empty_diff() -> None:
    synced = compare(desired=load("raycluster-desired.yaml"),
                     predicted=load("raycluster-predicted.json"),
                     live=load("raycluster-live.json"), rules=RULES)
    assert unified(synced) == ""


def test_missing_and_extraneous_diffs_are_whole_objects() -> None:
    desired = load("raycluster-desired.yaml")
    added = unified(compare(desired=desired, predicted=None, live=None, rules=RULES))
    assert all(line[0] == "+" for line in added.splitlines()[3:])
    assert "+kind: RayCluster" in added and "+    replicas: 1" in added
    removed = unified(compare(desired=None, predicted=None, live=load("raycluster-live.json"),
                              rules=RULES))
    assert all(line[0] == "-" for line in removed.splitlines()[3:])
    assert "managedFields" not in removed


def test_secret_masks_are_consistent_and_never_the_value() -> None:
    desired, live = secret(token="bmV3", user="cmF5", same="eA=="), secret(
        token="b2xk", user="cmF5", same="eA==", gone="Z29uZQ==")
    masked_desired, masked_live = mask_secret_values(desired, live)
    assert masked_desired is not None and masked_live is not None
    assert masked_desired["data"]["user"] == masked_live["data"]["user"] == MASK
    assert masked_desired["data"]["token"] != masked_live["data"]["token"]
    assert {masked_desired["data"]["token"], masked_live["data"]["token"]} == {
        MASK, MASK + "++++"}
    assert set(masked_live["data"]["gone"]) == {"+"}
    assert desired["data"]["token"] == "bmV3"  # inputs untouched


def test_secret_diff_and_patch_show_masks_only() -> None:
    diff = compare(desired=secret(token="bmV3", user="cmF5"), predicted=None,
                   live=secret(token="b2xk", user="cmF5"), rules=RULES)
    text = unified(diff)
    assert "bmV3" not in text and "b2xk" not in text and "cmF5" not in text
    assert "-  token: ++++++++++++" in text or "-  token: '++++++++++++'" in text
    [record] = to_json(AppDiff(resources=[diff]))
    assert "bmV3" not in json.dumps(record) and "b2xk" not in json.dumps(record)
    assert record["patch"] == [{"op": "replace", "path": "/data/token", "value": MASK}]


def test_string_data_is_masked_too() -> None:
    desired = secret()
    desired["stringData"] = {"password": "hunter2"}
    text = unified(compare(desired=desired, predicted=None, live=None, rules=RULES))
    assert "hunter2" not in text and "aHVudGVyMg" not in text


def test_json_records_carry_a_patch_from_live_to_desired() -> None:
    diff = modified()
    [record] = to_json(AppDiff(resources=[diff]))
    assert record["key"] == KEY and record["kind"] == "RayCluster"
    assert (record["status"], record["reason"]) == ("OutOfSync", "modified")
    assert record["patch"] == [{"op": "replace", "path": "/spec/rayVersion",
                                "value": "2.53.0"}]
    patched = jsonpatch.apply_patch(copy.deepcopy(diff.live_normalized), record["patch"])
    assert patched == diff.desired_normalized
    json.dumps(record)  # serializable as is


def test_json_records_for_missing_and_extraneous() -> None:
    desired, live = load("raycluster-desired.yaml"), load("raycluster-live.json")
    records = to_json(AppDiff(resources=[
        compare(desired=desired, predicted=None, live=None, rules=RULES),
        compare(desired=None, predicted=None, live=live, rules=RULES)]))
    assert records[0]["patch"] == [{"op": "add", "path": "", "value": desired}]
    assert records[1]["patch"] == [{"op": "remove", "path": ""}]
    assert [r["reason"] for r in records] == ["missing", "extraneous"]
