"""Fleet figures: three clusters, three sharded controller replicas, one replica killed.

Why black-box, as :mod:`bench.controller`: the figures must be what a platform team sees.
Three real local control planes stand in for three clusters. The first one (``c0``) is
also the controller's own cluster: it holds the app records, the shard Leases and the
Argo CD cluster Secrets of the other two (``c1``, ``c2``: bearer token + CA, as Argo CD
writes them). The config repo holds ``apps`` Applications per cluster, each with
``destination.name`` naming its cluster, and ``per_cluster`` RayClusters per cluster
(the same generator as the single-cluster figures, :mod:`bench.workload`).

Figures, from one run:

* **fleet cold sync**: three ``gitops-ray run`` replicas with sharding start against
  three empty clusters; the time until every RayCluster exists in its cluster, and the
  API requests each API server counted (``apiserver_request_total``) per new object.
* **failover**: once everything is synced and idle, the replica holding the most shards
  is SIGKILLed; right away one RayCluster of every app it owned is changed in git and the
  push webhook goes to a surviving replica. The figure is the time from the kill until
  every one of those changes is applied in its cluster (a watch per cluster), next to
  the lease duration: the survivors must wait for the dead replica's shard Leases to
  expire before they may write.
* **overlap**: from the replicas' own logs (one JSON line per reconcile with the app, the
  replica and the moments it started and ended), the apps reconciled by two replicas at
  overlapping times: the target is zero.

Run ``python -m bench.fleet --per-cluster 3000 --apps 50`` (the issue's size; about
half an hour on 2 cores) or ``--per-cluster 100 --apps 5`` for a smoke run.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.controller import (
    CONTROL_NAMESPACE,
    ApiServerRequests,
    ConfigRepo,
    Controller,
    _py_spy,
    _stop,
    _top_frames,
    delta,
    head_env,
    memory_kib,
    request_summary,
)
from bench.machine import code_revision, machine_info
from bench.sharding import intervals, overlapping
from bench.workload import (
    Workload,
    application,
    cluster_path,
    dump_yaml,
    one_line_change,
    raycluster,
)

Manifest = dict[str, Any]
CLUSTERS = ("c0", "c1", "c2")
IN_CLUSTER = "in-cluster"
RESULTS = Path(__file__).resolve().parent / "results"
LEASE_DURATION = 15.0
LEASE_NAME = "gitops-ray"  # leaderElection.leaseName


# -- the workload of one cluster ----------------------------------------------------------


@dataclass(frozen=True)
class FleetWorkload:
    """``per_cluster`` RayClusters in ``apps`` apps in each of :data:`CLUSTERS`."""

    per_cluster: int
    apps: int

    def workload(self, cluster: int) -> Workload:
        return Workload(clusters=self.per_cluster, apps=self.apps, seed=cluster)

    def app_name(self, cluster: int, app: int) -> str:
        return f"{CLUSTERS[cluster]}-{self.workload(cluster).app_name(app)}"

    def destination(self, cluster: int) -> str:
        return IN_CLUSTER if cluster == 0 else CLUSTERS[cluster]

    def files(self, repo_url: str) -> Iterator[tuple[str, str]]:
        for c in range(len(CLUSTERS)):
            wl = self.workload(c)
            for app in range(wl.apps):
                doc = application(wl, app, repo_url=repo_url)
                doc["metadata"]["name"] = self.app_name(c, app)
                doc["spec"]["source"]["path"] = f"{CLUSTERS[c]}/clusters/{wl.app_name(app)}"
                doc["spec"]["destination"] = {"name": self.destination(c),
                                              "namespace": wl.namespace(app)}
                yield f"apps/{self.app_name(c, app)}.yaml", dump_yaml(doc)
            for index in range(wl.clusters):
                yield (f"{CLUSTERS[c]}/{cluster_path(wl, index)}",
                       dump_yaml(raycluster(wl, index, tracked=False)))


class FleetRepo(ConfigRepo):
    """The config repo of :class:`bench.controller.ConfigRepo`, with the fleet's files."""

    def __init__(self, root: Path, fleet: FleetWorkload) -> None:
        super().__init__(root, fleet.workload(0))
        self.fleet = fleet

    def populate(self) -> str:
        for rel, text in self.fleet.files(self.url):
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return self.push("the fleet")

    def change(self, cluster: int, index: int, value: str) -> None:
        one_line_change(self.fleet.workload(cluster), self.work / CLUSTERS[cluster], index,
                        value)

    def push(self, message: str) -> str:
        return self.commit_and_push(message)


