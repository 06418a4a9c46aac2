"""The parse memo: a re-render parses only the texts that changed, and nothing else changes.

Hits are equal to a parse but independent of it and of each other; origins are the
caller's; failures are raised again, never remembered; the app-wide node budget holds
with a warm memo exactly as with a cold one; the memo stays within its bounds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gitops_ray import limits
from gitops_ray.errors import LimitExceeded, RenderError
from gitops_ray.packed import SHELF, Piece
from gitops_ray.render.applications import application_from_flags
from gitops_ray.render.documents import parse_json, parse_yaml, to_manifests
from gitops_ray.render.manifests import file_documents, render_directory
from gitops_ray.render.memo import PARSES, Parsed, ParseMemo, memo_key
from gitops_ray.render.notes import collecting
from gitops_ray.render.pipeline import render_app
from tests.samples import raycluster, worker_group


@pytest.fixture(autouse=True)
def cold_memo() -> Iterator[None]:
    PARSES.clear()
    yield
    PARSES.clear()


def rc_text(name: str, cpu: str = "1") -> str:
    obj = raycluster(name, groups=[worker_group("cpu", cpu=cpu), worker_group("gpu")])
    return yaml.safe_dump(obj, sort_keys=False)


def test_a_hit_is_equal_to_the_parse_but_a_fresh_object_each_time() -> None:
    text = rc_text("a") + "---\n# only a comment\n---\n" + rc_text("b")
    first = parse_yaml(text, origin="app/rc.yaml")
    second = parse_yaml(text, origin="app/rc.yaml")
    third = parse_yaml(text, origin="app/rc.yaml")
    assert (PARSES.misses, PARSES.hits) == (1, 2)
    assert second == first == third
    assert [(d.index, d.body is None) for d in second] == [(1, False), (2, True), (3, False)]
    assert second[2].line > 1
    second[0].body["metadata"]["labels"] = {"changed": "yes"}
    second[0].body["spec"]["workerGroupSpecs"][0]["replicas"] = 7
    assert third == first  # no hit shares anything with another, nor with the first parse
    assert parse_yaml(text, origin="app/rc.yaml") == first


def test_a_hit_is_named_by_its_caller() -> None:
    text = "---\n" + rc_text("a").replace("name: a", "nom: a", 1)
    parse_yaml(text, origin="one/rc.yaml")
    docs = parse_yaml(text, origin="two/rc.yaml")
    assert [d.origin for d in docs] == ["two/rc.yaml"] and PARSES.hits == 1
    with pytest.raises(RenderError, match=r"^two/rc.yaml:2 \(document 1\): RayCluster has no"):
        to_manifests(docs)


def test_helm_sources_are_part_of_the_key() -> None:
    out = "---\n# Source: ray/templates/rc.yaml\n" + rc_text("a")
    [plain] = parse_yaml(out, origin="helm template ray")
    [helm] = parse_yaml(out, origin="helm template ray", helm_sources=True)
    [again] = parse_yaml(out, origin="helm template x", helm_sources=True)
    assert plain.origin == "helm template ray"
    assert helm.origin == "helm template ray: ray/templates/rc.yaml"
    assert again.origin == "helm template x: ray/templates/rc.yaml"
    assert (PARSES.misses, PARSES.hits) == (2, 1)
    assert memo_key("yaml", out) != memo_key("yaml+helm", out) != memo_key("json", out)


def test_json_is_remembered_apart_from_the_same_text_as_yaml() -> None:
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}'
    [first] = parse_json(text, origin="a.json")
    [again] = parse_json(text, origin="b.json")
    [as_yaml] = parse_yaml(text, origin="a.yaml")
    assert first.body == again.body == as_yaml.body and again.origin == "b.json"
    assert first.body is not again.body
    assert (PARSES.misses, PARSES.hits) == (2, 1)


def test_a_re_render_parses_only_the_file_that_changed(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.yaml").write_text(rc_text(name))
    before = render_directory(tmp_path, tmp_path)
    assert (PARSES.misses, PARSES.hits) == (3, 0)
    (tmp_path / "b.yaml").write_text(rc_text("b", cpu="2"))
    after = render_directory(tmp_path, tmp_path)
    assert (PARSES.misses, PARSES.hits) == (4, 2)
    assert [d.origin for d in after] == ["a.yaml", "b.yaml", "c.yaml"]
    assert after[0] == before[0] and after[2] == before[2]
    group = after[1].body["spec"]["workerGroupSpecs"][0]
    assert group["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"


def test_a_warm_render_of_an_app_equals_a_cold_one(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(rc_text(name))
    app = application_from_flags(name="a", repo_url="https://x", path=".", dest_namespace="ray")
    cold = render_app(app, tmp_path)
    warm = render_app(app, tmp_path)
    assert warm == cold and PARSES.hits == 2
    assert all(obj["metadata"]["namespace"] == "ray" for obj in warm)


@pytest.mark.parametrize(("text", "error"), [
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n", RenderError),
    ("a: &a [1, 2]\nb: [" + ",".join(["*a"] * (limits.MAX_ALIASES + 1)) + "]\n",
     LimitExceeded),
])
def test_failures_are_raised_again_and_never_remembered(text: str,
                                                         error: type[Exception]) -> None:
    with pytest.raises(error) as first:
        parse_yaml(text, origin="app/bad.yaml")
    with pytest.raises(error) as second:
        parse_yaml(text, origin="app/bad.yaml")
    assert str(second.value) == str(first.value)
    assert len(PARSES) == 0 and PARSES.hits == 0


def test_invalid_json_is_not_remembered() -> None:
    for _ in range(2):
        with pytest.raises(RenderError, match=r"^x.json:1:9: invalid JSON"):
            parse_json('{"a": 1,}', origin="x.json")
    assert len(PARSES) == 0


def test_what_a_file_is_is_decided_again_on_every_render(tmp_path: Path) -> None:
    ci, broken = tmp_path / "ci.yaml", tmp_path / "notes.yaml"
    ci.write_text("jobs:\n  test: {runs-on: ubuntu}\n")
    broken.write_text("a: [1\n")
    for _ in range(2):
        with collecting() as problems:
            assert file_documents(ci, origin="ci.yaml") == []
            assert file_documents(broken, origin="notes.yaml") == []
        assert len(problems) == 1 and problems[0].startswith("skipped notes.yaml: not valid")
    assert PARSES.hits == 1  # ci.yaml; the broken file is parsed (and fails) each time


def alias_file(index: int) -> str:
    """A ConfigMap of ~100,000 nodes, most of them made by aliases: cheap to parse."""
    items = ",".join(["0"] * 1000)
    aliases = ",".join(["*a"] * 99)
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{index:02}}}\n"
            f"x: &a [{items}]\ny: [{aliases}]\n")


def test_the_app_node_budget_is_enforced_with_a_warm_memo(tmp_path: Path) -> None:
    files = limits.MAX_NODES // 100_000 + 1
    for index in range(files):
        (tmp_path / f"c{index:02}.yaml").write_text(alias_file(index))
    app = application_from_flags(name="wide", repo_url="https://x", path=".")
    with pytest.raises(LimitExceeded, match="counted over the app's whole render") as cold:
        render_app(app, tmp_path)
    PARSES.clear()
    for path in sorted(tmp_path.iterdir()):  # each file alone is within every bound
        assert file_documents(path, origin=path.name) != []
    assert len(PARSES) == files
    misses = PARSES.misses
    with pytest.raises(LimitExceeded) as warm:
        render_app(app, tmp_path)
    assert str(warm.value) == str(cold.value)
    assert PARSES.misses == misses  # every file was remembered: the one that goes over the
    # budget is scanned again and refused with the cold render's message


def test_bodies_with_tuples_are_not_remembered() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: !!omap [b: 1, c: 2]\n"
    for _ in range(2):
        [doc] = parse_yaml(text, origin="a.yaml")
        assert doc.body["x"] == [("b", 1), ("c", 2)]
    assert len(PARSES) == 0


def test_the_memo_forgets_the_least_recently_used_first() -> None:
    memo = ParseMemo(max_entries=2, max_chars=100)
    parsed = Parsed(1, ())
    memo.put(b"a", parsed, chars=10)
    memo.put(b"b", parsed, chars=10)
    assert memo.get(b"a") is parsed  # now b is the oldest
    memo.put(b"c", parsed, chars=10)
    assert (memo.get(b"b"), len(memo)) == (None, 2)
    memo.put(b"d", parsed, chars=85)  # 105 characters: a, the oldest, goes
    assert (memo.get(b"a"), memo.get(b"c"), memo.get(b"d")) == (None, parsed, parsed)
    memo.put(b"e", parsed, chars=101)  # larger than the whole memo: not kept
    assert (memo.get(b"e"), len(memo), memo.chars) == (None, 2, 95)


def test_the_process_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PARSES, "max_entries", 3)
    for index in range(10):
        parse_yaml(rc_text(f"rc{index}"), origin="rc.yaml")
    assert len(PARSES) == 3
    parse_yaml(rc_text("rc9"), origin="rc.yaml")
    parse_yaml(rc_text("rc0"), origin="rc.yaml")
    assert (PARSES.hits, PARSES.misses) == (1, 11)


def test_threads_share_the_memo_and_get_their_own_objects() -> None:
    texts = [rc_text(f"rc{index}") for index in range(8)]
    expected = [parse_yaml(text, origin="rc.yaml") for text in texts]
    results: list[list[object]] = [[] for _ in range(4)]

    def work(slot: int) -> None:
        for _ in range(5):
            for text in texts:
                docs = parse_yaml(text, origin="rc.yaml")
                docs[0].body["metadata"]["name"] = f"mutated-{slot}"
        results[slot] = [parse_yaml(text, origin="rc.yaml") for text in texts]

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result == expected for result in results)
    assert PARSES.misses == len(texts)


def test_a_remembered_body_shares_its_spec_with_the_object_made_from_it() -> None:
    [doc] = parse_yaml(rc_text("a"), origin="rc.yaml")
    parsed = PARSES.get(memo_key("yaml", rc_text("a")))
    assert parsed is not None
    [stored] = parsed.docs
    desired = doc.body  # what the render cache packs: the object, tracked and namespaced
    desired["metadata"].update(namespace="ray", labels={"gitops-ray.io/app": "a"})
    cached = SHELF.pack(desired)
    assert isinstance(stored.body, Piece)
    assert any(mine is theirs for mine in stored.body.parts for theirs in cached.parts)
