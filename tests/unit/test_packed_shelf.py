"""The watch cache's shared packing (gitops_ray.packed.Shelf) loses nothing and shares.

Every reader of a cached live object (diff, health, the worker-group view, takeover, the
web page) gets ``Piece.unpack()``; if that is the object as the API server sent it, key
order included, none of them can answer differently. Checked on the bench workload's
realistic RayClusters (the API server's view after a sync, the autoscaler, the operator's
status and a manual edit) and on the test samples, then on the readers themselves.
"""

from __future__ import annotations

import copy
import gc
import json
import marshal
from typing import Any

import pytest

from bench.workload import Workload, diff_case, ignore_rules
from gitops_ray.diff import compare, compile_rules
from gitops_ray.health import assess
from gitops_ray.health.workergroups import worker_groups
from gitops_ray.packed import Shelf, pack
from gitops_ray.sync.takeover import needs_takeover, takeover_patch
from tests import samples

WL = Workload(60, 3)
CASES = [diff_case(WL, i) for i in range(WL.clusters)]


def _exact(obj: Any) -> str:
    """Equal text means equal content and equal key order."""
    return json.dumps(obj)


def test_round_trip_is_exact_on_the_workload() -> None:
    shelf = Shelf()
    for case in CASES:
        for obj in (case.live, case.predicted, case.desired):
            assert _exact(shelf.pack(obj).unpack()) == _exact(obj)


@pytest.mark.parametrize("obj", [
    samples.raycluster("demo", "team-a"),
    samples.raycluster("x", groups=[samples.worker_group(f"g{i}") for i in range(5)]),
    {}, {"a": []}, {"a": {}}, {"a": [[], [[]], {"b": [1, "two", None, True, 2.5]}]},
    {"list": [samples.pod_template()] * 4},  # the same sub-structure twice in one object
])
def test_round_trip_is_exact_on_samples(obj: dict[str, Any]) -> None:
    shelf = Shelf(threshold=16)
    first, again = shelf.pack(obj), shelf.pack(obj)  # the second one shares pieces
    assert _exact(first.unpack()) == _exact(obj) == _exact(again.unpack())


def test_readers_answer_the_same_from_the_shelf() -> None:
    """Diff, health, worker groups and takeover of the unpacked object equal the original's."""
    shelf = Shelf()
    rules = compile_rules(ignore_rules())
    kept = [(case, shelf.pack(case.live), shelf.pack(case.predicted)) for case in CASES]
    for case, live, predicted in kept:
        slim_live, slim_predicted = live.unpack(), predicted.unpack()
        full = compare(desired=case.desired, predicted=case.predicted, live=case.live,
                       rules=rules)
        slim = compare(desired=case.desired, predicted=slim_predicted, live=slim_live,
                       rules=rules)
        assert (slim.out_of_sync, slim.reason) == (full.out_of_sync, full.reason)
        assert slim.live_normalized == full.live_normalized
        assert assess(slim_live) == assess(case.live)
        assert worker_groups(case.desired, slim_live) == worker_groups(case.desired, case.live)
        assert needs_takeover(slim_live) == needs_takeover(case.live)
        assert takeover_patch(slim_live) == takeover_patch(case.live)


def test_unpacked_copies_are_private() -> None:
    shelf = Shelf(threshold=16)
    obj = CASES[0].live
    piece = shelf.pack(obj)
    copy = piece.unpack()
    copy["spec"]["headGroupSpec"]["template"]["spec"]["containers"].clear()
    copy["metadata"]["managedFields"][0]["fieldsV1"].clear()
    assert _exact(piece.unpack()) == _exact(obj)
    assert _exact(shelf.pack(obj).unpack()) == _exact(obj)


def test_repeated_sub_structures_are_stored_once() -> None:
    """Many RayClusters from few templates cost less than packed one by one."""
    plain = sum(len(pack(c.live)) for c in CASES)
    shelf = Shelf()
    kept = [shelf.pack(c.live) for c in CASES]
    own = sum(p.size for p in kept)
    shared = {id(part): part.size for p in kept for part in _parts(p)}
    assert len(shelf) == len(shared) > 0
    assert own + sum(shared.values()) < plain * 0.6


def _parts(piece: Any) -> list[Any]:
    return [q for part in piece.parts for q in (part, *_parts(part))]


def test_pieces_live_only_while_an_object_uses_them() -> None:
    shelf = Shelf()
    kept = [shelf.pack(c.live) for c in CASES]
    assert len(shelf) > 0
    del kept
    gc.collect()
    assert len(shelf) == 0


