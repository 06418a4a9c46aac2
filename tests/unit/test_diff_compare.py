"""compare(): statuses, server fields, the two-way fallback and Secrets.

The RayCluster and Secret fixtures were recorded from the real local API server
(``tests/testdata/diff/regenerate.py``): live objects with real managedFields, defaults,
and server-side dry-run predictions.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.diff import AppDiff, compare, compile_rules, strip_server_fields
from gitops_ray.errors import DiffError
from gitops_ray.types import ResourceKey

TESTDATA = Path(__file__).parents[1] / "testdata" / "diff"
RULES = compile_rules([])


def load(name: str) -> Any:
    text = (TESTDATA / name).read_text()
    return yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)


@pytest.fixture
def recorded() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return (load("raycluster-desired.yaml"), load("raycluster-predicted.json"),
            load("raycluster-live.json"))


def test_strip_server_fields() -> None:
    live = load("raycluster-live.json")
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}", "team": "ml"}
    live["metadata"].update(labels={}, selfLink="/x", deletionTimestamp="t",
                            deletionGracePeriodSeconds=30)
    live["status"] = {"state": "ready"}
    before = copy.deepcopy(live)
    out = strip_server_fields(live)
    assert live == before  # untouched
    assert out["metadata"] == {"name": "demo", "namespace": "ray-demo",
                               "annotations": {"team": "ml"}}
    assert "status" not in out and out["spec"] == live["spec"]
    only_last_applied = {"metadata": {"name": "x", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert strip_server_fields(only_last_applied) == {"metadata": {"name": "x"}}


def test_prediction_equal_to_live_is_synced(recorded: Any) -> None:
    desired, predicted, live = recorded
    diff = compare(desired=desired, predicted=predicted, live=live, rules=RULES)
    assert (diff.status, diff.reason, diff.warnings) == ("Synced", "", ())
    assert diff.key == ResourceKey("ray.io", "RayCluster", "ray-demo", "demo")
    assert diff.desired_normalized == diff.live_normalized
    assert "managedFields" not in (diff.live_normalized or {})["metadata"]


def test_prediction_differing_from_live_is_modified(recorded: Any) -> None:
    desired, predicted, live = recorded
    predicted["spec"]["rayVersion"] = "2.53.0"
    diff = compare(desired=desired, predicted=predicted, live=live, rules=RULES)
    assert (diff.status, diff.reason) == ("OutOfSync", "modified")


def test_live_only_field_counts_when_predicted(recorded: Any) -> None:
    # with a prediction the comparison is exact: a field the apply would remove shows
    desired, predicted, live = recorded
    live["spec"]["suspend"] = True
    assert compare(desired=desired, predicted=predicted, live=live, rules=RULES).reason == \
        "modified"


def test_booleans_are_not_numbers(recorded: Any) -> None:
    desired, predicted, live = recorded
    predicted["spec"]["headGroupSpec"]["enableIngress"] = True
    live["spec"]["headGroupSpec"]["enableIngress"] = 1
    assert compare(desired=desired, predicted=predicted, live=live, rules=RULES).reason == \
        "modified"


def test_missing_and_extraneous(recorded: Any) -> None:
    desired, _, live = recorded
    missing = compare(desired=desired, predicted=None, live=None, rules=RULES)
    assert (missing.status, missing.reason) == ("OutOfSync", "missing")
    assert missing.desired_normalized == desired and missing.live_normalized is None
    extra = compare(desired=None, predicted=None, live=live, rules=RULES)
    assert (extra.status, extra.reason) == ("OutOfSync", "extraneous")
    assert extra.desired_normalized is None
    assert extra.live_normalized is not None and "uid" not in extra.live_normalized["metadata"]
    assert extra.key == missing.key
    with pytest.raises(DiffError):
        compare(desired=None, predicted=None, live=None, rules=RULES)


def test_extraneous_object_being_deleted_is_deleting(recorded: Any) -> None:
    _, _, live = recorded
    terminating = copy.deepcopy(live)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gone_soon = compare(desired=None, predicted=None, live=terminating, rules=RULES)
    assert (gone_soon.status, gone_soon.reason) == ("OutOfSync", "deleting")
    assert AppDiff(resources=[gone_soon]).status == "OutOfSync"  # not Synced until gone


def test_without_prediction_server_defaults_are_not_drift(recorded: Any) -> None:
    desired, _, live = recorded  # live has ports[].protocol: TCP, desired does not
    assert live["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0][
        "protocol"] == "TCP"
    diff = compare(desired=desired, predicted=None, live=live, rules=RULES)
    assert (diff.status, diff.reason) == ("Synced", "")


def test_without_prediction_lists_compare_by_index(recorded: Any) -> None:
    desired, _, live = recorded
    live["spec"]["workerGroupSpecs"].append({"groupName": "extra"})
    diff = compare(desired=desired, predicted=None, live=live, rules=RULES)
    assert diff.reason == "modified"
    assert diff.live_normalized is not None
    assert diff.live_normalized["spec"]["workerGroupSpecs"][-1] == {"groupName": "extra"}


def test_compare_does_not_touch_its_inputs(recorded: Any) -> None:
    before = copy.deepcopy(recorded)
    desired, predicted, live = recorded
    compare(desired=desired, predicted=predicted, live=live, rules=RULES)
    compare(desired=desired, predicted=None, live=live, rules=RULES)
    assert (desired, predicted, live) == before


def test_secret_string_data_compares_as_data() -> None:
    desired, live = load("secret-desired.json"), load("secret-live.json")
    assert "stringData" in desired and "stringData" not in live
    assert compare(desired=desired, predicted=None, live=live, rules=RULES).status == "Synced"
    desired["stringData"]["token"] = "rotated"
    assert compare(desired=desired, predicted=None, live=live, rules=RULES).reason == "modified"
    predicted = load("secret-predicted.json")
    assert compare(desired=desired, predicted=predicted, live=live,
                   rules=RULES).status == "Synced"


def test_warnings_name_rule_object_and_both_sides(recorded: Any) -> None:
    desired, predicted, live = recorded
    rules = compile_rules([{"group": "ray.io", "kind": "RayCluster",
                            "jqPathExpressions": [".spec.nothing[]"]}])
    diff = compare(desired=desired, predicted=predicted, live=live, rules=rules)
    assert diff.warnings == (
        "ignoreDifferences[0].jqPathExpressions[0] '.spec.nothing[]' skipped for "
        "ray.io/RayCluster:ray-demo/demo (desired and live): "
        "JQ patch returned error: Cannot iterate over null",)


def test_rules_apply_to_both_sides(recorded: Any) -> None:
    desired, predicted, live = recorded
    predicted["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "0"
    rules = compile_rules([{"group": "ray.io", "kind": "RayCluster",
                            "jsonPointers": ["/spec/headGroupSpec/rayStartParams"]}])
    assert compare(desired=desired, predicted=predicted, live=live, rules=rules).status == \
        "Synced"


def test_app_diff_status_and_warnings(recorded: Any) -> None:
    desired, predicted, live = recorded
    synced = compare(desired=desired, predicted=predicted, live=live, rules=RULES)
    assert AppDiff(resources=[synced]).status == "Synced"
    assert AppDiff(resources=[]).status == "Synced"
    missing = compare(desired=load("secret-desired.json"), predicted=None, live=None,
                      rules=RULES)
    app = AppDiff(resources=[synced, missing])
    assert app.status == "OutOfSync" and app.warnings == []


@pytest.mark.parametrize("ignore", [[], [{"group": "ray.io", "kind": "RayCluster",
                                          "jqPathExpressions": [".spec.nothing[]"]}],
                                    [{"group": "ray.io", "kind": "RayCluster",
                                      "jsonPointers": ["/spec/headGroupSpec"]}]])
def test_live_as_its_own_prediction_is_compared_once_with_the_same_result(
        recorded: Any, ignore: list[dict[str, Any]]) -> None:
    """``predicted is live`` (an apply's answer, or a marked object), or equal to it (a
    no-op dry run): normalized once; the verdict, both sides and the warnings are those
    of comparing two copies that differ only in what normalization drops."""
    desired, _, live = recorded
    rules = compile_rules(ignore)
    once = compare(desired=desired, predicted=live, live=live, rules=rules)
    equal = compare(desired=desired, predicted=copy.deepcopy(live), live=live, rules=rules)
    other = copy.deepcopy(live)
    other["metadata"]["resourceVersion"] += "0"  # not equal: both sides normalized
    twice = compare(desired=desired, predicted=other, live=live, rules=rules)
    assert once == equal == twice
    assert once.status == "Synced" and once.reason == ""


def test_a_prediction_equal_by_python_but_not_by_json_is_still_compared(
        recorded: Any) -> None:
    """``True == 1`` in Python; a prediction with ``true`` where live has ``1`` differs."""
    desired, _, live = recorded
    live = copy.deepcopy(live)
    live["spec"]["enableInTreeAutoscaling"] = 1
    predicted = copy.deepcopy(live)
    predicted["spec"]["enableInTreeAutoscaling"] = True
    result = compare(desired=desired, predicted=predicted, live=live, rules=compile_rules([]))
    assert result.status == "OutOfSync" and result.reason == "modified"