# -- clusters ------------------------------------------------------------------------------


def cluster_secret(name: str, cp: Any) -> Manifest:
    """An Argo CD cluster Secret for control plane ``cp`` (bearer token + CA)."""
    ca = base64.b64encode((cp.workdir / "ca.crt").read_bytes()).decode()
    config = {"bearerToken": cp.token, "tlsClientConfig": {"insecure": False, "caData": ca}}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"cluster-{name}", "namespace": CONTROL_NAMESPACE,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "type": "Opaque",
            "stringData": {"name": name, "server": cp.url, "config": json.dumps(config)}}


@dataclass
class Fleet:
    """Three control planes, their clients and request counters, and the config repo."""

    fleet: FleetWorkload
    cps: list[Any]
    kubes: list[Any]
    apis: list[ApiServerRequests]
    repo: FleetRepo
    workdir: Path
    replicas: list[Replica] = field(default_factory=list)
    killed: dict[str, float] = field(default_factory=dict)  # identity -> wall time of kill

    def count_rayclusters(self) -> list[int]:
        """RayClusters per cluster, from a one-item LIST (``remainingItemCount`` + 1)."""
        counts = []
        for kube in self.kubes:
            page = kube.call("GET", "/apis/ray.io/v1/rayclusters", query={"limit": 1})
            meta = page.get("metadata") or {}
            counts.append(len(page.get("items") or []) + int(meta.get("remainingItemCount")
                                                                or 0))
        return counts

    def snapshot(self) -> list[Any]:
        return [api.snapshot() for api in self.apis]


@contextlib.contextmanager
def fleet_environment(fleet: FleetWorkload, workdir: Path) -> Iterator[Fleet]:
    from gitops_ray.kube import Kube
    from localcluster import LocalControlPlane

    with contextlib.ExitStack() as stack:
        cps = [stack.enter_context(LocalControlPlane()) for _ in CLUSTERS]
        kubes = [Kube.connect(str(cp.kubeconfig)) for cp in cps]
        home = kubes[0]
        home.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": CONTROL_NAMESPACE}}, field_manager="bench")
        for name, cp in zip(CLUSTERS[1:], cps[1:], strict=True):
            home.create(cluster_secret(name, cp), field_manager="bench")
        repo = FleetRepo(workdir / "repo", fleet)
        repo.populate()
        apis = [ApiServerRequests(cp.url, cp.token, cp.workdir / "ca.crt") for cp in cps]
        env = Fleet(fleet, cps, kubes, apis, repo, workdir)
        try:
            yield env
        finally:
            for replica in env.replicas:
                replica.stop()


# -- the replicas --------------------------------------------------------------------------


