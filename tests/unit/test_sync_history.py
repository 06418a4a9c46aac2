"""The history's ids and its bound (``gitops_ray.sync.history``), the pause of automated
sync a rollback sets (``reconcile.pause``, ``autosync.decide``) and the commit subject's
bound (``source.git.one_line``), as pure functions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitops_ray.cli.history import entry_view, pause_end
from gitops_ray.errors import ConfigError
from gitops_ray.moments import ago
from gitops_ray.reconcile.argostatus import history as argo_history
from gitops_ray.reconcile.autosync import Action, LastOperation, Observed, decide
from gitops_ray.reconcile.pause import PAUSE_KEY, Pause
from gitops_ray.render.apps import SyncPolicy
from gitops_ray.source.git import SUBJECT_LIMIT, one_line
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.sync.history import (
    DETAILED,
    HISTORY_BUDGET,
    HISTORY_LIMIT,
    LAST_ID,
    bounded,
    find,
    known_ids,
)
from gitops_ray.sync.reasons import Reason
from gitops_ray.sync.request import ResourceResult, SyncResult
from gitops_ray.sync.statuswrites import push_history, revise_newest
from gitops_ray.types import OperationPhase, ResourceAction, ResourceKey

SHA = "a" * 40
SPEC = {"source": {"repoURL": "https://git.example/ray.git", "path": "ray"}}
CONFIGMAP_LIMIT = 1024 * 1024


def operation(n: int, *, phase: str = "Succeeded", clusters: int = 0,
              **extra: Any) -> dict[str, Any]:
    """The operation a sync of ``clusters`` RayClusters records (as ``SyncResult`` makes it)."""
    result = SyncResult("ray", f"{n:040x}", subject=f"commit number {n}",
                        started_at=1_700_000_000.0 + n, finished_at=1_700_000_001.0 + n)
    result.resources = [ResourceResult(ResourceKey("ray.io", "RayCluster", "ray-prod",
                                                   f"cluster-{i:03d}-analytics"),
                                       ResourceAction.CONFIGURED) for i in range(clusters)]
    if phase != "Succeeded":
        result.fail("ray.io/RayCluster:ray-prod/cluster-000: admission webhook said no",
                    Reason.APPLY_FAILED)
    return {**result.as_operation(), **extra}


def test_only_deployments_get_ids_and_ids_are_never_reused() -> None:
    status: dict[str, Any] = {}
    push_history(status, operation(0))
    push_history(status, operation(1, phase="Failed"))
    push_history(status, operation(2, dryRun=True))
    push_history(status, operation(3))
    assert [e.get("id") for e in status["history"]] == [1, None, None, 0]
    assert status["operation"]["id"] == 1 and status[LAST_ID] == 1
    for n in range(4, 4 + HISTORY_LIMIT):  # failures push every deployment out
        push_history(status, operation(n, phase="Failed"))
    assert not [e for e in status["history"] if "id" in e]
    push_history(status, operation(99))
    assert status["history"][0]["id"] == 2  # not 0 again: lastHistoryId remembers


def test_an_operation_that_turns_out_partial_gives_its_id_back() -> None:
    status: dict[str, Any] = {}
    push_history(status, operation(0))
    push_history(status, operation(1))
    revise_newest(status, {"argocdOperation": {"sync": {"resources": [{"kind": "X"}]}}})
    assert "id" not in status["history"][0] and "id" not in status["operation"]
    push_history(status, operation(2))
    assert [e.get("id") for e in status["history"]] == [1, None, 0]


def test_200_rayclusters_a_sync_keep_50_entries_within_the_budget() -> None:
    status: dict[str, Any] = {}
    for n in range(200):
        push_history(status, operation(n, clusters=200,
                                       phase="Failed" if n % 7 == 3 else "Succeeded"))
    entries = status["history"]
    size = len(json.dumps(entries, sort_keys=True))
    assert len(entries) >= HISTORY_LIMIT and size <= HISTORY_BUDGET
    assert all(len(e["resources"]) == 200 for e in entries[:DETAILED])
    assert all("resources" not in e and e["resourceCount"] == 200
               for e in entries[DETAILED:])
    assert entries[0]["subject"] == "commit number 199"
    assert [e["startedAt"] for e in entries] == sorted((e["startedAt"] for e in entries),
                                                       reverse=True)
    assert len(json.dumps(status, sort_keys=True)) < CONFIGMAP_LIMIT // 2  # with `operation`


def test_a_huge_app_trims_details_then_drops_the_oldest_never_the_newest() -> None:
    entries = [operation(n, clusters=3000) for n in range(10)][::-1]
    kept = bounded(entries)
    assert len(json.dumps(kept, sort_keys=True)) <= HISTORY_BUDGET
    assert kept[0]["revision"] == entries[0]["revision"]
    assert "resources" not in kept[0] and kept[0]["resourceCount"] == 3000
    small = bounded(entries, budget=1)  # nothing fits: the newest summary stays
    assert [e["revision"] for e in small] == [entries[0]["revision"]]


def test_find_and_known_ids() -> None:
    status: dict[str, Any] = {}
    for n in range(4):
        push_history(status, operation(n, phase="Failed" if n == 2 else "Succeeded"))
    assert find(status, 2) is not None and find(status, 2)["revision"] == f"{3:040x}"
    assert find(status, 7) is None
    assert known_ids(status) == "0-2" and known_ids({}) == "none"
    status["history"] = [e for e in status["history"] if e.get("id") != 1]
    assert known_ids(status) == "0, 2"


def test_argo_cds_history_uses_the_records_ids() -> None:
    status: dict[str, Any] = {}
    push_history(status, operation(0))
    push_history(status, operation(1, phase="Failed"))
    push_history(status, operation(2))
    first = argo_history([], decode_status({"operation": {**status["history"][2]}}), SPEC)
    second = argo_history(first, decode_status(status), SPEC)
    assert [e["id"] for e in second] == [0, 1]
    renumbered = argo_history([{"id": 5, "revision": SHA}], decode_status(status), SPEC)
    assert [e["id"] for e in renumbered] == [5, 6]  # an older record: Argo CD's next id


def test_the_view_has_rfc3339_times_and_the_subject() -> None:
    status: dict[str, Any] = {}
    push_history(status, operation(0, clusters=1))
    view = entry_view(decode_status(status).entries[0])
    assert view["id"] == 0 and view["subject"] == "commit number 0"
    assert view["finishedAt"] == "2023-11-14T22:13:21Z"
    assert view["resources"][0]["action"] == "configured"
    assert ago(30) == "30s ago" and ago(7200) == "2h ago" and ago(3 * 86400) == "3d ago"


def test_the_subject_is_one_bounded_line() -> None:
    assert one_line("fix: scale gpu\n\nlong body") == "fix: scale gpu"
    assert one_line("tab\there\x1b[31m") == "tab here [31m"
    long = one_line("x" * 500)
    assert len(long) == SUBJECT_LIMIT and long.endswith("…")
    assert one_line("") == ""


# -- pause ---------------------------------------------------------------------------------

OUT = Observed("b" * 40, "spec", "OutOfSync", frozenset({ResourceKey("", "ConfigMap", "n", "c")}))
ROLLED_BACK = LastOperation(SHA, OperationPhase.SUCCEEDED, 100.0)


def test_a_pause_stops_auto_sync_and_self_heal_until_it_ends() -> None:
    policy = SyncPolicy(automated=True, self_heal=True)
    pause = Pause(since=100.0, until=200.0, rollback_id=3)
    paused = decide(policy, OUT, ROLLED_BACK, now=150.0, pause=pause)
    assert paused.action is Action.PAUSED and paused.wait == 50.0
    assert paused.reason == "automated sync paused until 1970-01-01 00:03:20 UTC " \
                            "(rollback to #3)"
    synced = Observed(SHA, "spec", "Synced")
    assert decide(policy, synced, ROLLED_BACK, now=150.0, pause=pause).action is Action.PAUSED
    resumed = decide(policy, OUT, ROLLED_BACK, now=200.0, pause=pause)
    assert resumed.action is Action.SYNC and resumed.reason.startswith("new revision")
    forever = decide(policy, OUT, ROLLED_BACK, now=1e12, pause=Pause(since=1.0))
    assert forever.action is Action.PAUSED and forever.wait == 0.0
    assert "until resumed" in forever.reason
    manual = decide(SyncPolicy(), OUT, ROLLED_BACK, now=150.0, pause=pause)
    assert manual.action is Action.NONE


def test_a_pause_round_trips_through_the_record_and_a_bad_one_is_none() -> None:
    pause = Pause(since=1.0, until=None, rollback_id=4, revision=SHA, by="amy")
    assert Pause.of({PAUSE_KEY: json.loads(json.dumps(pause.to_record()))}) == pause
    assert Pause.of({PAUSE_KEY: {"since": "soon"}}) is None
    assert Pause.of({PAUSE_KEY: "yes"}) is None and Pause.of({}) is None


def test_pause_end_from_the_options() -> None:
    assert pause_end(None, None, now=0.0) is None
    assert pause_end(None, "2h", now=10.0) == 7210.0
    assert pause_end("2030-01-01T00:00:00Z", None, now=0.0) == 1893456000.0
    for until, duration, message in [("2030-01-01T00:00:00", None, "time zone"),
                                     ("yesterday", None, "RFC 3339"),
                                     ("2000-01-01T00:00:00Z", None, "not in the future"),
                                     (None, "0s", "positive"), (None, "soon", "duration"),
                                     ("2030-01-01T00:00:00Z", "2h", "not both")]:
        with pytest.raises(ConfigError, match=message):
            pause_end(until, duration, now=1e9)
