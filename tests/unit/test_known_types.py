"""``knownTypeFields`` for every type Argo CD v3.6.1 registers, against Go's own round trip.

``tests/testdata/knowntypes_golden.json`` holds, per registered type, inputs built from its
shape (``hack/knowntypes/samples.py``) and what Argo CD's ``remarshal`` (encoding/json
over the k8s.io/api v0.37.0 type, ``hack/knowntypes``) made of them, or its error. Each
must come out of :func:`walker` the same; an input Go refuses comes out unchanged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.diff import compare, compile_rules
from gitops_ray.diff.knowntypes import compile_known_fields, known_types, walker
from gitops_ray.reconcile.argocdcm import parse_argocd_cm

GOLDEN = json.loads((Path(__file__).parent.parent / "testdata" /
                     "knowntypes_golden.json").read_text())


def test_every_registered_type_is_supported_and_sampled() -> None:
    assert len(known_types()) == 250  # 248 core/v1 + core/Quantity + meta/v1/Duration
    assert {s["type"] for s in GOLDEN} == known_types()
    fields, warnings = compile_known_fields(
        [{"field": "spec.x", "type": name} for name in sorted(known_types())], label="k")
    assert warnings == [] and len(fields) == 250


@pytest.mark.parametrize("sample", GOLDEN, ids=lambda s: f"{s['type']}")
def test_the_round_trip_is_go_s(sample: dict[str, Any]) -> None:
    walk = walker(sample["type"])
    assert walk is not None
    value = copy.deepcopy(sample["value"])
    out = walk(value)
    if "error" in sample:
        assert out == sample["value"], sample["error"]
    else:
        assert out == sample["out"]


def test_a_duration_in_git_equals_its_canonical_spelling_live() -> None:
    key = "resource.customizations.knownTypeFields.example.com_Job"
    system = parse_argocd_cm({"kind": "ConfigMap", "data": {
        key: "- {field: spec.timeout, type: meta/v1/Duration}"}}, origin="test argocd-cm")
    assert system.warnings == ()
    rules = compile_rules([], builtin=False, system=system.diff)

    def job(timeout: str) -> dict[str, Any]:
        return {"apiVersion": "example.com/v1", "kind": "Job",
                "metadata": {"name": "j", "namespace": "n"}, "spec": {"timeout": timeout}}
    assert not compare(desired=job("8760h"), predicted=None, live=job("8760h0m0s"),
                       rules=rules).out_of_sync
    assert compare(desired=job("8760h"), predicted=None, live=job("8761h"),
                   rules=rules).out_of_sync
