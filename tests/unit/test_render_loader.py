"""The YAML loader's shortcuts give exactly what PyYAML's safe loader gives.

Values, types, key order, aliases (one object for an anchor and its aliases), errors and
their messages, for the plain documents the shortcuts build and for everything they hand
to PyYAML (merge keys, ``=`` keys, complex keys, other tags, recursive aliases). The
same for documents built straight from the bounds scan's events (``loader.Builder``),
against the composer's path. Also: a one-shot command's disabled parse memo remembers
nothing and changes no result.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from gitops_ray.errors import GitOpsRayError
from gitops_ray.render import bounds, documents, loader
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

EVENT_CASES = [
    *CASES,
    "a: &x 1\nb: &x 2\nc: *x\n",  # a duplicate anchor
    "--- &a [1]\n--- *a\n",  # anchors are scoped to their document
    "k: &m {a: 1}\n? *m\n: v\n",  # an alias of a mapping as a key
    "k: &s key\n*s : v\nn: &t [1, &u {x: *s}]\nm: [*t, *u]\n",
    "a: {b: [{c: [[]]}, {}], 'd': \"e\", f: |\n    text\n  }\n",
    "\n\n# comment\nfirst: 1\n---\n- x\n...\n--- !!str tagged\n",
    "x: 2001-12-14\n",  # a timestamp: the composer's path builds it
    "[a, b, {c: d}]\n- broken\n",
    "",
    yaml.dump({"shared": (shared := {"env": [{"name": "A", "value": "1"}]}),
               "again": shared, "list": [shared, shared]}),
]


def _parsed(text: str) -> tuple[str, Any]:
    try:
        with documents.PARSES.disabled():  # a remembered parse would be unpacked
            docs = parse_yaml(text, origin="f.yaml")
    except GitOpsRayError as e:
        return "error", f"{type(e).__name__}: {e}"
    return "ok", [(d.index, d.line, d.origin, d.body) for d in docs]


@pytest.mark.parametrize("text", EVENT_CASES)
def test_documents_built_from_events_are_the_composer_s(text: str,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """parse_yaml with the events' builder gives what it gave composing every stream:
    values, types, key order, lines, aliases as one object, errors and their messages."""
    got = _parsed(text)
    monkeypatch.setattr(documents, "check_and_build_yaml",
                        lambda text, **kw: (bounds.check_yaml(text, origin=kw["origin"],
                                                              limit=kw["limit"]), None))
    want = _parsed(text)
    assert got[0] == want[0]
    if want[0] == "error":
        assert got[1] == want[1]
        return
    assert [d[:3] for d in got[1]] == [d[:3] for d in want[1]]
    assert _same([d[3] for d in got[1]], [d[3] for d in want[1]])
    assert _aliases([d[3] for d in got[1]]) == _aliases([d[3] for d in want[1]])


def _aliases(value: Any) -> list[int]:
    """Where the same container recurs, as positions in a walk: the aliases' shape."""
    seen: dict[int, int] = {}
    out: list[int] = []
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, (dict, list)):
            out.append(seen.setdefault(id(node), len(seen)))
            if out.count(out[-1]) == 1:
                pending.extend(node.values() if isinstance(node, dict) else node)
    return out


@pytest.mark.parametrize("text", [
    yaml.safe_dump(raycluster("rc", "ns")), "x: &a {p: 1}\ny: *a\n", "--- 1\n--- [a]\n"])
def test_plain_streams_are_built_from_the_events(text: str) -> None:
    """No second parse for the streams a render mostly reads (the workload's, aliases too)."""
    nodes, built = bounds.check_and_build_yaml(text, origin="f", loader=documents._Loader)
    assert built is not None and nodes == bounds.check_yaml(text, origin="f")


def test_the_builder_keeps_the_scan_s_bounds() -> None:
    """An alias bomb is refused by the scan, as before, whatever the builder is doing."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n"
        for i in range(6))
    with pytest.raises(GitOpsRayError) as built:
        bounds.check_and_build_yaml(bomb, origin="f")
    with pytest.raises(GitOpsRayError) as scanned:
        bounds.check_yaml(bomb, origin="f")
    assert str(built.value) == str(scanned.value)


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
