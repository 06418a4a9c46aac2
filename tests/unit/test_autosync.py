"""The auto-sync / self-heal policy, branch by branch (pure: no clock, no cluster)."""

from __future__ import annotations

import itertools

import pytest

from gitops_ray.reconcile.autosync import (
    Action,
    AutoSyncSettings,
    Backoff,
    LastOperation,
    Observed,
    decide,
    operation_fields,
    source_key,
)
from gitops_ray.render.apps import Application, AppSource, Destination, SyncPolicy
from gitops_ray.types import ResourceKey

RC = ResourceKey("ray.io", "RayCluster", "ns", "ray")
CM = ResourceKey("", "ConfigMap", "ns", "old")
AUTO = SyncPolicy(automated=True)
HEAL = SyncPolicy(automated=True, self_heal=True)


def observed(status: str = "OutOfSync", revision: str = "a" * 40, *,
             out: frozenset[ResourceKey] = frozenset({RC}),
             extraneous: frozenset[ResourceKey] = frozenset(), desired: int = 1,
             deleting: frozenset[ResourceKey] = frozenset()) -> Observed:
    return Observed(revision, "spec", status, out, extraneous, desired, deleting=deleting)


def last(phase: str = "Succeeded", revision: str = "a" * 40, *, finished: float = 100.0,
         heals: int = 0, attempt: int = 1, spec: str = "spec") -> LastOperation:
    return LastOperation(revision, phase, finished, spec, heals, attempt)


def test_argo_self_heal_backoff_steps() -> None:
    steps = [Backoff(2, 3, 300).delay(n) for n in range(9)]
    assert steps == [0, 2, 6, 18, 54, 162, 300, 300, 300]


def test_backoff_never_overflows() -> None:
    assert Backoff(2, 3, 300).delay(10_000) == 300


def test_retry_backoff_matches_argo_defaults() -> None:
    assert [Backoff(5, 2, 180).delay(n) for n in range(1, 6)] == [5, 10, 20, 40, 80]


@pytest.mark.parametrize(("policy", "obs", "reason"), [
    (SyncPolicy(), observed(), "automated sync is off"),
    (AUTO, observed("Synced"), "sync status is Synced"),
    (AUTO, observed(out=frozenset({CM}), extraneous=frozenset({CM})), "only pruning"),
    (SyncPolicy(automated=True, prune=True, self_heal=True),
     observed(out=frozenset({CM}), extraneous=frozenset({CM}), deleting=frozenset({CM})),
     "finish deleting"),
])
def test_nothing_to_do(policy: SyncPolicy, obs: Observed, reason: str) -> None:
    decision = decide(policy, obs, None, now=0)
    assert decision.action is Action.NONE
    assert reason in decision.reason


def test_prune_only_drift_is_synced_when_prune_is_on() -> None:
    obs = observed(out=frozenset({CM}), extraneous=frozenset({CM}))
    decision = decide(SyncPolicy(automated=True, prune=True), obs, None, now=0)
    assert decision.action is Action.SYNC and decision.prune


def test_drift_next_to_a_deletion_is_still_synced() -> None:
    obs = observed(out=frozenset({RC, CM}), extraneous=frozenset({CM}),
                   deleting=frozenset({CM}))
    assert decide(SyncPolicy(automated=True, prune=True), obs, None, now=0).action \
        is Action.SYNC


def test_refuses_to_wipe_out_everything() -> None:
    policy = SyncPolicy(automated=True, prune=True)
    decision = decide(policy, observed(desired=0), None, now=0)
    assert decision.action is Action.BLOCKED
    allowed = SyncPolicy(automated=True, prune=True, allow_empty=True)
    assert decide(allowed, observed(desired=0), None, now=0).action is Action.SYNC


def test_new_revision_is_synced_in_full_and_resets_self_heal() -> None:
    decision = decide(HEAL, observed(revision="b" * 40), last(heals=4), now=101)
    assert decision.action is Action.SYNC
    assert decision.only is None and decision.trigger == "auto-sync"
    assert decision.self_heal_attempts == 0 and decision.attempt == 1
    assert not decision.prune


def test_changed_source_spec_counts_as_new_target() -> None:
    decision = decide(AUTO, observed(), last(spec="other"), now=101)
    assert decision.action is Action.SYNC


def test_once_per_revision_without_self_heal() -> None:
    decision = decide(AUTO, observed(), last(), now=1000)
    assert decision.action is Action.NONE
    assert "selfHeal is off" in decision.reason


def test_operation_without_source_key_counts_as_same_spec() -> None:
    assert decide(AUTO, observed(), last(spec=""), now=1000).action is Action.NONE


