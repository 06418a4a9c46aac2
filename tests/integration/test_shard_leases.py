"""ShardCoordinator step by step against the real API server, with a clock per replica.

Each replica's :meth:`~gitops_ray.runtime.shards.ShardCoordinator.step` is called by the
test (no threads) and its monotonic clock is a number the test moves, so "replica a was
paused for 4 s" is exact: a hand-over waits for a running write (within renewDeadline),
a dead member's shards are taken once its Leases expired by the survivor's clock (not
before), a paused replica's shard fences are closed before it even renews, and the dead
member's Lease is deleted by the janitor (the expired-for-long path is in
tests/integration/test_sharding.py, where a SIGKILLed replica's Lease goes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.kube.fence import NO_TERM
from gitops_ray.kube.leader import LEASE_API, LeaseSettings
from gitops_ray.runtime.shards import (
    EXPIRY_MARGIN,
    SILENT_AFTER,
    STALE_LEASES,
    ShardCoordinator,
    assignment,
    owner,
    shard_of,
)
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.process import service_account_kubeconfig
from tests.samples import role_binding

SHARDS = 8
DURATION, RENEW, RETRY = 3.0, 2.0, 0.5


@dataclass
class Replica:
    identity: str
    kube: Kube
    namespace: str
    now: float = 1000.0
    retry: float = RETRY
    busy: set[int] = field(default_factory=set)
    gained: list[frozenset[int]] = field(default_factory=list)
    lost: list[frozenset[int]] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)
    heir: list[frozenset[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        lease = LeaseSettings("shards", self.namespace, self.identity, DURATION, RENEW,
                              self.retry)
        self.coordinator = ShardCoordinator(
            self.kube, lease, shards=SHARDS, advertise_url=f"http://{self.identity}:9292/",
            adopt=lambda s: None, on_gained=self.gained.append, on_lost=self.lost.append,
            busy=lambda s: s in self.busy, clock=lambda: self.now,
            on_silent=self.silent.append, on_heir=self.heir.append)

    def step(self, advance: float = 0.0) -> frozenset[int]:
        self.now += advance
        self.coordinator.step()
        return self.coordinator.held()


def app_in(shard: int) -> str:
    return next(f"app-{i}" for i in range(1000) if shard_of(f"app-{i}", SHARDS) == shard)


def test_a_replica_is_told_of_each_shard_it_becomes_the_successor_of(
        kube: Kube, namespace: str) -> None:
    """So it prepares their apps on standby even when no push or event asks (issue 35)."""
    a, b = Replica("a", kube, namespace), Replica("b", kube, namespace)
    a.step()
    assert a.heir == []  # alone: nobody to take over from
    b.step()
    assert b.heir == [frozenset(range(SHARDS))]  # a holds every shard; b is next
    wanted = {s for s, m in assignment(SHARDS, ["a", "b"]).items() if m == "b"}
    eventually(lambda: a.step(RETRY) and b.step(RETRY) == frozenset(wanted),
               message="b holds its shards")
    a.step(RETRY)  # sees b hold them
    assert set().union(*a.heir) == wanted  # a would take b's shards back
    told = len(a.heir), len(b.heir)
    a.step(RETRY), b.step(RETRY)
    assert (len(a.heir), len(b.heir)) == told  # nothing changed: nothing told again


def test_hand_over_takeover_pause_and_janitor(kube: Kube, namespace: str) -> None:
    a, b = Replica("a", kube, namespace), Replica("b", kube, namespace)
    assert a.step() == frozenset(range(SHARDS))  # alone: every shard
    b.step()
    assert b.coordinator.held() == frozenset()  # a holds them, not expired

    # b is seen: a hands b's shards over, but keeps one with a write running.
    wanted = {s for s, m in assignment(SHARDS, ["a", "b"]).items() if m == "b"}
    busy = min(wanted)
    a.busy.add(busy)
    assert a.step(RETRY) == frozenset(range(SHARDS)) - (wanted - {busy})
    assert not a.coordinator.owns(app_in(busy))  # no new work on it ...
    with a.coordinator.scope(app_in(busy)) as valid:
        assert valid  # ... but the running write may finish in its term
    assert b.step(RETRY) == frozenset(wanted - {busy})
    a.step(RETRY)
    assert busy in a.coordinator.held()  # still busy, within renewDeadline: kept
    a.busy.clear()
    a.step(RETRY)
    assert b.step(RETRY) == frozenset(wanted)
    assert a.coordinator.held() == frozenset(range(SHARDS)) - wanted
    assert set().union(*a.lost) == wanted

    # a stops (killed or paused): b takes its shards once they expired by b's clock.
    for _ in range(4):
        assert b.step(RETRY) == frozenset(wanted)  # 2 s: a's Leases not expired yet
    for _ in range(6):
        b.step(RETRY)
    assert b.coordinator.held() == frozenset(range(SHARDS))
    assert b.coordinator.view.members.keys() == {"b"}

    # a resumes: its shard fences closed by its own clock before it renews anything.
    a.now += 4.0
    assert all(e.fence.term() == NO_TERM for e in a.coordinator.electors)
    with a.coordinator.scope(app_in(min(set(range(SHARDS)) - wanted))) as valid:
        assert not valid
    a.step()
    assert set().union(*a.lost) == set(range(SHARDS))

    # a gone for good (released its membership): the janitor, b, deletes its Lease.
    a_member = a.coordinator.member.settings.name
    a.coordinator.member.release()  # no further renewals from a
    b.step(RETRY)
    assert kube.get(LEASE_API, "Lease", name=a_member, namespace=namespace) is None
    b.step(STALE_LEASES * DURATION)  # never its own
    assert kube.get(LEASE_API, "Lease", name=b.coordinator.member.settings.name,
                    namespace=namespace) is not None


def test_a_shard_renewed_too_late_and_taken_again_is_lost_and_gained(
        kube: Kube, namespace: str) -> None:
    """A replica paused past renewDeadline but not past the lease duration takes its own
    shards again in one step, under new terms. Work started under the old terms was
    refused, so each shard is reported lost and gained again (its apps are queued)."""
    a = Replica("a", kube, namespace)
    assert a.step() == frozenset(range(SHARDS))
    assert a.gained == [frozenset(range(SHARDS))]
    terms = [e.term for e in a.coordinator.electors]
    with a.coordinator.scope(app_in(0)) as valid:
        assert valid
    a.step(RETRY)  # renewed in time: nothing reported
    assert (len(a.gained), a.lost) == (1, [])
    assert a.step(RENEW + 0.5) == frozenset(range(SHARDS))  # late, yet nobody took them
    assert [e.term for e in a.coordinator.electors] == [t + 1 for t in terms]
    assert a.lost == [frozenset(range(SHARDS))]
    assert a.gained[1:] == [frozenset(range(SHARDS))]
    assert a.coordinator.owns(app_in(0))


def test_a_dead_members_shards_go_to_their_successors_the_moment_it_expires(
        kube: Kube, namespace: str) -> None:
    """Each of the dead replica's apps has one successor among the survivors (its
    rendezvous owner without the dead one), which prepares it on standby. When the
    replica stops renewing, each survivor steps when it plans to
    (:meth:`ShardCoordinator.next_step_in`) and takes its share of the shards the moment
    their Leases expire by its clock, not at its next retryPeriod (0.4 s here, which the
    3 s duration is not a multiple of)."""
    replicas = [Replica(x, kube, namespace, retry=0.4) for x in ("r1", "r2", "r3")]
    names = [r.identity for r in replicas]
    for _ in range(3):  # all see all; each takes what it wins as the others release it
        for r in replicas:
            r.step(0.4)
    want = assignment(SHARDS, names)
    for r in replicas:
        assert r.coordinator.held() == {s for s, m in want.items() if m == r.identity}
    dead = max(replicas, key=lambda r: len(r.coordinator.held()))
    survivors = [r for r in replicas if r is not dead]
    left = [r.identity for r in survivors]
    of_dead = set(dead.coordinator.held())
    for shard in of_dead:
        app = app_in(shard)
        assert [r.identity for r in survivors if r.coordinator.successor(app)] == \
            [owner(shard, left)]
        assert not dead.coordinator.successor(app)  # its own app

    dead.step(0.4)  # its last renewal, seen by the survivors in their next step
    seen, took = {}, {}
    for r in survivors:
        r.step(0.4)
        seen[r.identity] = r.now
    while len(took) < len(survivors):  # each steps when it plans to, the earlier first
        r = min(survivors, key=lambda r: r.now - seen[r.identity] + r.coordinator.next_step_in())
        assert r.now - seen[r.identity] < DURATION + 0.4, f"{r.identity} never took over"
        r.step(r.coordinator.next_step_in())
        mine = {s for s in of_dead if owner(s, left) == r.identity}
        if mine <= r.coordinator.held():
            took.setdefault(r.identity, r.now - seen[r.identity])
    assert took == pytest.approx({r: DURATION + EXPIRY_MARGIN for r in left})
    for r in survivors:
        assert r.coordinator.held() == {s for s, m in assignment(SHARDS, left).items()
                                        if m == r.identity}


def test_a_renewal_the_watch_saw_first_times_the_expiry(kube: Kube, namespace: str) -> None:
    """The step LISTs every retryPeriod, so it would see the dead replica's last renewal up
    to that late; the group's Lease watch sees it as it is written. The survivor takes the
    dead one's shards a lease duration after the watch's sighting, not after its next LIST
    (0.4 s later here, its clock held still until the watch had seen every Lease)."""
    dead, survivor, of_dead = two_replicas(kube, namespace)
    survivor.coordinator.start_watching()
    try:
        dead.step(0.4)  # its last renewal, member and shard Leases
        listed, _ = kube.list(LEASE_API, "Lease", namespace)
        renewed = {str(o["metadata"]["name"]): o for o in listed
                   if o["spec"].get("holderIdentity") == dead.identity}
        assert len(renewed) == len(of_dead) + 1
        seen = survivor.now
        eventually(lambda: all(survivor.coordinator.first_seen(n, o) == seen
                               for n, o in renewed.items()), message="watch saw the renewal")
        survivor.step(0.4)
        assert taken_after(survivor, of_dead, seen) == pytest.approx(DURATION + EXPIRY_MARGIN)
    finally:
        survivor.coordinator.stop_watching()


def test_a_step_is_planned_when_a_dead_members_shard_lease_expires(
        kube: Kube, namespace: str) -> None:
    """The dead replica renewed its membership, then (a LIST later, as seen by the
    survivor) its shard Leases: those expire 0.3 s after its membership. The survivor's
    step at the membership's expiry cannot take them yet, and the next is planned for
    their expiry, not a retryPeriod (0.4 s) later."""
    dead, survivor, of_dead = two_replicas(kube, namespace)
    dead.now += 0.4
    assert dead.coordinator.member.keep()
    survivor.step(0.4)
    seen = survivor.now
    assert all(dead.coordinator.electors[s].keep() for s in of_dead)
    survivor.step(0.3)
    assert taken_after(survivor, of_dead, seen) == pytest.approx(0.3 + DURATION + EXPIRY_MARGIN)


def test_a_member_not_seen_renewing_for_two_retry_periods_is_silent_once(
        kube: Kube, namespace: str) -> None:
    """A member renews every retryPeriod; one not seen renewing for two of them is most
    likely dead, though its Leases are still its own. The survivor says so once, at a
    step planned for that moment (not its next retryPeriod), holds nothing more for it,
    and forgets it once the member renews again."""
    dead, survivor, of_dead = two_replicas(kube, namespace)
    dead.step(0.4)  # its last renewal ...
    survivor.step(0.4)  # ... seen here
    seen, held = survivor.now, survivor.coordinator.held()
    while not survivor.silent:
        assert survivor.now - seen < DURATION, "never silent"
        survivor.step(survivor.coordinator.next_step_in())
    assert survivor.silent == ["r1"] and survivor.coordinator.silent("r1")
    assert survivor.now - seen == pytest.approx(SILENT_AFTER * 0.4 + EXPIRY_MARGIN)
    assert survivor.coordinator.held() == held  # its Leases have not expired
    survivor.step(0.4)
    assert survivor.silent == ["r1"]  # said once
    assert dead.step(0.4) == of_dead  # back (it was only slow): renewed in time
    survivor.step(0.4)
    assert not survivor.coordinator.silent("r1") and not survivor.coordinator.silent("r2")


def two_replicas(kube: Kube, namespace: str) -> tuple[Replica, Replica, frozenset[int]]:
    """r1 (to die) and r2, each holding its share of the shards; r1's shards."""
    dead, survivor = Replica("r1", kube, namespace, retry=0.4), \
        Replica("r2", kube, namespace, retry=0.4)
    for _ in range(3):
        for r in (dead, survivor):
            r.step(0.4)
    of_dead = dead.coordinator.held()
    assert of_dead and survivor.coordinator.held() == frozenset(range(SHARDS)) - of_dead
    return dead, survivor, of_dead


