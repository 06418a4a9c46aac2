"""The YAML loader's shortcuts give exactly what PyYAML's safe loader gives.

Values, types, key order, aliases (one object for an anchor and its aliases), errors and
their messages, for the plain documents the shortcuts build and for everything they hand
to PyYAML (merge keys, ``=`` keys, complex keys, other tags, recursive aliases). Also:
a one-shot command's disabled parse memo remembers nothing and changes no result.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from gitops_ray.render import documents, loader
from gitops_ray.render.documents import parse_yaml
from gitops_ray.render.memo import ParseMemo
from tests.samples import raycluster


class _Reference(yaml.CSafeLoader):  # type: ignore[misc]
    """PyYAML as documents.py configured it before the shortcuts."""


_Reference.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
_Reference.add_constructor("tag:yaml.org,2002:binary", documents._binary_as_text)
for _tag in ("omap", "pairs"):
    _Reference.add_constructor(f"tag:yaml.org,2002:{_tag}",
                               getattr(yaml.SafeLoader, f"construct_yaml_{_tag}"))


def _load(cls: Any, text: str) -> tuple[str, Any]:
    parser = cls(text)
    try:
        out = []
        while parser.check_node():
            out.append(parser.construct_document(parser.get_node()))
        return "ok", out
    except yaml.YAMLError as e:
        return "error", f"{type(e).__name__}: {e}"
    finally:
        parser.dispose()


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    if depth > 50:  # a recursive document: compare its shape
        return repr(a) == repr(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    return bool(a == b)


CASES = [
    "a: 1\nb: yes\nc: on\nd: 0x1f\ne: 1_000\nf: 1:30\ng: .inf\nh: .nan\ni: ~\n",
    "j: 2001-12-14\nk: !!binary aGVsbG8=\nl: 2001-12-14t21:59:43.10-05:00\n",
    "- 'yes'\n- \"on\"\n- Yes\n- NO\n- 012\n- 0o12\n- 1e3\n- +1\n- -.5\n- 0b101\n- ''\n",
    "x: &a {p: 1, q: [1, 2]}\ny: *a\nz: [*a, *a]\n",
    "base: &b {a: 1}\nd:\n  <<: *b\n  c: 2\n",
    "? [1, 2]\n: x\n",
    "!!set {a, b}\n",
    "!!omap [a: 1, b: 2]\n",
    "a: !!str 1\nb: !!int '3'\nc: !!float '1'\nd: !!bool 'true'\ne: !!null ''\n",
    "a: &r [*r]\n",
    "= : x\n",
    "a: !custom 1\n",
    "a: 1\na: 2\n",
    "{1: a, 1.5: b, true: c, null: d}\n",
    "--- a\n--- [1]\n---\n",
    "a: !!str {b: 1}\n",
    "a: !!map [1]\n",
    "a: [1, 2\n",
    "a: *missing\n",
    yaml.safe_dump(raycluster("rc", "ns")),
]


@pytest.mark.parametrize("text", CASES)
def test_the_same_as_pyyaml(text: str) -> None:
    want, got = _load(_Reference, text), _load(documents._Loader, text)
    assert want[0] == got[0]
    if want[0] == "ok":
        assert _same(want[1], got[1])
    else:
        assert want[1] == got[1]


def test_an_alias_is_the_anchor_s_object() -> None:
    (_, body), = documents._documents("x: &a {p: [1]}\ny: *a\n", "o")[0]
    assert body["x"] is body["y"]


def test_the_resolver_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_REMEMBERED", 3)
    monkeypatch.setattr(loader, "_resolved", {})
    _, docs = _load(documents._Loader, "[a, b, '1', 2, c, 3.5, true, d, e]\n")
    assert docs == [["a", "b", "1", 2, "c", 3.5, True, "d", "e"]]
    assert len(loader._resolved) <= 3
    assert "x" * (loader.MAX_REMEMBERED_CHARS + 1) not in loader._resolved


def test_a_disabled_memo_remembers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = ParseMemo()
    monkeypatch.setattr(documents, "PARSES", memo)
    text = yaml.safe_dump(raycluster("rc", "ns"))
    other = text.replace("rc", "other")
    first = parse_yaml(text, origin="a.yaml")
    assert len(memo) == 1
    with memo.disabled():
        assert not memo.keeps(1)
        fresh = parse_yaml(other, origin="b.yaml")
        assert len(memo) == 1
    assert memo.keeps(1)
    assert [d.body for d in parse_yaml(other, origin="b.yaml")] == [d.body for d in fresh]
    assert len(memo) == 2 and [d.body for d in parse_yaml(text, origin="a.yaml")] == \
        [d.body for d in first]
