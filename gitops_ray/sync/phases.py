"""A sync's steps with hooks: PreSync, Sync and PostSync, each wave by wave, and SyncFail.

Why: gitops-engine orders a sync's tasks by phase, then wave (``sync_context.go``):
``PreSync`` hooks, then the app's resources with ``Sync`` hooks, then ``PostSync`` hooks,
each phase wave by wave; a step's hooks must complete (and, unless it is the last step,
its resources be healthy) before the next starts, and a hook that fails fails the
operation, which then runs the ``SyncFail`` hooks and ends ``Failed`` once they are done.
:mod:`gitops_ray.sync.operation` already makes a sync a sequence of recorded steps; this
module lays out the steps (:func:`plan`) and runs the hook part of each
(:class:`HookSteps`); :mod:`gitops_ray.sync.engine` applies the resources.

A hook's run is recorded with its result (``hookType``, ``hookPhase``, ``uid``): the next
step, possibly in another controller, finds the hook it created by name and ``uid``.
When the operation ends, finished hooks are deleted by their policies as gitops-engine
does: ``HookSucceeded`` ones when it succeeded, ``HookFailed`` ones when it failed.

A selective sync (``only``: self-heal, ``argocd app sync --resource``) runs no hooks, as
in Argo CD; a dry run lists them (``not run (dry run)``) and creates none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gitops_ray.sync.hookrun import HookRun, HookRunner
from gitops_ray.sync.hooks import SYNC_PHASES, DeletePolicy, HookTask, HookType, tasks
from gitops_ray.sync.order import sort_key, wave_of, waves
from gitops_ray.sync.reasons import Reason
from gitops_ray.types import Manifest, OperationPhase, ResourceAction

if TYPE_CHECKING:
    from gitops_ray.sync.request import ResourceResult, SyncRequest, SyncResult

FAILED_TASKS = "one or more synchronization tasks completed unsuccessfully"
FAILED_SYNC_FAIL = "one or more SyncFail hooks failed"
DRY_RUN = "not run (dry run)"


@dataclass
class Step:
    """What one step applies (resources of one wave) and runs (hooks of it)."""

    phase: HookType
    wave: int
    resources: list[Manifest] = field(default_factory=list)
    hooks: list[HookTask] = field(default_factory=list)

    @property
    def rank(self) -> tuple[int, int]:
        return SYNC_PHASES.index(self.phase), self.wave


def plan(objs: Iterable[Manifest], hooks: Sequence[Manifest], *, revision: str,
         started_at: float) -> list[Step]:
    """The sync's steps in order: by phase, then wave (hooks of a wave in apply order)."""
    steps = {(1, number): Step(HookType.SYNC, number, members)
             for number, members in waves(objs)}
    for phase in SYNC_PHASES:
        for task in tasks(hooks, phase, revision=revision, started_at=started_at):
            wave = wave_of(task.manifest)
            steps.setdefault((SYNC_PHASES.index(phase), wave), Step(phase, wave)).hooks \
                .append(task)
    for step in steps.values():
        step.hooks.sort(key=lambda t: sort_key(t.body()))
    return [steps[rank] for rank in sorted(steps)]


def resumed_rank(phase: str, wave: int) -> tuple[int, int] | None:
    """The rank of the step a recorded operation waits at (``None``: not a sync phase)."""
    try:
        return SYNC_PHASES.index(HookType(phase)), wave
    except ValueError:
        return None


MakeResult = Callable[[HookRun], "ResourceResult"]