def taken_after(survivor: Replica, shards: frozenset[int], seen: float) -> float:
    """Step ``survivor`` when it plans to until it holds ``shards``; how long after ``seen``."""
    while not shards <= survivor.coordinator.held():
        assert survivor.now - seen < DURATION + 1.0, "never took over"
        survivor.step(survivor.coordinator.next_step_in())
    return survivor.now - seen


def lease_role(name: str, namespace: str, verbs: list[str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "verbs": verbs}]}


def test_when_the_leases_cannot_be_listed_the_held_ones_are_still_renewed(
        kube: Kube, namespace: str, control_plane: LocalControlPlane, tmp_path: Path) -> None:
    """The step's LIST is refused (RBAC, here): the replica renews every shard it holds,
    each on its own (:meth:`ShardCoordinator._renew_blind`), and takes none."""
    verbs = ["get", "create", "update", "delete"]
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "shards", "namespace": namespace}}, field_manager="tests")
    kube.create(lease_role("shards", namespace, [*verbs, "list"]), field_manager="tests")
    kube.create(role_binding("shards", namespace), field_manager="tests")
    config = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                        name="shards", path=tmp_path / "kubeconfig")
    a = Replica("a", Kube.connect(str(config)), namespace)
    while a.coordinator.held() != frozenset(range(SHARDS)):  # the Role may lag a moment
        a.step(RETRY)
    kube.apply(lease_role("shards", namespace, verbs), field_manager="tests", force=True)

    def renewals() -> dict[str, str]:
        listed, _ = kube.list(LEASE_API, "Lease", namespace)
        return {str(o["metadata"]["name"]): str(o["spec"].get("renewTime"))
                for o in listed}

    while a.coordinator.last_error is None:  # until the API server refuses the LIST
        a.step(RETRY)
    before = renewals()
    a.step(RETRY)
    assert a.coordinator.last_error is not None
    assert a.coordinator.held() == frozenset(range(SHARDS))
    after = renewals()
    assert after.keys() == before.keys() and len(after) == SHARDS + 1  # + its membership
    assert all(after[n] != before[n] for n in after), "every held Lease renewed"
    assert a.lost == []
