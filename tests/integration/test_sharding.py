"""Several real controller processes split the apps by shard Leases (runtime/shards.py).

One scenario, in the order a fleet lives it: three replicas share 15 apps (8 shards);
every shard is held by exactly one replica and every replica syncs some apps; a webhook
sent to one replica reaches the owners of the other apps, and each app of the push is
prepared on standby by its successor (the replica that would take it over); a replica
SIGKILLed right after a push loses its shards to the two others, which sync its apps
again; a fourth replica takes only the shards it wins (rendezvous hashing); a replica
SIGSTOPped while syncing loses its shards and, resumed, writes nothing under its old
terms; the killed replica's membership Lease is deleted. The survivors see the killed
replica go silent before its Leases expire and prepare its apps in full. Throughout, the
logs show that no app was ever synced by two replicas at once.
"""

from __future__ import annotations

import datetime
import json
import math
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.kube import Conflict, Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.runtime.shards import GROUP_LABEL, ROLE_LABEL, assignment, owner, shard_of
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController
from tests.harness.runtime import Controller, application, push_payload
from tests.harness.settings import controller_settings

APPS = [f"app-{i:02d}" for i in range(15)]
SHARDS = 8


def configmaps(version: str) -> dict[str, Any]:
    return {f"apps/{app}/cm.yaml": {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": f"cm-{app}"},
                                    "data": {"version": version}} for app in APPS}


def versions(kube: Kube, namespace: str) -> dict[str, str]:
    items, _ = kube.list("v1", "ConfigMap", namespace)
    return {i["metadata"]["name"][3:]: str((i.get("data") or {}).get("version"))
            for i in items if i["metadata"]["name"].startswith("cm-app-")}


def all_at(kube: Kube, namespace: str, version: str) -> bool:
    live = versions(kube, namespace)
    return sorted(live) == APPS and set(live.values()) == {version}


def holders(kube: Kube, namespace: str) -> dict[int, str]:
    """shard -> holder, from the shard Leases themselves."""
    items, _ = kube.list(LEASE_API, "Lease", namespace,
                         label_selector=f"{GROUP_LABEL}=gitops-ray,{ROLE_LABEL}=shard")
    out = {}
    for lease in items:
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if holder:
            out[int(lease["metadata"]["name"].rsplit("-", 1)[1])] = str(holder)
    return out


def settled(kube: Kube, namespace: str, members: list[str]) -> dict[int, str]:
    """The holders once every shard is held by its desired owner among ``members``."""
    now = holders(kube, namespace)
    return now if now == assignment(SHARDS, members) else {}


def synced_by(kube: Kube, namespace: str) -> set[str]:
    store = RecordStore(kube, namespace)
    return {str((store.load(app).status.get("operation") or {}).get("controller", ""))
            for app in APPS}


def records(process: ControllerProcess) -> list[dict[str, Any]]:
    out = []
    for line in process.log.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _regained(log: list[dict[str, Any]], since: float) -> list[dict[str, Any]] | None:
    """The records from ``since`` on, once they include a ``shards_gained``."""
    late = [r for r in log if at(r) >= since]
    return late if any(r.get("event") == "shards_gained" for r in late) else None


