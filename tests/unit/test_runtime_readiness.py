"""The readiness model: named checks from request statuses and refresh outcomes (pure)."""

from __future__ import annotations

from gitops_ray.errors import DiffError
from gitops_ray.kube import Forbidden, NotFound, Unauthorized
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.readiness import (
    ApiHealth,
    Check,
    RefreshOutcomes,
    denied,
    evaluate,
    failing,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ready_now(api: ApiHealth, refreshes: RefreshOutcomes | None = None, *,
              leader_election: bool = True) -> dict[str, str]:
    return failing(evaluate(apps_loaded=True, unsynced=[], api=api,
                            refreshes=refreshes or RefreshOutcomes(),
                            leader_election=leader_election))


def test_every_check_passes_on_a_healthy_replica() -> None:
    results = evaluate(apps_loaded=True, unsynced=[], api=ApiHealth(),
                       refreshes=RefreshOutcomes(), leader_election=True)
    assert [r.check for r in results] == list(Check)
    assert failing(results) == {}


def test_loading_and_unsynced_watches_are_named() -> None:
    results = evaluate(apps_loaded=False, unsynced=["ray.io/v1/RayCluster"], api=ApiHealth(),
                       refreshes=RefreshOutcomes(), leader_election=False)
    failed = failing(results)
    assert set(failed) == {"apps_loaded", "caches_synced"}
    assert "ray.io/v1/RayCluster" in failed["caches_synced"]


def test_unreachable_api_fails_until_it_answers_again() -> None:
    clock = Clock()
    api = ApiHealth(clock)
    api.observe("watch", "rayclusters", 0, 0.1)
    clock.now += 12
    failed = ready_now(api, leader_election=False)
    assert set(failed) == {"api_reachable"}
    assert "12s" in failed["api_reachable"] and "no connection" in failed["api_reachable"]
    assert api.down
    api.observe("probe", "", 200, 0.01)
    assert ready_now(api) == {} and not api.down


def test_any_answer_means_reachable_but_5xx_does_not() -> None:
    api = ApiHealth()
    api.observe("get", "configmaps", 503, 0.1)
    assert "api_reachable" in ready_now(api, leader_election=False)
    api.observe("get", "configmaps", 404, 0.1)
    assert ready_now(api, leader_election=False) == {}
    api.observe("discovery", "", 503, 0.1)  # a broken aggregated API is not our API server
    assert ready_now(api, leader_election=False) == {}


def test_rejected_credentials_fail_until_a_request_succeeds() -> None:
    api = ApiHealth()
    api.observe("list", "rayclusters", 401, 0.1)
    assert set(ready_now(api, leader_election=False)) == {"api_authorized"}
    api.observe("get", "configmaps", 404, 0.1)  # not a success: still rejected
    assert "api_authorized" in ready_now(api, leader_election=False)
    api.observe("get", "configmaps", 200, 0.1)
    assert ready_now(api, leader_election=False) == {}


def test_lease_failures_fail_leader_election_only_when_it_is_on() -> None:
    api = ApiHealth()
    api.observe("get", "leases", 403, 0.1)
    api.observe("get", "configmaps", 200, 0.1)
    assert "HTTP 403" in ready_now(api)["leader_election"]
    assert ready_now(api, leader_election=False) == {}
    api.observe("get", "leases", 404, 0.1)  # no lease yet: the loop works, it will create one
    assert ready_now(api) == {}
    api.observe("update", "leases", 409, 0.1)  # lost a race: also fine
    assert ready_now(api) == {}


def test_not_ready_only_when_every_app_was_denied() -> None:
    refreshes = RefreshOutcomes()
    assert ready_now(ApiHealth(), refreshes) == {}  # no refresh yet: nothing to say
    refreshes.observe("a", DiffError("dry run failed"))
    refreshes.observe("b", Forbidden("no"))
    assert ready_now(ApiHealth(), refreshes) == {}  # a's error is not about us
    refreshes.observe("a", Unauthorized("expired"))
    assert "every app (2)" in ready_now(ApiHealth(), refreshes)["api_authorized"]
    refreshes.observe("a", None)
    assert ready_now(ApiHealth(), refreshes) == {}
    refreshes.observe("a", Forbidden("no"))
    refreshes.forget("b")
    refreshes.forget("a")
    assert ready_now(ApiHealth(), refreshes) == {}


def test_denied_follows_the_cause_chain() -> None:
    try:
        try:
            raise Forbidden("rayclusters is forbidden")
        except Forbidden as e:
            raise DiffError("server-side dry run failed") from e
    except DiffError as wrapped:
        assert denied(wrapped)
    assert not denied(NotFound("gone")) and not denied(None)


def test_ready_gauge_per_check() -> None:
    metrics = Metrics()
    metrics.readiness.source = lambda: [("api_reachable", False), ("apps_loaded", True)]
    text = metrics.exposition().decode()
    assert 'gitops_ray_ready{check="api_reachable"} 0.0' in text
    assert 'gitops_ray_ready{check="apps_loaded"} 1.0' in text