@dataclass
class HookSteps:
    """Runs the hooks of the steps of one sync through a :class:`HookRunner`."""

    runner: HookRunner
    result_of: MakeResult

    def run(self, request: SyncRequest, step: Step, result: SyncResult, *,
            again: bool) -> bool:
        """Start (or, ``again``, re-check) the step's hooks; ``False``: failed or waiting."""
        if not step.hooks:
            return True
        if request.dry_run:
            result.resources.extend(self._listed(step.hooks))
            return True
        runs = self._advance(step.hooks, result, again=again)
        failed = [r for r in runs if r.phase is OperationPhase.FAILED]
        if failed:
            result.fail(f"{FAILED_TASKS}, reason: " + ", ".join(_said(r) for r in failed),
                        Reason.HOOK_FAILED)
            return False
        waiting = [r for r in runs if not r.done]
        if waiting:
            result.wait(request, step.wave, _waiting(waiting), phase=step.phase)
            return False
        return True

    def sync_fail(self, request: SyncRequest, result: SyncResult, *, again: bool,
                  failure: str, reason: str) -> None:
        """Run the ``SyncFail`` hooks of a failed sync; it ends ``Failed`` once they are done."""
        todo = tasks(request.hooks, HookType.SYNC_FAIL, revision=result.revision,
                     started_at=result.started_at) if request.only is None else []
        if not todo or request.dry_run:
            return
        runs = self._advance(todo, result, again=again)
        waiting = [r for r in runs if not r.done]
        if waiting:
            result.wait(request, 0, f"{failure}; {_waiting(waiting)}", phase=HookType.SYNC_FAIL,
                        failure=failure, failureReason=reason)
            return
        failed = [r for r in runs if r.phase is OperationPhase.FAILED]
        message = failure if not failed else \
            f"{failure}\n{FAILED_SYNC_FAIL}, reason: " + ", ".join(_said(r) for r in failed)
        result.phase, result.message = OperationPhase.FAILED, message
        result.reason = Reason(reason) if reason in Reason._value2member_map_ \
            else Reason.HOOK_FAILED
        result.state, result.finished_at = {}, time.time()

    def finish(self, request: SyncRequest, result: SyncResult) -> None:
        """The operation ended: delete its finished hooks by their delete policies."""
        if request.dry_run or result.running:
            return
        policy = DeletePolicy.HOOK_SUCCEEDED if result.ok else DeletePolicy.HOOK_FAILED
        for entry in _hook_entries(result):
            if policy.value in (entry.get("deletePolicies") or ()) and entry.get("uid") and \
                    entry.get("hookPhase") != OperationPhase.RUNNING.value:
                problem = self.runner.delete_entry(entry)
                if problem:
                    result.note(problem)

    def _advance(self, todo: list[HookTask], result: SyncResult, *,
                 again: bool) -> list[HookRun]:
        """Start or re-check each hook; their results replace the earlier steps' ones."""
        uids: dict[tuple[str, str], str] = {}
        if again:
            kept = []
            for entry in result.earlier:
                mark = (str(entry.get("key")), str(entry.get("syncPhase")))
                if entry.get("hookType") and any(mark == (str(t.key), t.phase.value)
                                                 for t in todo):
                    uids[mark] = str(entry.get("uid") or "")
                else:
                    kept.append(entry)
            result.earlier = kept
        runs = [self.runner.advance(t, uids.get((str(t.key), t.phase.value), ""))
                for t in todo]
        result.resources.extend(self.result_of(r) for r in runs)
        return runs

    def _listed(self, todo: list[HookTask]) -> list[ResourceResult]:
        return [self.result_of(HookRun(t, None, DRY_RUN)) for t in todo]



def hook_action(run: HookRun) -> ResourceAction:
    """``created`` (Argo CD's ``Synced``), or ``failed`` when it could not be created."""
    return ResourceAction.FAILED if run.phase is OperationPhase.FAILED and not run.uid \
        else ResourceAction.CREATED


def _hook_entries(result: SyncResult) -> list[dict[str, Any]]:
    now = [r.as_dict() for r in result.resources if r.hook is not None]
    return [e for e in result.earlier if e.get("hookType")] + now


def _said(run: HookRun) -> str:
    return f"{run.task.key}: {run.message}" if run.message else str(run.task.key)


def _waiting(runs: list[HookRun]) -> str:
    first = runs[0].task.key
    more = f" and {len(runs) - 1} more hooks" if len(runs) > 1 else ""
    return f"waiting for completion of hook {first}{more}"


@dataclass
class PostDelete:
    """The ``PostDelete`` hooks of one app being deleted: started once, followed to their end.

    Argo CD runs them once the app's resources are deleted, holding the Application (its
    ``post-delete-finalizer``) until they end, then deletes them by policy. The controller
    keeps this between its retries of the deletion: the start time makes ``generateName``
    names stable, ``uids`` says which objects are the ones it created.
    """

    started_at: float = field(default_factory=time.time)
    uids: dict[str, str] = field(default_factory=dict)

    def advance(self, runner: HookRunner, hooks: Sequence[Manifest], *,
                revision: str) -> list[HookRun] | None:
        """Start or follow the hooks; their runs once all ended (``None``: some still run).

        When all ended, the ``HookSucceeded`` ones are deleted if every one succeeded, the
        ``HookFailed`` ones if one failed.
        """
        todo = tasks(hooks, HookType.POST_DELETE, revision=revision,
                     started_at=self.started_at)
        runs = [runner.advance(t, self.uids.get(str(t.key), "")) for t in todo]
        self.uids.update({str(r.task.key): r.uid for r in runs})
        if not all(r.done for r in runs):
            return None
        ok = all(r.phase is OperationPhase.SUCCEEDED for r in runs)
        policy = DeletePolicy.HOOK_SUCCEEDED if ok else DeletePolicy.HOOK_FAILED
        for run in runs:
            if policy in run.policies and run.uid:
                runner.delete_entry(run.entry())
        return runs
