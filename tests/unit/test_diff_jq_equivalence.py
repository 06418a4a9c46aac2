"""The pure-Python jq fast path must agree with libjq, result for result, error for error.

Each vector runs ``del(<expr>)`` and ``[path(<expr>)]`` through libjq (the ``jq``
package, in process: these expressions are known to terminate) and through
``gitops_ray.diff.jqfast`` + ``gitops_ray.diff.paths.delete_paths``. A seeded random
generator adds a few thousand more expression/document pairs from the same grammar.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jq
import pytest
import yaml

from gitops_ray.diff import jqfast
from gitops_ray.diff.paths import delete_paths

VECTORS = yaml.safe_load(
    (Path(__file__).parents[1] / "testdata" / "diff" / "jq_vectors.yaml").read_text())
DOCS: dict[str, Any] = VECTORS["documents"]


def libjq(expr: str, doc: Any) -> tuple[str, Any, Any]:
    """("ok", del result, paths) or ("error", None, None), as libjq computes them."""
    try:
        deleted = jq.compile(f"del({expr})").input_value(doc).all()
        paths = jq.compile(f"[path({expr})]").input_value(doc).first()
    except ValueError:
        return "error", None, None
    assert len(deleted) == 1
    return "ok", deleted[0], [tuple(p) for p in paths]


def fast(expr: str, doc: Any) -> tuple[str, Any, Any]:
    program = jqfast.parse(expr)
    assert program is not None, f"{expr!r} should be on the fast path"
    try:
        paths = jqfast.evaluate_paths(program, doc)
    except jqfast.JqRuntimeError:
        return "error", None, None
    return "ok", delete_paths(copy.deepcopy(doc), paths), paths


@pytest.mark.parametrize("doc_name", sorted(DOCS))
@pytest.mark.parametrize("expr", VECTORS["fast"])
def test_fast_path_equals_libjq(expr: str, doc_name: str) -> None:
    doc = DOCS[doc_name]
    assert fast(expr, doc) == libjq(expr, doc)


@pytest.mark.parametrize("expr", VECTORS["fallback"])
def test_outside_the_subset_goes_to_libjq(expr: str) -> None:
    jq.compile(f"del({expr})")  # valid jq ...
    assert jqfast.parse(expr) is None  # ... that the fast path does not claim


def test_fast_path_does_not_copy_or_touch_the_document() -> None:
    doc = copy.deepcopy(DOCS["raycluster"])
    before = json.dumps(doc)
    program = jqfast.parse(".spec.workerGroupSpecs[] | select(.groupName == \"gpu\")")
    assert program is not None
    assert jqfast.evaluate_paths(program, doc) == [("spec", "workerGroupSpecs", 1)]
    assert json.dumps(doc) == before


def test_error_messages_look_like_libjq_without_values() -> None:
    program = jqfast.parse(".spec.text[]")
    assert program is not None
    with pytest.raises(jqfast.JqRuntimeError, match=r"^Cannot iterate over string$"):
        jqfast.evaluate_paths(program, DOCS["odd-types"])


# -- randomized equivalence --------------------------------------------------------------

KEYS = ["a", "b", "name", "x/y", "if"]
LITERALS = ['"a"', '"b"', "1", "1.0", "0", "true", "false", "null"]


def random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.15:
        return rng.choice(["a", "b", 0, 1, 1.0, True, False, None, "x"])
    if roll < 0.75:
        return {k: random_value(rng, depth - 1) for k in rng.sample(KEYS, rng.randint(1, 5))}
    return [random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]


def random_step(rng: random.Random, *, iterate: bool = True) -> str:
    opt = "?" if rng.random() < 0.4 else ""
    key = rng.choice(KEYS)
    choices = [f".{key}{opt}" if key.isidentifier() else f'."{key}"{opt}',
               f'["{key}"]{opt}', f"[{rng.randint(0, 2)}]{opt}"]
    if iterate:
        choices.append(f"[]{opt}")
    return rng.choice(choices)


def random_select(rng: random.Random) -> str:
    path = "." + "".join(random_step(rng, iterate=False) for _ in range(rng.randint(0, 2)))
    path = path if path != "." else "."
    path = path.replace("..", ".")
    op = rng.choice(["==", "!="])
    return f"select({path} {op} {rng.choice(LITERALS)})"


def random_expr(rng: random.Random) -> str:
    alts = []
    for _ in range(rng.randint(1, 2)):
        terms: list[str] = []
        for _ in range(rng.randint(1, 3)):
            if terms and rng.random() < 0.3:
                terms.append(random_select(rng))
            else:
                steps = "".join(random_step(rng) for _ in range(rng.randint(1, 3)))
                terms.append(steps if steps.startswith(".") else "." + steps)
        alts.append(" | ".join(terms))
    return ", ".join(alts)


def test_random_expressions_agree_with_libjq() -> None:
    rng = random.Random(20260823)
    checked = 0
    for _ in range(3000):
        expr, doc = random_expr(rng), {k: random_value(rng, 4) for k in KEYS}
        if jqfast.parse(expr) is None:
            continue
        assert fast(expr, doc) == libjq(expr, doc), (expr, doc)
        checked += 1
    assert checked > 2500  # the generator stays inside the subset
