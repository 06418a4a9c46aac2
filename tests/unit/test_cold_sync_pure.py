"""Pure parts of a cheap sync: the app's Event, kind groups, the parallelism setting."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops_ray.errors import ConfigError
from gitops_ray.settings import MAX_SYNC_PARALLELISM, load_settings
from gitops_ray.sync.events import summary
from gitops_ray.sync.order import kind_groups
from gitops_ray.types import OperationPhase, ResourceAction

A = ResourceAction


def test_summary_counts_what_a_step_did() -> None:
    said = summary(app="a", revision="0123456789abcdef", phase=OperationPhase.SUCCEEDED,
                   message="", actions=[A.UNCHANGED, A.CREATED, A.CREATED, A.PRUNED])
    assert said == ("SyncSucceeded", "app a at revision 0123456789ab: 2 created, 1 pruned, "
                              "1 unchanged")


def test_summary_of_a_step_that_changed_nothing_is_none() -> None:
    assert summary(app="a", revision="r", phase=OperationPhase.SUCCEEDED, message="",
                   actions=[A.UNCHANGED, A.PENDING_PRUNE]) is None


def test_summary_of_a_failure_says_why_even_with_nothing_applied() -> None:
    reason, message = summary(app="a", revision="r", phase=OperationPhase.FAILED,
                              message="invalid Ray objects", actions=[]) or ("", "")
    assert reason == "SyncFailed"
    assert message == "app a at revision r: nothing applied; invalid Ray objects"


def test_summary_of_a_waiting_step() -> None:
    said = summary(app="a", revision="r", phase=OperationPhase.RUNNING,
                   message="waiting for wave 0", actions=[A.CREATED])
    assert said is not None and said[0] == "SyncRunning"


def _obj(kind: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "n"}}


def test_kind_groups_keep_kind_order_and_split_where_it_changes() -> None:
    objs = [_obj("RayCluster", "b"), _obj("ConfigMap", "x"), _obj("Namespace", "n"),
            _obj("RayJob", "a"), _obj("ConfigMap", "w")]
    groups = [[(o["kind"], o["metadata"]["name"]) for o in g] for g in kind_groups(objs)]
    assert groups == [[("Namespace", "n")], [("ConfigMap", "w"), ("ConfigMap", "x")],
                      [("RayJob", "a"), ("RayCluster", "b")]]  # unknown kinds: one rank


def test_sync_parallelism_default_and_bounds(tmp_path: Path) -> None:
    assert load_settings(env={}).sync_parallelism == 8
    assert load_settings(env={"GITOPS_RAY_SYNC_PARALLELISM": "2"}).sync_parallelism == 2
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"sync": {"parallelism": 16}}))
    assert load_settings(path, env={}).sync_parallelism == 16
    for bad in ("0", str(MAX_SYNC_PARALLELISM + 1), "many"):
        with pytest.raises(ConfigError, match="parallelism"):
            load_settings(env={"GITOPS_RAY_SYNC_PARALLELISM": bad})
