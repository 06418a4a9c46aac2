"""Sync operations for one app: compare, sync, compare again, record.

Shared by ``gitops-ray sync`` and the controller, so a one-shot sync and an automated one
behave the same. The second comparison is what the status reports: after a sync the app
should be Synced, and if it is not (an admission webhook changed something, a field we
cannot own) the status says so instead of assuming success.

**No prune after a partial render.** A render that tolerated a problem (a skipped file,
an ignored patch file: :mod:`gitops_ray.render.notes`) may be missing objects that are
still in git; pruning would delete them from the cluster. Such a sync applies what was
rendered and leaves every prune pending, saying why. (A render that *failed* never gets
this far: nothing is synced at all.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gitops_ray.reconcile.pipeline import Comparison, Pipeline
from gitops_ray.reconcile.status import save_status
from gitops_ray.render.apps import Application
from gitops_ray.sync.engine import Syncer, SyncRequest, SyncResult
from gitops_ray.types import ResourceAction, ResourceKey


@dataclass(frozen=True)
class SyncOutcome:
    """Before and after of one sync operation."""

    before: Comparison
    result: SyncResult
    after: Comparison | None


class Reconciler:
    """Runs sync operations through a :class:`Pipeline` and a :class:`Syncer`."""

    def __init__(self, pipeline: Pipeline, syncer: Syncer) -> None:
        self.pipeline = pipeline
        self.syncer = syncer

    def sync(self, app: Application, *, revision: str | None = None, local: Path | None = None,
             prune: bool = False, dry_run: bool = False,
             only: frozenset[ResourceKey] | None = None,
             before: Comparison | None = None) -> SyncOutcome:
        """Sync one app (``only``: just these resources, as self-heal does)."""
        before = before or self.pipeline.compare(app, revision=revision, local=local)
        blocked = prune and bool(before.render_problems)
        request = SyncRequest(app, before.manifests(), before.revision,
                              prune=prune and not blocked, dry_run=dry_run, only=only,
                              out_of_sync=before.out_of_sync)
        result = self.syncer.sync(request, self.pipeline.rules(app))
        if blocked:
            _explain_blocked_prune(result, before.render_problems)
        if dry_run:
            return SyncOutcome(before, result, None)
        after = self.pipeline.compare(app, revision=before.revision, local=local)
        save_status(self.syncer.store, after, result)
        return SyncOutcome(before, result, after)


def _explain_blocked_prune(result: SyncResult, problems: tuple[str, ...]) -> None:
    """Say in the result why prunes stayed pending (see the module docstring)."""
    why = f"not pruned: the render had problems ({'; '.join(problems)})"
    result.resources = [dataclasses.replace(r, message=why)
                        if r.action == ResourceAction.PENDING_PRUNE else r
                        for r in result.resources]
    if not result.message:
        result.message = why
