"""The pure half of sharding: which shard an app is in, who should own a shard."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.kube.errors import LeaseExpired
from gitops_ray.kube.fence import NO_TERM, WriteFence
from gitops_ray.runtime.shards import assignment, lease_name, owner, shard_of
from gitops_ray.settings import load_settings

SHARDS = 32


def test_the_shard_of_an_app_is_the_same_in_every_process() -> None:
    here = [shard_of(f"app-{i}", SHARDS) for i in range(50)]
    code = ("from gitops_ray.runtime.shards import shard_of; "
            f"print([shard_of(f'app-{{i}}', {SHARDS}) for i in range(50)])")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "12345"}).stdout
    assert str(here) == there.strip()
    assert all(0 <= s < SHARDS for s in here)


def test_apps_spread_over_the_shards() -> None:
    counts = Counter(shard_of(f"team-{i}/raycluster", SHARDS) for i in range(3200))
    assert len(counts) == SHARDS
    assert max(counts.values()) < 2 * 3200 / SHARDS


def test_every_shard_has_exactly_one_owner_and_nobody_owns_without_members() -> None:
    members = ["a", "b", "c"]
    owners = assignment(SHARDS, members)
    assert set(owners) == set(range(SHARDS))
    assert set(owners.values()) == set(members)
    assert assignment(SHARDS, []) == {} and owner(3, []) is None


def test_the_owner_does_not_depend_on_the_order_of_the_members() -> None:
    assert assignment(SHARDS, ["a", "b", "c"]) == assignment(SHARDS, ["c", "a", "b"])


@pytest.mark.parametrize("replicas", [1, 2, 3, 5, 8])
def test_adding_a_replica_moves_only_the_shards_it_wins(replicas: int) -> None:
    members = [f"pod-{i}" for i in range(replicas)]
    before = assignment(SHARDS, members)
    after = assignment(SHARDS, [*members, "new"])
    moved = {s for s in before if before[s] != after[s]}
    assert all(after[s] == "new" for s in moved)  # nothing moves between old members
    assert len(moved) <= math.ceil(SHARDS / (replicas + 1)) * 2


def test_removing_a_replica_moves_only_its_shards() -> None:
    members = ["a", "b", "c", "d"]
    before = assignment(SHARDS, members)
    after = assignment(SHARDS, ["a", "b", "d"])
    assert {s for s in before if before[s] != after[s]} == \
        {s for s, m in before.items() if m == "c"}


def test_lease_names_are_valid_and_distinct() -> None:
    assert lease_name("gitops-ray", "shard", "7") == "gitops-ray-shard-7"
    a = lease_name("gitops-ray", "member", "host_1a2b")
    b = lease_name("gitops-ray", "member", "host-1a2b")
    assert a != b and all((c.isalnum() and c.islower()) or c.isdigit() or c == "-" for c in a)


def test_a_write_is_checked_against_the_fence_its_scope_captured() -> None:
    now = [100.0]
    client, shard_a, shard_b = (WriteFence(clock=lambda: now[0]) for _ in "abc")
    shard_a.grant(1, 110.0)
    with pytest.raises(LeaseExpired):  # the client's fence is never granted with sharding
        client.check("PATCH /x")
    with shard_a.scope() as valid:
        assert valid
        client.check("PATCH /x")  # shard a's term holds
    with shard_b.scope() as valid:
        assert not valid
        with pytest.raises(LeaseExpired):
            client.check("PATCH /y")  # shard b is not held: losing b stops only b
    with shard_a.scope():
        shard_a.revoke()
        shard_a.grant(2, 120.0)  # lost and taken again: a new term
        with pytest.raises(LeaseExpired):
            client.check("PATCH /x")
    assert shard_b.term() == NO_TERM


def test_sharding_settings_are_bounded() -> None:
    assert load_settings(None, env={}, flags={"sharding.enabled": "true"}).sharding.shards == 16
    with pytest.raises(ConfigError, match=r"sharding\.shards"):
        load_settings(None, env={}, flags={"sharding.shards": "5000"})
