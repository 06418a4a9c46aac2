"""Applied marks (:mod:`gitops_ray.sync.records`): what they say; a damaged one reads as none."""

from __future__ import annotations

import pytest

from gitops_ray.sync.records import AppRecord, _data, _decode, applied_mark, markable
from gitops_ray.types import ResourceKey


def test_a_mark_names_the_version_and_changes_with_the_content() -> None:
    mark = applied_mark("content-a", "42")
    assert mark.startswith("42/") and mark == applied_mark("content-a", "42")
    assert applied_mark("content-b", "42") != mark
    assert applied_mark("content-a", "43") != mark
    assert "content" not in mark


def test_secrets_are_never_marked() -> None:
    assert not markable(ResourceKey("", "Secret", "ns", "creds"))
    assert markable(ResourceKey("", "ConfigMap", "ns", "cfg"))
    assert markable(ResourceKey("ray.io", "RayCluster", "ns", "rc"))
    assert markable(ResourceKey("example.com", "Secret", "ns", "not-core"))


def test_marks_round_trip_and_are_left_out_when_there_are_none() -> None:
    record = AppRecord(applied={"ray.io/RayCluster:ns/rc": applied_mark("c", "7")})
    data = _data("app", record)
    assert _decode({"data": data}).applied == record.applied
    assert "applied" not in _data("app", AppRecord())


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"', '{"k": 1}', "{"])
def test_damaged_marks_read_as_none(text: str) -> None:
    assert _decode({"data": {"applied": text}}).applied == {}


def test_an_app_of_more_objects_than_the_bound_keeps_no_marks() -> None:
    from types import SimpleNamespace

    from gitops_ray.reconcile.status import applied_marks
    from gitops_ray.sync.records import MAX_APPLIED_MARKS

    def keys(n: int) -> dict[ResourceKey, tuple[str, str]]:
        return {ResourceKey("", "ConfigMap", "ns", f"cm-{i}"): ("c", str(i)) for i in range(n)}

    secret = {ResourceKey("", "Secret", "ns", "creds"): ("c", "1")}
    kept = applied_marks(SimpleNamespace(applied={**keys(MAX_APPLIED_MARKS), **secret}))
    assert len(kept) == MAX_APPLIED_MARKS and str(next(iter(secret))) not in kept
    assert kept[str(ResourceKey("", "ConfigMap", "ns", "cm-7"))] == applied_mark("c", "7")
    assert applied_marks(SimpleNamespace(applied=keys(MAX_APPLIED_MARKS + 1))) == {}


def test_a_refresh_adds_the_proven_marks_within_the_bound_and_never_a_secrets() -> None:
    from types import SimpleNamespace

    from gitops_ray.reconcile.status import add_marks, adds_marks, proven_marks
    from gitops_ray.sync.records import MAX_APPLIED_MARKS

    cm, secret = ResourceKey("", "ConfigMap", "ns", "cfg"), ResourceKey("", "Secret", "ns", "s")
    comparison = SimpleNamespace(proven=frozenset({cm, secret}),
                                 applied={cm: ("c", "9"), secret: ("s", "9")})
    proven = proven_marks(comparison)
    assert proven == {str(cm): applied_mark("c", "9")}

    old = {"ray.io/RayCluster:ns/rc": applied_mark("r", "3"), str(cm): applied_mark("c", "2")}
    record = AppRecord(applied=dict(old))
    assert adds_marks(record.applied, proven)
    add_marks(record, proven)  # the stale mark of cfg is replaced, the others kept
    assert record.applied == {**old, **proven}
    assert not adds_marks(record.applied, proven)  # nothing new: no write for them
    full = AppRecord(applied={f"/ConfigMap:ns/cm-{i}": "x" for i in range(MAX_APPLIED_MARKS)})
    assert not adds_marks(full.applied, proven)
    add_marks(full, proven)  # past the bound: the record is left as it was
    assert len(full.applied) == MAX_APPLIED_MARKS and str(cm) not in full.applied
