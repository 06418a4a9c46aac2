"""The RFC 6902 patch of ``diff -o json``: applies to the target, index-wise like Argo CD's."""

from __future__ import annotations

import copy
import random
from typing import Any

import jsonpatch
import pytest

from bench.workload import Workload, diff_cases
from gitops_ray.diff.patch import escape, make_patch


def _applied(source: Any, ops: list[dict[str, Any]]) -> Any:
    return jsonpatch.apply_patch(copy.deepcopy(source), ops)


def _value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False, 0, 1, 1.0, 2.5, -3])
    if kind in (1, 2):
        return rng.choice(["", "a", "b", "x/y", "t~0", "~", "/"])
    if kind in (3, 4):
        return rng.randrange(3)
    if kind in (5, 6):
        return {rng.choice("abcd/~"): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _mutated(rng: random.Random, value: Any) -> Any:
    if isinstance(value, dict) and value and rng.random() < 0.8:
        out = dict(value)
        key = rng.choice(sorted(out))
        action = rng.randrange(3)
        if action == 0:
            del out[key]
        elif action == 1:
            out[key] = _mutated(rng, out[key])
        else:
            out[key + "n"] = _value(rng, 2)
        return out
    if isinstance(value, list) and value and rng.random() < 0.8:
        items = list(value)
        index = rng.randrange(len(items))
        action = rng.randrange(3)
        if action == 0:
            del items[index]
        elif action == 1:
            items[index] = _mutated(rng, items[index])
        else:
            items.insert(index, _value(rng, 2))
        return items
    return _value(rng, 1)


@pytest.mark.parametrize("seed", range(300))
def test_the_patch_turns_the_source_into_the_target(seed: int) -> None:
    rng = random.Random(seed)
    source = {"spec": _value(rng, 0), "list": [_value(rng, 1) for _ in range(3)]}
    target = source
    for _ in range(rng.randrange(1, 4)):
        target = _mutated(rng, target)
    ops = make_patch(source, target)
    assert _applied(source, ops) == target
    assert make_patch(target, target) == []


def test_raycluster_pairs_of_the_benchmark_workload() -> None:
    for case in diff_cases(Workload(clusters=40, apps=4)):
        ops = make_patch(case.live, case.predicted)
        assert _applied(case.live, ops) == case.predicted


def test_lists_are_walked_by_index_as_argo_cds_library_does() -> None:
    """gomodules.xyz/jsonpatch/v2 CreatePatch: tail removed from the end, then added,
    then the common prefix compared in place (no moves)."""
    assert make_patch({"l": [1, 2, 3, 4]}, {"l": [1, 9]}) == [
        {"op": "remove", "path": "/l/3"}, {"op": "remove", "path": "/l/2"},
        {"op": "replace", "path": "/l/1", "value": 9}]
    assert make_patch({"l": [0]}, {"l": [5, 0]}) == [
        {"op": "add", "path": "/l/1", "value": 0},
        {"op": "replace", "path": "/l/0", "value": 5}]


def test_json_equality_numbers_by_value_booleans_apart() -> None:
    assert make_patch({"a": 1}, {"a": 1.0}) == []
    assert make_patch({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a",
                                                  "value": True}]
    assert make_patch({"a": [0]}, {"a": [False]}) == [{"op": "replace", "path": "/a/0",
                                                       "value": False}]
    assert make_patch({"a": None}, {"a": {}}) == [{"op": "replace", "path": "/a", "value": {}}]
    assert make_patch({"a": {"b": 1}}, {"a": [1]}) == [
        {"op": "replace", "path": "/a", "value": [1]}]


def test_keys_are_escaped_as_json_pointer_tokens() -> None:
    assert escape("a/b~c") == "a~1b~0c"
    ops = make_patch({"m": {"x/y": 1, "p~q": 2}}, {"m": {"x/y": 3}})
    assert ops == [{"op": "replace", "path": "/m/x~1y", "value": 3},
                   {"op": "remove", "path": "/m/p~0q"}]
    assert _applied({"m": {"x/y": 1, "p~q": 2}}, ops) == {"m": {"x/y": 3}}