def at(record: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(record["timestamp"]).timestamp()


def sync_intervals(process: ControllerProcess, killed_at: float | None = None
                   ) -> list[tuple[str, float, float]]:
    """(app, start, end) of each sync the process ran to its end (or until killed).

    A sync aborted by the write fence is left out: it wrote nothing after its term
    ended (the SIGSTOP part asserts that separately).
    """
    started: dict[str, float] = {}
    out = []
    for r in records(process):
        app, event = r.get("app"), r.get("event")
        if event in ("sync_started", "sync_continued"):
            started[str(app)] = at(r)
        elif event in ("sync_finished", "sync_waiting") and app in started:
            out.append((str(app), started.pop(str(app)), at(r)))
        elif event == "sync_aborted_lease_expired":
            started.pop(str(app), None)
    if killed_at is not None:
        out.extend((app, start, killed_at) for app, start in started.items())
    return out


def standby_renders(process: ControllerProcess) -> float:
    """``gitops_ray_standby_renders_total{result="success"}`` of one replica."""
    for line in process.metrics().splitlines():
        if line.startswith('gitops_ray_standby_renders_total{result="success"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def overlaps(intervals: dict[str, list[tuple[str, float, float]]]) -> list[str]:
    found = []
    flat = [(who, app, s, e) for who, items in intervals.items() for app, s, e in items]
    for who, app, start, end in flat:
        for other, app2, start2, end2 in flat:
            if other != who and app2 == app and start < end2 and start2 < end:
                found.append(f"{app}: {who} {start}-{end} and {other} {start2}-{end2}")
    return found


def test_replicas_split_the_apps_and_take_over_from_each_other(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit(configmaps("v1"))
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(controller_settings(
        control_plane.kubeconfig, namespace, interval="10m",
        applications=[application(app, git_repo.url, namespace, f"apps/{app}")
                      for app in APPS],
        leaderElection={"leaseDuration": "3s", "renewDeadline": "2s", "retryPeriod": "500ms"},
        sharding={"enabled": True, "shards": SHARDS})))

    a, b, c = (controller_process(f"ctl-{x}", config) for x in "abc")
    eventually(lambda: settled(kube, namespace, ["ctl-a", "ctl-b", "ctl-c"]),
               message="every shard held by its owner among a, b, c")
    eventually(lambda: all_at(kube, namespace, "v1"), message="every app synced")
    split = holders(kube, namespace)
    assert {split[shard_of(app, SHARDS)] for app in APPS} == {"ctl-a", "ctl-b", "ctl-c"}

    # A push delivered to one replica reaches the owners of the other apps.
    rendered_before = {p.identity: standby_renders(p) for p in (a, b, c)}
    sha = git_repo.commit(configmaps("v2"))
    response = a.webhook(git_repo, sha)
    assert response.status_code == 202
    body = response.json()
    owned_by_a = {app for app in APPS
                  if holders(kube, namespace)[shard_of(app, SHARDS)] == "ctl-a"}
    assert set(body["refreshed"]) == owned_by_a
    assert body["forwardedTo"] == "ctl-b, ctl-c"
    eventually(lambda: all_at(kube, namespace, "v2"), message="pushed to every owner")
    eventually(lambda: synced_by(kube, namespace) == {"ctl-a", "ctl-b", "ctl-c"},
               message="each replica synced the apps of its shards")
    # ... and each app of the push was prepared for a takeover by its successor.
    members = [p.identity for p in (a, b, c)]
    successors = {app: owner(shard_of(app, SHARDS),
                             [m for m in members if m != split[shard_of(app, SHARDS)]])
                  for app in APPS}
    for p in (a, b, c):
        heir_of = sum(1 for app in APPS if successors[app] == p.identity)
        eventually(lambda p=p, heir_of=heir_of:
                   standby_renders(p) >= rendered_before[p.identity] + heir_of,
                   message=f"{p.identity} prepared the apps it would take over")

    # SIGKILL c right after a push: its shards go to a and b, which sync its apps again.
    of_c = {s for s, h in holders(kube, namespace).items() if h == "ctl-c"}
    sha = git_repo.commit(configmaps("v3"))
    a.webhook(git_repo, sha)
    kill_sent = datetime.datetime.now(datetime.UTC).timestamp()
    c.proc.send_signal(signal.SIGKILL)
    c.proc.wait(30)
    killed_at = datetime.datetime.now(datetime.UTC).timestamp()
    after_kill = eventually(lambda: settled(kube, namespace, ["ctl-a", "ctl-b"]),
                            message="c's shards taken over")
    assert {after_kill[s] for s in of_c} <= {"ctl-a", "ctl-b"}
    # Before its Leases expired, c went silent: each survivor that saw it queued the
    # apps it would take from c for a thorough standby pass (runtime.shards).
    silent = [(p.identity, r["apps"]) for p in (a, b) for r in records(p)
              if r.get("event") == "member_silent" and r.get("member") == "ctl-c"
              and at(r) >= kill_sent]
    assert silent, "no survivor saw c go silent"
    for identity, queued in silent:
        assert queued == sum(1 for app in APPS if shard_of(app, SHARDS) in of_c
                             and successors[app] == identity)
    eventually(lambda: all_at(kube, namespace, "v3"), message="c's push finished by a, b")
    sha = git_repo.commit(configmaps("v4"))
    assert a.webhook(git_repo, sha).json()["forwardedTo"] == "ctl-b"
    eventually(lambda: all_at(kube, namespace, "v4"), message="c's apps synced again")

    # A fourth replica takes about a quarter of the shards; nothing else moves.
    d = controller_process("ctl-d", config)
    now = eventually(lambda: settled(kube, namespace, ["ctl-a", "ctl-b", "ctl-d"]),
                     message="d takes the shards it wins")
    moved = {s for s in now if now[s] != after_kill[s]}
    assert moved and all(now[s] == "ctl-d" for s in moved)
    assert len(moved) <= math.ceil(SHARDS / 3) + 1
    assert 'gitops_ray_shards_held ' in d.metrics()

    # SIGSTOP b while it syncs: a and d take its shards; resumed, b writes nothing stale.
    sha5 = git_repo.commit(configmaps("v5"))
    b.webhook(git_repo, sha5)
    b.proc.send_signal(signal.SIGSTOP)
    try:
        eventually(lambda: "ctl-b" not in holders(kube, namespace).values(),
                   message="b's shards taken over while it is stopped")
        sha6 = git_repo.commit(configmaps("v6"))
        a.webhook(git_repo, sha6)
        eventually(lambda: all_at(kube, namespace, "v6"), message="v6 everywhere")
    finally:
        resumed_at = datetime.datetime.now(datetime.UTC).timestamp()
        b.proc.send_signal(signal.SIGCONT)
    eventually(lambda: settled(kube, namespace, ["ctl-a", "ctl-b", "ctl-d"]),
               message="b holds its shards again")
    eventually(lambda: all_at(kube, namespace, "v6"), message="still v6 everywhere")
    late = eventually(lambda: _regained(records(b), resumed_at), message="b logged it")
    assert not [r for r in late if r.get("event") == "sync_finished"
                and r.get("revision") == sha5[:12]], "b finished a stale sync"
    regained = next(i for i, r in enumerate(late) if r.get("event") == "shards_gained")
    stale_writes = [r for r in late[:regained] if r.get("event") == "resource_synced"
                    and r.get("dry_run") is False]
    assert len(stale_writes) <= 8  # at most one request per worker thread slips through

    # c's membership Lease is deleted by the janitor (the live member with the lowest id).
    eventually(lambda: kube.get(LEASE_API, "Lease", name="gitops-ray-member-ctl-c",
                                namespace=namespace) is None, message="c's member Lease gone")

    intervals = {p.identity: sync_intervals(p, killed_at if p is c else None)
                 for p in (a, b, c, d)}
    assert sum(len(v) for v in intervals.values()) >= 4 * len(APPS)
    assert overlaps(intervals) == []


def test_a_refresh_that_outlives_its_shards_term_acts_on_nothing_it_resolved_in_it(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    """The SIGSTOP step's interleaving above, made exact in one in-process replica: a
    refresh resolves a push's commit; before it goes on, its shard's Lease changes hands
    and comes back (a new term) and a newer commit lands. It must not sync the commit it
    resolved in the old term (the owner in between may have synced a newer one)."""
    def solo(version: str) -> dict[str, Any]:
        return {"apps/solo/cm.yaml": {"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "cm-solo"},
                                      "data": {"version": version}}}

    def live() -> str:
        got = kube.get("v1", "ConfigMap", name="cm-solo", namespace=namespace) or {}
        return str((got.get("data") or {}).get("version"))

    git_repo.commit(solo("v1"))
    ctl = start_controller({
        "applications": [application("solo", git_repo.url, namespace, "apps/solo")],
        "leaderElection": {"leaseDuration": "3s", "renewDeadline": "2s", "retryPeriod": "500ms"},
        "sharding": {"enabled": True, "shards": 1}})
    eventually(lambda: live() == "v1", message="first sync")
    shards = ctl.runtime.shards
    assert shards is not None
    resolved, go_on = threading.Event(), threading.Event()
    resolve = ctl.runtime.controller._revision

    def resolve_then_wait(app: Any, **kwargs: Any) -> str:  # the first call only
        sha = resolve(app, **kwargs)
        if not resolved.is_set():
            resolved.set()
            go_on.wait(120)
        return sha

    ctl.runtime.controller._revision = resolve_then_wait  # type: ignore[method-assign]
    stale = git_repo.commit(solo("v2"))
    assert ctl.webhook(push_payload(git_repo, stale)).status_code == 202
    assert resolved.wait(120), "the push's refresh resolved its commit"
    git_repo.commit(solo("v3"))
    term = shards.electors[0].term
    eventually(lambda: hold_shard(kube, namespace, "intruder"), message="another takes it")
    eventually(lambda: 0 not in shards.held(), message="the replica lost its shard")
    eventually(lambda: hold_shard(kube, namespace, ""), message="the other gives it up")
    eventually(lambda: shards.electors[0].term > term and 0 in shards.held(),
               message="the shard taken again, under a new term")
    go_on.set()
    eventually(lambda: live() == "v3", message="the newer commit synced")
    history = ctl.status("solo").get("history") or []
    assert stale not in [entry.get("revision") for entry in history]


def hold_shard(kube: Kube, namespace: str, holder: str) -> bool:
    """Write ``holder`` into shard 0's Lease (``""``: released), as another replica would;
    ``False`` when a renewal came in between (409)."""
    lease = kube.get(LEASE_API, "Lease", name="gitops-ray-shard-0", namespace=namespace)
    assert lease is not None
    lease["spec"]["holderIdentity"] = holder
    try:
        kube.replace(lease, field_manager="tests")
    except Conflict:
        return False
    return True
