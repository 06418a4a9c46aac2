"""Fields others put inside Ray groups are kept; git's own fields are git's (pure)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from gitops_ray.diff.groupfields import (
    GROUP_FIELDS_ANNOTATION,
    _path_hash,
    _value_hash,
    conflicts,
    keep_others,
    recalled,
    with_memory,
)
from gitops_ray.diff.rules import compile_rules
from gitops_ray.sync.dryrun import prepare
from tests.samples import raycluster

FLAVOR_TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def _git() -> dict[str, Any]:
    rc = raycluster("demo", "ns", autoscaling=False)
    rc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    return rc


def _applied(git: dict[str, Any], manager: str = "gitops-ray") -> dict[str, Any]:
    """Live as our apply of ``git`` left it (with its memory)."""
    live = with_memory(copy.deepcopy(git), git)
    live["metadata"]["resourceVersion"] = "7"
    live["metadata"]["managedFields"] = [{"manager": manager, "operation": "Apply",
                                          "fieldsV1": {"f:spec": {"f:workerGroupSpecs": {}}}}]
    return live


def _admit(live: dict[str, Any]) -> dict[str, Any]:
    """What Kueue's podset.Merge does to every template, as a patch by ``kueue``."""
    out = copy.deepcopy(live)
    spec = out["spec"]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        pod = group["template"].setdefault("spec", {})
        pod.setdefault("nodeSelector", {})["flavor"] = "gpu-a100"
        pod.setdefault("tolerations", []).append(FLAVOR_TOLERATION)
        group["template"].setdefault("metadata", {}).setdefault("labels", {})["q"] = "x"
    out["metadata"]["managedFields"].append(
        {"manager": "kueue", "operation": "Update",
         "fieldsV1": {"f:spec": {"f:workerGroupSpecs": {}}}})
    out["metadata"]["managedFields"][0]["fieldsV1"] = {"f:metadata": {}}
    return out


def _gpu(obj: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] == "gpu")


def test_kueues_fields_are_kept_beside_gits():
    git = _git()
    live = _admit(_applied(git))
    body = keep_others(copy.deepcopy(git), live)
    pod = _gpu(body)["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd", "flavor": "gpu-a100"}
    assert pod["tolerations"] == [FLAVOR_TOLERATION]
    assert _gpu(body)["template"]["metadata"]["labels"] == {"q": "x"}
    head = body["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["nodeSelector"] == {"flavor": "gpu-a100"}


def test_git_removing_its_own_field_removes_it():
    git = _git()
    live = _admit(_applied(git))
    edited = copy.deepcopy(git)
    del _gpu(edited)["template"]["spec"]["nodeSelector"]
    body = keep_others(copy.deepcopy(edited), live)
    assert _gpu(body)["template"]["spec"]["nodeSelector"] == {"flavor": "gpu-a100"}


def test_fields_another_writer_removed_are_not_readded():
    git = _git()
    restored = _applied(git)  # Kueue suspended it again: the templates are git's once more
    restored["metadata"]["managedFields"].append(
        {"manager": "kueue", "operation": "Update",
         "fieldsV1": {"f:spec": {"f:workerGroupSpecs": {}}}})
    body = keep_others(copy.deepcopy(git), restored)
    assert _gpu(body)["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert "tolerations" not in _gpu(body)["template"]["spec"]


def test_git_tolerations_stay_and_others_are_added_after():
    git = _git()
    mine = {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    _gpu(git)["template"]["spec"]["tolerations"] = [mine]
    live = _admit(_applied(git))
    body = keep_others(copy.deepcopy(git), live)
    assert _gpu(body)["template"]["spec"]["tolerations"] == [mine, FLAVOR_TOLERATION]
    _gpu(git)["template"]["spec"]["tolerations"] = []  # git drops its own
    body = keep_others(copy.deepcopy(git), live)
    assert _gpu(body)["template"]["spec"]["tolerations"] == [FLAVOR_TOLERATION]


def test_without_memory_managed_fields_decide():
    git = _git()
    live = _admit(_applied(git))
    del live["metadata"]["annotations"][GROUP_FIELDS_ANNOTATION]
    body = keep_others(copy.deepcopy(git), live)
    assert _gpu(body)["template"]["spec"]["nodeSelector"]["flavor"] == "gpu-a100"
    ours = _applied(git)
    del ours["metadata"]["annotations"][GROUP_FIELDS_ANNOTATION]
    _gpu(ours)["template"]["spec"]["nodeSelector"]["old"] = "x"  # our own earlier field
    body = keep_others(copy.deepcopy(git), ours)
    assert _gpu(body)["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}


def test_a_field_git_sets_that_another_writer_changed_is_a_named_conflict():
    git = _git()
    live = _admit(_applied(git))
    _gpu(live)["template"]["spec"]["nodeSelector"]["disk"] = "hdd"
    predicted = keep_others(copy.deepcopy(git), live)
    found = conflicts(git, predicted, live)
    assert len(found) == 1
    assert "workerGroupSpecs[gpu].template.spec.nodeSelector.disk" in found[0]
    assert "kueue" in found[0]
    edited = copy.deepcopy(git)  # git's own change of the same field is not a conflict
    _gpu(edited)["template"]["spec"]["nodeSelector"]["disk"] = "nvme"
    assert conflicts(edited, keep_others(copy.deepcopy(edited), live), live) == []


def test_the_memory_has_no_values_and_reads_back():
    git = _git()
    _gpu(git)["template"]["spec"]["nodeSelector"]["secret-ish"] = "s3cr3t-value"
    text = with_memory(git, git)["metadata"]["annotations"][GROUP_FIELDS_ANNOTATION]
    assert "s3cr3t" not in text and "secret-ish" not in text and "ssd" not in text
    memory = recalled(with_memory(git, git))
    assert memory is not None and set(memory) == {"head", "w/cpu", "w/gpu"}


def test_prepare_keeps_kueue_suspend_and_applies_gits_only_at_creation():
    git = _git()
    git["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    git["spec"]["suspend"] = False
    rules = compile_rules([])
    assert prepare(git, None, rules)["spec"]["suspend"] is False
    live = _applied(git)
    live["spec"]["suspend"] = True
    assert prepare(git, live, rules)["spec"]["suspend"] is True
    del git["spec"]["suspend"]
    assert prepare(git, live, rules)["spec"]["suspend"] is True


def test_remembered_hashes_are_the_formula_s() -> None:
    """The annotation's hashes are on live objects: remembering them changes none, and
    values equal in Python but not in JSON (``True``/``1``, ``0.0``/``-0.0``) hash apart."""
    def formula(text: str, size: int) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:size]

    values = [True, 1, 1.0, 0.0, -0.0, None, "1", "é", [1, {"b": 2, "a": 1}], {"z": None}]
    for _ in range(2):  # the second round from memory
        for value in values:
            assert _value_hash(value) == formula(
                json.dumps(value, sort_keys=True, separators=(",", ":"), default=str), 8)
        for path in [("a",), ("a", "b"), ("env", "name=X")]:
            assert _path_hash(path) == formula(json.dumps(path, separators=(",", ":")), 12)
    assert len({_value_hash(v) for v in (True, 1, 0.0, -0.0)}) == 4
