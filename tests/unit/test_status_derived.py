"""status_of (:mod:`gitops_ray.reconcile.status`): derived again only when its inputs changed.

A refresh that changed nothing hands back the same render, verdicts and healths; the
status fields are then the last ones, with a new ``comparedAt``. Anything that changes
what the fields say gives new fields.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

from gitops_ray.diff import AppDiff, compare, compile_rules
from gitops_ray.health import Health, HealthStatus
from gitops_ray.reconcile.pipeline import Comparison, DesiredObject
from gitops_ray.reconcile.status import status_of
from gitops_ray.render.applications import application_from_flags
from tests.samples import raycluster

RULES = compile_rules([])


def comparison(image: str = "rayproject/ray:2.52.0", *, revision: str = "a" * 40,
               live_replicas: int = 1) -> Comparison:
    app = application_from_flags(name="team", repo_url="https://git.example/ray.git",
                                 path="apps/team", dest_namespace="team")
    manifest = raycluster("demo", "team")
    manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = image
    desired = DesiredObject.of(manifest)
    live: dict[str, Any] = desired.manifest()
    live["spec"]["workerGroupSpecs"][0]["replicas"] = live_replicas
    diff = compare(desired=desired.manifest(), predicted=live, live=live, rules=RULES)
    health = Health(HealthStatus.HEALTHY, "")
    return Comparison(app, revision, [desired], AppDiff(resources=[diff]), health,
                      resource_health={desired.key: health})


def test_the_same_inputs_give_the_same_fields_with_a_new_time() -> None:
    first = comparison()
    fields = status_of(first)
    again = dataclasses.replace(first)  # a new comparison of the same objects
    assert {**status_of(again), "comparedAt": 0} == {**fields, "comparedAt": 0}
    assert status_of(again) is not fields  # a new dict each time: callers may add to it


def test_a_change_of_anything_derived_from_gives_new_fields() -> None:
    base = status_of(comparison())
    assert status_of(comparison(revision="b" * 40))["revision"] == "b" * 40
    assert "rayproject/ray:2.53.0" in \
        status_of(comparison(image="rayproject/ray:2.53.0"))["images"]
    unhealthy = dataclasses.replace(comparison(), health=Health(HealthStatus.DEGRADED, "x"))
    assert status_of(unhealthy)["health"] == "Degraded"
    assert status_of(comparison())["resources"] == base["resources"]


def test_the_comparison_is_not_kept_alive() -> None:
    """A first comparison's diffs carry both normalized sides of every object: what is
    remembered to tell "unchanged" must not keep them (RSS at 10,000 RayClusters)."""
    first = comparison(revision="c" * 40)
    diff = weakref.ref(first.diff.resources[0])
    status_of(first)
    del first
    gc.collect()
    assert diff() is None
