"""gitops_ray.health.aggregate: app health is the worst resource health, with Argo CD's
skipping rules (controller/health.go)."""

from __future__ import annotations

from itertools import permutations

import pytest

from gitops_ray.health import Health, HealthStatus, aggregate

H, S, P, M, D, U = HealthStatus
MISSING = Health(M, "Resource does not exist in the cluster")


def test_no_resources_is_healthy() -> None:
    assert aggregate([]) == Health(H)


def test_healthy_app_has_no_message() -> None:
    assert aggregate([Health(H, "RayCluster is ready"), Health(H)]) == Health(H)


@pytest.mark.parametrize(("statuses", "worst"), [
    ([H, S], S), ([S, P], P), ([P, D], D), ([D, U], U), ([H, S, P, D, U], U),
])
def test_worst_status_wins(statuses: list[HealthStatus], worst: HealthStatus) -> None:
    for order in permutations(statuses):
        assert aggregate(Health(s, s.value) for s in order) == Health(worst, worst.value)


def test_resources_without_a_check_do_not_count() -> None:
    assert aggregate([None, Health(P, "rolling out"), None]) == Health(P, "rolling out")
    assert aggregate([None, None]) == Health(H)


def test_missing_does_not_count_while_something_is_live() -> None:
    assert aggregate([MISSING, Health(H)]) == Health(H)
    assert aggregate([MISSING, Health(P, "waiting")]) == Health(P, "waiting")


def test_a_live_object_without_a_check_is_still_live() -> None:
    assert aggregate([MISSING, None]) == Health(H)


def test_nothing_live_is_missing() -> None:
    assert aggregate([MISSING]) == Health(M, "The resource is missing")
    assert aggregate([MISSING, MISSING, MISSING]) == Health(M, "All 3 resources are missing")


def test_message_quotes_the_worst_resources() -> None:
    healths = [Health(D, "head pod is not ready"), Health(P, "rolling out"),
               Health(D, "quota exceeded"), Health(D, "head pod is not ready"), Health(D)]
    assert aggregate(healths) == Health(D, "head pod is not ready; quota exceeded")


def test_message_is_capped() -> None:
    healths = [Health(P, f"waiting for {n}") for n in "abcde"]
    assert aggregate(healths) == Health(
        P, "waiting for a; waiting for b; waiting for c; and 2 more")


def test_accepts_any_iterable_once() -> None:
    assert aggregate(h for h in [Health(S, "paused"), MISSING]) == Health(S, "paused")
