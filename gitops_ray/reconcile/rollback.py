"""Rollback: sync an app at the revision of a past deployment, and keep automation off it.

Why it is a sync: a rollback must behave exactly as a sync of that revision does (the
same render, the same autoscaler-owned fields kept live, the same prune rules, the same
waves), and be recorded like one, so the history shows it with a new id, as Argo CD's
does. :func:`rollback` pins the revision of history entry ``ID`` (a full commit SHA, so
a moved branch or a force-push cannot change what ``ID`` means) and hands it to
:meth:`~gitops_ray.reconcile.reconciler.Reconciler.sync_until_done`, the path of
``gitops-ray sync``; the recorded operation is marked ``trigger: rollback`` and
``rollbackOf: ID``.

Why the pause comes first: an app with automated sync would be synced back to git's
revision by the controller's next pass. Argo CD refuses the rollback in that case;
gitops-ray pauses automation for the app (:mod:`gitops_ray.reconcile.pause`) *before*
it writes anything, so no pass that starts after that can sync git's revision over the
rollback. (A pass already past its decision when the pause is written can still finish
its sync of git's revision; run the rollback again if it landed first.) A failed rollback
keeps the pause: the user asked for automation to stop while they fix things, and git's
revision is presumably what they are rolling back from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops_ray.errors import ConfigError
from gitops_ray.reconcile.pause import Pause
from gitops_ray.reconcile.reconciler import Reconciler, SyncOutcome
from gitops_ray.render.apps import Application
from gitops_ray.sync import statuswrites
from gitops_ray.sync.history import find, known_ids
from gitops_ray.sync.records import AppRecord, RecordStore
from gitops_ray.sync.request import SyncResult

ROLLBACK_TRIGGER = "rollback"


@dataclass(frozen=True)
class RollbackRequest:
    """Which deployment to go back to, and how long to keep automation off the app."""

    entry_id: int
    now: float
    pause_until: float | None = None  # None: until resumed
    prune: bool = False
    timeout: float = 300.0  # for sync waves, as ``gitops-ray sync --timeout``
    poll: float = 1.0
    by: str = ""


@dataclass(frozen=True)
class RollbackOutcome:
    """The sync of the old revision, the entry it came from, and the pause it set."""

    outcome: SyncOutcome
    entry: Mapping[str, Any]
    pause: Pause | None

    @property
    def result(self) -> SyncResult:
        return self.outcome.result


def target(store: RecordStore, app: str, entry_id: int) -> Mapping[str, Any]:
    """History entry ``entry_id`` of ``app``; a :class:`ConfigError` naming the known ids."""
    status = store.read(app).status
    entry = find(status, entry_id)
    if entry is None or not entry.get("revision"):
        raise ConfigError(f"app {app} has no deployment #{entry_id} in its history "
                          f"(known ids: {known_ids(status)}; see gitops-ray history {app})")
    return entry


def rollback(reconciler: Reconciler, app: Application, request: RollbackRequest
             ) -> RollbackOutcome:
    """Pause automation if the app has any, then sync the entry's revision and mark it."""
    store = reconciler.syncer.store
    entry = target(store, app.name, request.entry_id)
    revision = str(entry["revision"])
    pause = pause_automation(store, app, Pause(since=request.now, until=request.pause_until,
                                               rollback_id=request.entry_id,
                                               revision=revision, by=request.by))
    outcome = reconciler.sync_until_done(app, revision=revision, prune=request.prune,
                                         timeout=request.timeout, poll=request.poll)
    if outcome.unrecorded is None:
        started, fields = outcome.result.started_at, marks(request.entry_id)
        store.update(app.name, lambda r: statuswrites.mark_rollback(r, started, fields))
    return RollbackOutcome(outcome, entry, pause)


def pause_automation(store: RecordStore, app: Application, pause: Pause) -> Pause | None:
    """Record ``pause`` if the app has automated sync (else nothing to pause: ``None``).

    Shared by the CLI and the web page's Rollback button, so both leave the same pause.
    """
    if not app.sync_policy.automated:
        return None
    store.update(app.name, lambda r: statuswrites.pause(r, pause))
    return pause


def marks(entry_id: int) -> dict[str, Any]:
    """The fields that mark a recorded operation as the rollback to ``entry_id``."""
    return {"trigger": ROLLBACK_TRIGGER, "rollbackOf": entry_id}


def resume(store: RecordStore, app: str) -> Pause | None:
    """End the app's pause of automated sync; the pause it ended (``None``: there was none)."""
    ended: list[Pause | None] = [None]

    def change(record: AppRecord) -> None:
        ended[0] = statuswrites.resume(record)

    if store.read(app).app_status.pause is None:
        return None
    store.update(app, change)
    return ended[0]