@dataclass
class Replica(Controller):
    """``gitops-ray run`` with leader election and sharding on, one identity each."""

    identity: str = ""
    shards: int = 16
    lease: tuple[str, str, str] = ("15s", "10s", "2s")  # duration, renew deadline, retry

    def argv(self) -> list[str]:
        argv = super().argv()
        argv.remove("--no-leader-elect")
        duration, deadline, retry = self.lease
        return [*argv, "--sharding", "--shards", str(self.shards),
                "--leader-election-identity", self.identity,
                "--leader-election-lease-duration", duration,
                "--leader-election-renew-deadline", deadline,
                "--leader-election-retry-period", retry,
                "--webhook-advertise-url",
                f"http://127.0.0.1:{self.ports['webhook']}/webhook"]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def start_replicas(env: Fleet, count: int, shards: int,
                   lease: tuple[str, str, str] = ("15s", "10s", "2s")) -> None:
    for n in range(count):
        replica = Replica(env.cps[0].kubeconfig, env.repo.url, env.workdir / f"replica-{n}",
                          interval="0", identity=f"replica-{n}", shards=shards, lease=lease)
        replica.workdir.mkdir(parents=True, exist_ok=True)
        env.replicas.append(replica)
    threads = [threading.Thread(target=r.start) for r in env.replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# -- the figures ---------------------------------------------------------------------------


def _log(text: str) -> None:
    print(text, flush=True)


def fleet_cold_sync(env: Fleet, replicas: int, shards: int, timeout: float,
                    log: Any = _log) -> dict[str, Any]:
    """Replicas start on empty clusters; until every RayCluster is in its cluster.

    Progress (RayClusters per cluster) is logged every minute.
    """
    before = env.snapshot()
    start = time.monotonic()
    start_replicas(env, replicas, shards)
    want = env.fleet.per_cluster
    counts, shown = env.count_rayclusters(), start
    while min(counts) < want:
        now = time.monotonic()
        if now - start > timeout:
            return {"error": f"not synced after {timeout:.0f}s: {counts} of {want} each"}
        if now - shown >= 60:
            log(f"fleet cold sync: {now - start:.0f}s, RayClusters per cluster {counts}, "
                f"load {os.getloadavg()[0]:.1f}")
            shown = now
        time.sleep(1.0)
        counts = env.count_rayclusters()
    wall = time.monotonic() - start
    after = env.snapshot()
    per = [request_summary(delta(b, a)) for b, a in zip(before, after, strict=True)]
    total = sum(p["total"] for p in per)
    return {"wall_s": wall, "rayclusters": want * len(CLUSTERS),
            "api_requests_per_cluster": per,
            "requests_per_new_raycluster": total / (want * len(CLUSTERS))}


def shard_holders(env: Fleet) -> dict[int, str]:
    """Who holds each shard Lease now (read from the home cluster)."""
    from gitops_ray.kube.leader import LEASE_API
    from gitops_ray.runtime.shards import GROUP_LABEL, ROLE_LABEL

    items, _ = env.kubes[0].list(LEASE_API, "Lease", CONTROL_NAMESPACE,
                                 label_selector=f"{GROUP_LABEL}={LEASE_NAME},{ROLE_LABEL}=shard")
    return {int(i["metadata"]["name"].rsplit("-", 1)[1]): str(i["spec"]["holderIdentity"])
            for i in items if (i.get("spec") or {}).get("holderIdentity")}


def apps_of(env: Fleet, shards: int, owned: set[int]) -> list[tuple[int, int]]:
    """``(cluster, app)`` of every app whose shard is in ``owned``."""
    from gitops_ray.runtime.shards import shard_of

    return [(c, a) for c in range(len(CLUSTERS)) for a in range(env.fleet.apps)
            if shard_of(env.fleet.app_name(c, a), shards) in owned]


class Applied:
    """A watch per cluster: when each awaited RayCluster shows its head's new env value."""

    def __init__(self, env: Fleet, wanted: dict[tuple[int, str, str], str]) -> None:
        self.wanted = dict(wanted)  # (cluster, namespace, name) -> CONFIG_REVISION value
        self.seen: dict[tuple[int, str, str], float] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(env, c), daemon=True)
                         for c in range(len(CLUSTERS))]
        self._versions = [k.list("ray.io/v1", "RayCluster")[1] for k in env.kubes]
        for t in self._threads:
            t.start()

    def _watch(self, env: Fleet, cluster: int) -> None:
        version = self._versions[cluster]
        while not self._done.is_set():
            with contextlib.suppress(Exception):
                for event in env.kubes[cluster].watch("ray.io/v1", "RayCluster",
                                                      resource_version=version,
                                                      timeout_seconds=30):
                    version = event.object.get("metadata", {}).get("resourceVersion", version)
                    self._seen(cluster, event.object)
                    if self._done.is_set():
                        return

    def _seen(self, cluster: int, obj: Manifest) -> None:
        meta = obj.get("metadata", {})
        key = (cluster, meta.get("namespace", ""), meta.get("name", ""))
        value = self.wanted.get(key)
        if value is None or head_env(obj, "CONFIG_REVISION") != value:
            return
        with self._lock:
            self.seen.setdefault(key, time.monotonic())
            if len(self.seen) == len(self.wanted):
                self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def stop(self) -> None:
        self._done.set()