def test_first_self_heal_is_immediate_and_selective() -> None:
    decision = decide(HEAL, observed(), last(), now=100)
    assert decision.action is Action.SYNC
    assert decision.only == frozenset({RC}) and decision.trigger == "self-heal"
    assert decision.self_heal_attempts == 1


def test_self_heal_waits_out_the_backoff() -> None:
    decision = decide(HEAL, observed(), last(heals=2, finished=100), now=101)
    assert decision.action is Action.WAIT
    assert decision.wait == pytest.approx(5)  # step(2) = 6 s after the last operation
    later = decide(HEAL, observed(), last(heals=2, finished=100), now=106)
    assert later.action is Action.SYNC and later.self_heal_attempts == 3


def test_tug_of_war_gaps_grow_until_the_cap() -> None:
    """Simulate another controller reverting us right after each heal."""
    backoff = Backoff(2, 3, 300)
    settings = AutoSyncSettings(self_heal=backoff)
    now, op, heal_times = 0.0, last(finished=0.0), []
    while len(heal_times) < 8:
        decision = decide(HEAL, observed(), op, now=now, settings=settings)
        if decision.action is Action.WAIT:
            now += decision.wait
            continue
        assert decision.action is Action.SYNC
        heal_times.append(now)
        op = last(finished=now, heals=decision.self_heal_attempts)
    gaps = [b - a for a, b in itertools.pairwise(heal_times)]
    assert gaps == [2, 6, 18, 54, 162, 300, 300]


def test_failed_sync_is_retried_with_backoff_then_blocked() -> None:
    settings = AutoSyncSettings(retry=Backoff(5, 2, 180), retry_limit=2)
    first = decide(AUTO, observed(), last("Failed", finished=100), now=102,
                   settings=settings)
    assert first.action is Action.WAIT and first.wait == pytest.approx(3)
    retry = decide(AUTO, observed(), last("Failed", finished=100), now=105, settings=settings)
    assert retry.action is Action.SYNC and retry.attempt == 2 and retry.only is None
    second = decide(AUTO, observed(), last("Failed", finished=100, attempt=2), now=109,
                    settings=settings)
    assert second.action is Action.WAIT  # step(2) = 10 s
    blocked = decide(AUTO, observed(), last("Failed", attempt=3), now=10_000,
                     settings=settings)
    assert blocked.action is Action.BLOCKED
    assert "waiting for a new revision" in blocked.reason


def test_failed_sync_does_not_block_a_new_revision() -> None:
    decision = decide(AUTO, observed(revision="b" * 40), last("Failed", attempt=99), now=0)
    assert decision.action is Action.SYNC and decision.attempt == 1


def test_last_operation_round_trips_through_the_record() -> None:
    decision = decide(HEAL, observed(), last(heals=1, finished=0), now=50)
    fields = operation_fields(decision, observed(), "pod-1")
    status = {"operation": {"revision": "a" * 40, "phase": "Succeeded", "finishedAt": 50.0,
                            **fields}}
    parsed = LastOperation.from_status(status)
    assert parsed == LastOperation("a" * 40, "Succeeded", 50.0, "spec", 2, 1)
    assert fields["controller"] == "pod-1" and fields["trigger"] == "self-heal"
    assert LastOperation.from_status({}) is None


def test_source_key_depends_on_source_and_destination() -> None:
    app = Application("a", AppSource("https://x/r.git", "p"), Destination("ns"))
    moved = Application("a", AppSource("https://x/r.git", "p"), Destination("other"))
    assert source_key(app) == source_key(Application("a", AppSource("https://x/r.git", "p"),
                                                     Destination("ns")))
    assert source_key(app) != source_key(moved)


def test_source_key_includes_the_pod_shapes_an_app_depends_on() -> None:
    app = Application("a", AppSource("https://x/r.git", "p"), Destination("ns"))
    assert source_key(app, "") == source_key(app)  # apps that use no in-cluster shapes
    assert source_key(app, "v1") not in (source_key(app), source_key(app, "v2"))


def test_a_dry_run_is_not_the_last_operation_the_policy_looks_at() -> None:
    real = {"revision": "a" * 40, "phase": "Succeeded", "finishedAt": 10.0}
    dry = {"revision": "b" * 40, "phase": "Succeeded", "finishedAt": 20.0, "dryRun": True}
    parsed = LastOperation.from_status({"operation": dry, "history": [dry, real]})
    assert parsed is not None and parsed.revision == "a" * 40
    assert LastOperation.from_status({"operation": dry, "history": [dry]}) is None
