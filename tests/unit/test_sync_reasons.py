"""The failure contract's pure parts: every failure maps to one reason, the first failure
names the operation, and a lost lease is never turned into a reason."""

from __future__ import annotations

import pytest

from gitops_ray.errors import (
    ConfigError,
    DiffError,
    GitOpsRayError,
    LimitExceeded,
    RenderError,
    SourceError,
    SyncError,
)
from gitops_ray.kube import Conflict, Forbidden, KubeError, LeaseExpired, NotFound
from gitops_ray.sync.reasons import Reason, StepFailed, failing_as, reason_of
from gitops_ray.sync.request import SyncResult


@pytest.mark.parametrize(("error", "reason"), [
    (SourceError("git fetch failed"), Reason.ARTIFACT_FAILED),
    (ConfigError("bad ignore rule"), Reason.CONFIG_INVALID),
    (RenderError("broken yaml"), Reason.RENDER_FAILED),
    (LimitExceeded("alias bomb"), Reason.RENDER_FAILED),
    (DiffError("dry run failed"), Reason.COMPARE_FAILED),
    (Forbidden("no get", status=403), Reason.COMPARE_FAILED),  # an API error while comparing
    (StepFailed(Reason.PRUNE_FAILED, "x"), Reason.PRUNE_FAILED),  # a step names itself
])
def test_errors_outside_a_step_map_to_their_stage(error: GitOpsRayError,
                                                  reason: Reason) -> None:
    assert reason_of(error) is reason


def test_stages_without_a_step_use_the_callers_default() -> None:
    assert reason_of(KubeError("boom"), Reason.RECORD_FAILED) is Reason.RECORD_FAILED
    assert reason_of(SyncError("boom"), Reason.APPLY_FAILED) is Reason.APPLY_FAILED
    assert reason_of(RenderError("x"), Reason.RECORD_FAILED) is Reason.RENDER_FAILED


@pytest.mark.parametrize("reason", list(Reason))
@pytest.mark.parametrize("error", [
    Forbidden("forbidden", status=403), Conflict("kept changing", status=409),
    NotFound("gone", status=404), SyncError("still conflicting after 5 attempts"),
    DiffError("ignore rule failed"),
])
def test_any_project_error_in_a_step_becomes_that_steps_reason(
        reason: Reason, error: GitOpsRayError) -> None:
    with pytest.raises(StepFailed) as failed, failing_as(reason):
        raise error
    assert failed.value.reason is reason
    assert failed.value.__cause__ is error  # readiness still sees a 403 behind it
    assert str(failed.value) == str(error)


def test_a_lost_lease_passes_through_every_step_unchanged() -> None:
    lost = LeaseExpired("write refused: this replica is not the leader")
    for reason in Reason:
        with pytest.raises(LeaseExpired) as raised, failing_as(reason):
            raise lost
        assert raised.value is lost


def test_the_innermost_step_names_the_failure() -> None:
    with pytest.raises(StepFailed) as failed, failing_as(Reason.APPLY_FAILED), \
            failing_as(Reason.NAMESPACE_FAILED):
        raise Forbidden("cannot create namespaces", status=403)
    assert failed.value.reason is Reason.NAMESPACE_FAILED


def test_a_bug_is_not_dressed_up_as_a_reason() -> None:
    with pytest.raises(KeyError), failing_as(Reason.APPLY_FAILED):
        raise KeyError("metadata")


def test_the_first_failure_names_the_operation_and_is_recorded() -> None:
    result = SyncResult("ray", "a" * 40)
    assert result.as_operation()["reason"] == "" and result.ok
    cause = Forbidden("no get", status=403)
    result.fail("prune failed: cannot read it", Reason.PRUNE_FAILED, cause=cause)
    result.fail("the operation could not be recorded", Reason.RECORD_FAILED)
    operation = result.as_operation()
    assert (operation["phase"], operation["reason"]) == ("Failed", "PruneFailed")
    assert operation["message"] == "prune failed: cannot read it"
    assert result.cause is cause and "cause" not in operation and result.finished_at > 0


def test_the_vocabulary_is_flux_style_and_unique() -> None:
    values = [r.value for r in Reason]
    assert len(set(values)) == len(values)
    assert all(v[0].isupper() and v.isalpha() for v in values)
    assert {"ApplyFailed", "PruneFailed", "NamespaceFailed", "InventoryFailed",
            "RecordFailed", "CompareFailed", "RenderFailed", "ArtifactFailed"} <= set(values)
