"""Pure parts of sync waves: grouping by wave, and reading back a recorded running sync."""

from __future__ import annotations

from gitops_ray.sync.operation import OPERATION_STATE, OperationState, only_field
from gitops_ray.sync.order import waves
from gitops_ray.types import ResourceKey


def _obj(kind: str, name: str, wave: str | None = None) -> dict[str, object]:
    annotations = {"argocd.argoproj.io/sync-wave": wave} if wave is not None else {}
    return {"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "annotations": annotations}}


def test_waves_group_by_wave_then_kind_order() -> None:
    objs = [_obj("Service", "svc", "1"), _obj("ConfigMap", "late", "1"),
            _obj("ConfigMap", "default"), _obj("Namespace", "first", "-1"),
            _obj("ConfigMap", "typo", "x")]
    grouped = [(n, [o["metadata"]["name"] for o in members])  # type: ignore[index]
               for n, members in waves(objs)]
    assert grouped == [(-1, ["first"]), (0, ["default", "typo"]), (1, ["late", "svc"])]


def test_recorded_running_operation_round_trips() -> None:
    key = ResourceKey("ray.io", "RayCluster", "ns", "rc")
    recorded = {"phase": "Running", "revision": "abc", "wave": 2, "startedAt": 5.0,
                "prune": True, "only": only_field(frozenset({key})),
                "resources": [{"key": "k", "action": "created", "message": ""}],
                "trigger": "self-heal", "attempt": 2}
    state = OperationState.from_status({OPERATION_STATE: recorded})
    assert state is not None
    assert (state.revision, state.wave, state.started_at, state.prune) == ("abc", 2, 5.0, True)
    assert state.only == frozenset({key})
    assert state.extra == {"trigger": "self-heal", "attempt": 2}


def test_finished_or_unreadable_operations_are_not_resumed() -> None:
    assert OperationState.from_status({}) is None
    assert OperationState.from_status({OPERATION_STATE: {"phase": "Succeeded"}}) is None
    assert OperationState.from_status({OPERATION_STATE: {"phase": "Running",
                                                         "wave": "x"}}) is None
