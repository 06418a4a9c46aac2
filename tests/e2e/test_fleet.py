"""A fleet end to end: three clusters, three sharded replicas, one killed mid-sync.

Three real control planes (two reached through Argo CD cluster Secrets, bearer token + CA
data), three ``gitops-ray run`` processes splitting the apps by shard Leases. Every
RayCluster lands in the cluster its app's ``destination.name`` names, and nowhere else;
the replica that received a push is SIGKILLed while it syncs; the survivors take its
shards when their Leases expire and apply the pushed change; and no app was synced by two
replicas at overlapping times (their logs). The same harness at 3 x 3,000 RayClusters is
``bench/fleet.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fleet import CLUSTERS, Applied, Fleet, FleetWorkload, fleet_environment, overlaps
from bench.fleet import start_replicas as start
from tests.harness import eventually

FLEET = FleetWorkload(per_cluster=6, apps=2)
SHARDS = 8
LEASE = ("4s", "3s", "500ms")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with fleet_environment(FLEET, tmp_path) as env:
        yield env


def test_three_clusters_three_replicas_one_killed_mid_sync(fleet: Fleet) -> None:
    start(fleet, 3, SHARDS, LEASE)
    eventually(lambda: fleet.count_rayclusters() == [FLEET.per_cluster] * len(CLUSTERS), 300,
               "every RayCluster in the cluster its app names")
    for kube in fleet.kubes:  # each app's namespace exists only in its own cluster
        names = {n["metadata"]["name"] for n in kube.list("v1", "Namespace")[0]}
        assert sum(name.startswith("ray-team-") for name in names) == FLEET.apps

    value = f"pushed-{time.time_ns()}"
    wanted = {}
    for cluster in range(len(CLUSTERS)):
        wl = FLEET.workload(cluster)
        for app in range(FLEET.apps):
            index = wl.members(app).start
            fleet.repo.change(cluster, index, value)
            wanted[(cluster, wl.namespace(app), wl.cluster_name(index))] = value
    applied = Applied(fleet, wanted)
    victim = fleet.replicas[0]
    log = next(iter(sorted(victim.workdir.glob("controller-*.log"))))
    syncs = log.read_text().count('"sync_started"')
    victim.push_webhook(fleet.repo.url, fleet.repo.push("one RayCluster of every app"))
    eventually(lambda: log.read_text().count('"sync_started"') > syncs, 120,
               "the pushed replica syncing")
    killed_at = time.time()
    victim.kill()
    try:
        assert applied.wait(300), f"applied: {sorted(applied.seen)} of {sorted(wanted)}"
    finally:
        applied.stop()
    fleet.killed[victim.identity] = killed_at
    assert overlaps(fleet, fleet.killed)["overlapping_syncs"] == 0