def failover(env: Fleet, shards: int, timeout: float, profile: Path | None = None
             ) -> dict[str, Any]:
    """SIGKILL the replica holding the most shards, change one RayCluster of each of its
    apps, push the webhook to a survivor; time until every change is applied.

    ``profile``: sample each survivor with py-spy (GIL holder only) from just before the
    kill until the last change is applied, into ``DIR/failover-<replica>.txt``.
    """
    holders = shard_holders(env)
    by_replica: dict[str, set[int]] = {}
    for shard, holder in holders.items():
        by_replica.setdefault(holder, set()).add(shard)
    victim_id = max(by_replica, key=lambda r: len(by_replica[r]))
    victim = next(r for r in env.replicas if r.identity == victim_id)
    owned = apps_of(env, shards, by_replica[victim_id])
    value = f"failover-{time.time_ns()}"
    wanted: dict[tuple[int, str, str], str] = {}
    for cluster, app in owned:
        wl = env.fleet.workload(cluster)
        index = wl.members(app).start
        env.repo.change(cluster, index, value)
        wanted[(cluster, wl.namespace(app), wl.cluster_name(index))] = value
    applied = Applied(env, wanted)
    recorders = {r.identity: _py_spy(r.pid, profile / f"failover-{r.identity}.txt")
                 for r in env.replicas if r is not victim and profile is not None}
    try:
        killed, killed_wall = time.monotonic(), time.time()
        victim.kill()
        sha = env.repo.push(f"one RayCluster of each of {len(owned)} apps of {victim_id}")
        survivor = next(r for r in env.replicas if r is not victim)
        survivor.push_webhook(env.repo.url, sha)
        done = applied.wait(timeout)
        latencies = sorted(t - killed for t in applied.seen.values())
    finally:
        applied.stop()
        for recorder in recorders.values():
            if recorder is not None:
                _stop(recorder)
    env.killed[victim_id] = killed_wall
    profiles = {name: _top_frames(profile / f"failover-{name}.txt")
                for name in recorders if profile is not None}
    return {**({"profiles": profiles} if profiles else {}),
            "killed": victim_id, "shards_of_killed": len(by_replica[victim_id]),
            "apps_of_killed": len(owned), "applied": len(applied.seen),
            "all_applied": done, "lease_duration_s": LEASE_DURATION,
            "kill_to_last_applied_s": latencies[-1] if latencies else None,
            "kill_to_first_applied_s": latencies[0] if latencies else None,
            "shards_after": _count_by_holder(shard_holders(env))}


def _count_by_holder(holders: dict[int, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for holder in holders.values():
        out[holder] = out.get(holder, 0) + 1
    return dict(sorted(out.items()))


def overlaps(env: Fleet, killed: dict[str, float]) -> dict[str, Any]:
    """Syncs of one app by two replicas at overlapping times, from the replicas' logs
    (:func:`bench.sharding.intervals`: ``sync_started`` .. ``sync_finished``; a killed
    replica's open syncs end at the kill). The target is none."""
    by: dict[str, list[tuple[str, float, float]]] = {}
    for replica in env.replicas:
        for path in sorted(replica.workdir.glob("controller-*.log")):
            by.setdefault(replica.identity, []).extend(
                intervals(path, killed.get(replica.identity)))
    return {"syncs_logged": sum(len(v) for v in by.values()),
            "overlapping_syncs": overlapping(by)}


def run(fleet: FleetWorkload, *, replicas: int, shards: int, log: Any = _log,
        keep_logs: Path | None = None, profile: Path | None = None) -> dict[str, Any]:
    """Every fleet figure, from one run; ``keep_logs``: copy the replicas' logs there;
    ``profile``: sample the survivors during the failover (:func:`failover`)."""
    out: dict[str, Any] = {"per_cluster": fleet.per_cluster, "apps_per_cluster": fleet.apps,
                           "clusters": len(CLUSTERS), "replicas": replicas, "shards": shards,
                           "machine": machine_info(), "code": code_revision(),
                           "load_average_at_start": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="gitops-ray-fleet-") as tmp, \
            fleet_environment(fleet, Path(tmp)) as env:
        out["cold_sync"] = fleet_cold_sync(env, replicas, shards, timeout=3600, log=log)
        log(f"fleet cold sync: {json.dumps(out['cold_sync'])[:300]}")
        for replica in env.replicas:
            replica.wait_idle(timeout=1800)
        out["shards_before"] = _count_by_holder(shard_holders(env))
        out["load_average_before_failover"] = list(os.getloadavg())
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
        out["failover"] = failover(env, shards, timeout=600, profile=profile)
        log(f"failover: {json.dumps(out['failover'])}")
        out["overlap"] = overlaps(env, env.killed)
        log(f"overlap: {json.dumps(out['overlap'])}")
        out["memory_kib"] = {r.identity: memory_kib(r.pid) for r in env.replicas
                             if r.proc is not None and r.proc.poll() is None}
        if keep_logs is not None:
            for replica in env.replicas:
                for path in replica.workdir.glob("controller-*.log"):
                    target = keep_logs / replica.identity / path.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
    out["load_average_at_end"] = list(os.getloadavg())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-cluster", type=int, default=3000)
    parser.add_argument("--apps", type=int, default=50, help="apps per cluster")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS / "fleet.json")
    parser.add_argument("--keep-logs", type=Path, default=None, metavar="DIR",
                        help="copy each replica's log into DIR/<replica>/")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="sample the survivors with py-spy during the failover")
    args = parser.parse_args()
    result = run(FleetWorkload(args.per_cluster, args.apps), replicas=args.replicas,
                 shards=args.shards, keep_logs=args.keep_logs, profile=args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