def test_an_object_seen_once_shares_nothing() -> None:
    """A piece is made only for what repeats: an object without repeats is one blob."""
    shelf = Shelf(threshold=16)
    obj = {"a": {"x": "1" * 100}, "b": [{"y": "2" * 100}, {"z": "3" * 100}]}
    piece = shelf.pack(obj)
    assert piece.parts == () and len(shelf) == 0
    assert len(shelf.pack(obj).parts) == 2 and len(shelf) == 4  # seen twice: shared


def test_non_json_values_go_through_json_as_pack_does() -> None:
    shelf = Shelf()
    obj = {"a": (1, 2), "b": {"c": {1, 2}.__class__.__name__}}
    assert shelf.pack(obj).unpack() == json.loads(json.dumps(obj, default=str))


def test_deep_nesting_is_bounded() -> None:
    """Deeper than the walk can go: packed whole, like :func:`pack` (marshal's own bound)."""
    obj: dict[str, Any] = {}
    node = obj
    for _ in range(1500):
        node["a"] = {}
        node = node["a"]
    shelf = Shelf()
    piece = shelf.pack(obj)
    assert marshal.dumps(piece.unpack(), 2) == marshal.dumps(obj, 2)


def test_status_facts_of_git_objects_are_those_of_the_manifest() -> None:
    """The status's images and git replicas, remembered by content, equal a fresh reading."""
    from gitops_ray.health.workergroups import replicas_of
    from gitops_ray.reconcile.pipeline import DesiredObject
    from gitops_ray.reconcile.status import desired_facts, images_of

    for obj in [c.desired for c in CASES[:10]] + [samples.raycluster("demo", "team-a"),
                                                   {"apiVersion": "v1", "kind": "ConfigMap",
                                                    "metadata": {"name": "c"}}]:
        desired = DesiredObject.of(obj)
        facts = desired_facts(desired)
        assert sorted(facts.images) == images_of([obj])
        assert facts.replicas == (replicas_of(obj) if obj["kind"] == "RayCluster" else None)
        assert desired_facts(DesiredObject.of(obj)) is facts  # same content: not read again


def test_desired_objects_of_the_same_content_are_packed_once() -> None:
    """A commit that changes one file re-renders the app: every other object comes back
    with the same content and is the object already packed, not a new packing of it."""
    from gitops_ray.reconcile.pipeline import DesiredObject

    rc = samples.raycluster("same", "team-a")
    first = DesiredObject.of(rc)
    again = DesiredObject.of(copy.deepcopy(rc))
    assert again is first
    assert again.manifest() == rc
    edited = copy.deepcopy(rc)
    edited["spec"]["rayVersion"] = "2.99.0"
    other = DesiredObject.of(edited)
    assert other is not first and other.digest != first.digest
    assert other.manifest() == edited
    digest = first.digest
    del first, again
    gc.collect()  # kept only while a render keeps it: a later one packs anew
    assert DesiredObject.of(rc).digest == digest


@pytest.mark.parametrize("obj", [
    samples.raycluster("demo", "team-a"), {}, {"a": [[], [[]], {"b": [1, "two", None, 2.5]}]},
    {"a": (1, 2), "b": [{"c": ("x",)}]},  # tuples go through JSON, as the shelf's do
    {1: "int key", None: "null key"},  # YAML's non-string keys are kept, as the shelf's
])
def test_whole_packing_keeps_what_the_shelf_keeps(obj: dict[str, Any]) -> None:
    """Inside ``whole()`` an object is one blob (no parts, nothing shared) and unpacks to
    exactly what the shelf's packing gives back."""
    shelf = Shelf(threshold=16)
    shared = shelf.pack(obj).unpack()
    with shelf.whole():
        piece, again = shelf.pack(obj), shelf.pack(obj)
    assert piece.parts == () == again.parts and len(shelf) == 0
    assert repr(piece.unpack()) == repr(shared) == repr(again.unpack())
    assert piece.unpack() is not piece.unpack()  # private copies


def test_whole_packing_unpacks_what_an_object_holds_twice_as_two_copies() -> None:
    """As the shelf's pieces do: a YAML alias's object changed in one place only."""
    env = [{"name": "A", "value": "1"}]
    obj = {"head": {"env": env}, "worker": {"env": env}}
    shelf = Shelf()
    with shelf.whole():
        out = shelf.pack(obj).unpack()
    assert out == obj and out["head"]["env"] is not out["worker"]["env"]
