"""When may the controller sync an app on its own? Argo CD's auto-sync rules, as a pure function.

The controller refreshes apps all the time (polls, webhooks, watch events); this module is
the one place that decides whether a refresh turns into a write. Keeping it pure (no
clock, no cluster, no threads) is what lets the unit tests walk through every branch and
every backoff step in milliseconds. The rules follow Argo CD's ``autoSync``
(``controller/appcontroller.go`` in https://github.com/argoproj/argo-cd; documented at
https://argo-cd.readthedocs.io/en/stable/user-guide/auto_sync/):

* only apps with ``syncPolicy.automated``, and only when the comparison is ``OutOfSync``;
* nothing when the only differences are extraneous objects and ``prune`` is off, or
  objects a prune already deleted that wait on finalizers (syncing again cannot help);
* never when pruning is on, ``allowEmpty`` is off and git renders nothing ("auto-sync
  will wipe out all resources");
* once per (revision, source spec): a new revision or spec is synced in full. The
  in-cluster pod-shape ConfigMaps an app's render depends on count as part of its spec
  (as Argo CD counts application parameters), so editing the instance-types ConfigMap
  auto-syncs the apps that use it once, and leaves the others alone;
* **self-heal**: after a successful sync to the same revision, drift is reverted for the
  out-of-sync resources only, after ``step(attempts) - (now - lastFinishedAt)`` seconds
  with step 0, 2, 6, 18, 54, 162, 300 s (initial 2 s, factor 3, cap 300 s). The attempt
  count carries over between self-heals of one revision and starts again at 0 on a new
  revision, so a tug-of-war with another controller slows down instead of hot-looping.

Where Argo CD was not a fit we chose, and say so:

* **A failed automated sync is retried with backoff** (default: 5 retries after 5, 10,
  20, 40, 80 s, like the retry Argo CD attaches to every auto-sync operation); after the
  last retry the app is ``BLOCKED`` until the revision or the source spec changes, as in
  Argo CD (which stops after a failed operation to the same revision).
* A last operation that does not record its source spec (a ``gitops-ray sync`` from the
  command line) counts as being for the current spec.
* **A rollback pauses automation** (:mod:`gitops_ray.reconcile.pause`) where Argo CD
  refuses the rollback: while the pause is active the app is ``PAUSED`` (no sync, no
  self-heal, no retry), whatever its sync status.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gitops_ray.reconcile.pause import Pause
from gitops_ray.render.apps import Application, SyncPolicy, short_revision
from gitops_ray.types import OperationPhase, ResourceKey, SyncStatus

_MAX_STEPS = 64


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``delay(0) = 0``, ``delay(n) = initial * factor**(n-1)``, capped."""

    initial: float
    factor: float
    cap: float

    def delay(self, attempts: int) -> float:
        """Seconds to wait (after the last operation finished) before attempt ``attempts + 1``."""
        if attempts <= 0 or self.initial <= 0:
            return 0.0
        delay = self.initial
        for _ in range(min(attempts, _MAX_STEPS) - 1):
            delay *= self.factor
            if delay >= self.cap:
                return self.cap
        return min(delay, self.cap)


SELF_HEAL_BACKOFF = Backoff(initial=2.0, factor=3.0, cap=300.0)
RETRY_BACKOFF = Backoff(initial=5.0, factor=2.0, cap=180.0)
RETRY_LIMIT = 5


@dataclass(frozen=True)
class AutoSyncSettings:
    """The knobs of the policy (settings ``selfHeal.backoff``, ``retry``)."""

    self_heal: Backoff = SELF_HEAL_BACKOFF
    retry: Backoff = RETRY_BACKOFF
    retry_limit: int = RETRY_LIMIT


@dataclass(frozen=True)
class LastOperation:
    """What the policy needs to know about the app's last sync operation."""

    revision: str
    phase: str
    finished_at: float
    source_key: str = ""
    self_heal_attempts: int = 0
    attempt: int = 1

    @property
    def succeeded(self) -> bool:
        return self.phase == OperationPhase.SUCCEEDED

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> LastOperation | None:
        """The last operation of an app record that wrote something; ``None``: none.

        A dry run (an Argo CD operation with ``dryRun``) changed nothing, so the policy
        looks past it, to the newest real operation in the history.
        """
        ops = [status.get("operation"), *(status.get("history") or [])]
        op = next((o for o in ops if isinstance(o, Mapping) and not o.get("dryRun")), None)
        if not isinstance(op, Mapping) or not op.get("revision"):
            return None
        return cls(revision=str(op["revision"]), phase=str(op.get("phase", "")),
                   finished_at=float(op.get("finishedAt") or op.get("startedAt") or 0.0),
                   source_key=str(op.get("sourceKey", "")),
                   self_heal_attempts=int(op.get("selfHealAttempts", 0)),
                   attempt=int(op.get("attempt", 1)))


@dataclass(frozen=True)
class Observed:
    """The result of the latest comparison, reduced to what the policy looks at."""

    revision: str
    source_key: str
    sync_status: SyncStatus
    out_of_sync: frozenset[ResourceKey] = frozenset()
    extraneous: frozenset[ResourceKey] = frozenset()  # live, tracked, no longer in git
    desired_count: int = 1
    deleting: frozenset[ResourceKey] = frozenset()  # extraneous, deletion already accepted


class Action(StrEnum):
    """What the controller should do after a refresh."""

    NONE = "none"  # nothing to do
    SYNC = "sync"  # sync now (all resources, or ``only`` for self-heal)
    WAIT = "wait"  # in backoff: refresh again after ``wait`` seconds
    BLOCKED = "blocked"  # will not sync until the revision or source spec changes
    PAUSED = "paused"  # a rollback paused automation: refresh again when it ends (``wait``)
    WINDOW = "window"  # a sync window closes the app: refresh again when it opens (``wait``)


@dataclass(frozen=True)
class Decision:
    """The policy's answer, with the counters to record on the operation it starts."""

    action: Action
    reason: str
    prune: bool = False
    only: frozenset[ResourceKey] | None = None
    wait: float = 0.0  # seconds (reasons stay free of numbers that change every refresh)
    self_heal_attempts: int = 0
    attempt: int = 1
    requested: bool = False  # an operation somebody asked for (Argo CD's Sync button)

    @property
    def trigger(self) -> str:
        """``operation``, ``self-heal`` (a selective sync of drift) or ``auto-sync``."""
        if self.requested:
            return "operation"
        return "self-heal" if self.only is not None else "auto-sync"


def source_key(app: Application, shapes: str = "") -> str:
    """A short digest of the app's source spec and destination (what "same spec" means).

    ``shapes``: the version of the in-cluster pod shapes its render depends on ("" none).
    """
    spec = repr((app.source, app.destination.namespace) + ((shapes,) if shapes else ()))
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def decide(policy: SyncPolicy, observed: Observed, last: LastOperation | None, *,
           now: float, settings: AutoSyncSettings = AutoSyncSettings(),
           pause: Pause | None = None) -> Decision:
    """Decide whether a refresh that observed ``observed`` should sync (see module doc)."""
    if policy.automated and pause is not None and pause.active(now):
        return Decision(Action.PAUSED, pause.message, wait=pause.remaining(now))
    skip = _precondition(policy, observed)
    if skip is not None:
        return skip
    if last is None or not _same_target(last, observed):
        return Decision(Action.SYNC, f"new revision {short_revision(observed.revision)}",
                        prune=policy.prune)
    if not last.succeeded:
        return _retry(policy, last, now, settings)
    if not policy.self_heal:
        return Decision(Action.NONE, f"already synced to {short_revision(observed.revision)}; "
                                     "selfHeal is off")
    return _self_heal(policy, observed, last, now, settings.self_heal)


def _precondition(policy: SyncPolicy, observed: Observed) -> Decision | None:
    if not policy.automated:
        return Decision(Action.NONE, "automated sync is off")
    if observed.sync_status != SyncStatus.OUT_OF_SYNC:
        return Decision(Action.NONE, f"sync status is {observed.sync_status}")
    if observed.out_of_sync <= observed.deleting:
        return Decision(Action.NONE, "waiting for pruned objects to finish deleting")
    if not policy.prune and observed.out_of_sync <= observed.extraneous:
        return Decision(Action.NONE, "only pruning is needed and automated prune is off")
    if policy.prune and not policy.allow_empty and observed.desired_count == 0:
        return Decision(Action.BLOCKED, "git renders no resources and allowEmpty is off: "
                                        "auto-sync will wipe out all resources")
    return None


def _same_target(last: LastOperation, observed: Observed) -> bool:
    same_spec = not last.source_key or last.source_key == observed.source_key
    return last.revision == observed.revision and same_spec


def _retry(policy: SyncPolicy, last: LastOperation, now: float,
           settings: AutoSyncSettings) -> Decision:
    if last.attempt > settings.retry_limit:
        return Decision(Action.BLOCKED, f"sync to {short_revision(last.revision)} failed "
                                        f"{last.attempt} times; waiting for a new revision")
    wait = settings.retry.delay(last.attempt) - (now - last.finished_at)
    if wait > 0:
        return Decision(Action.WAIT, f"sync failed; retry {last.attempt} of "
                                     f"{settings.retry_limit} after backoff",
                        wait=wait, attempt=last.attempt)
    return Decision(Action.SYNC, f"retry {last.attempt} of {settings.retry_limit}",
                    prune=policy.prune, attempt=last.attempt + 1,
                    self_heal_attempts=last.self_heal_attempts)


def _self_heal(policy: SyncPolicy, observed: Observed, last: LastOperation, now: float,
               backoff: Backoff) -> Decision:
    attempts = last.self_heal_attempts
    wait = backoff.delay(attempts) - (now - last.finished_at)
    if wait > 0:
        return Decision(Action.WAIT, f"drift; self-heal attempt {attempts + 1} after backoff",
                        wait=wait, self_heal_attempts=attempts)
    return Decision(Action.SYNC, f"self-heal attempt {attempts + 1}: "
                                 f"{len(observed.out_of_sync)} resource(s) drifted",
                    prune=policy.prune, only=observed.out_of_sync,
                    self_heal_attempts=attempts + 1)


def operation_fields(decision: Decision, observed: Observed, identity: str) -> dict[str, Any]:
    """What to add to the recorded operation so the next decision can continue from it."""
    return {"automated": True, "trigger": decision.trigger, "sourceKey": observed.source_key,
            "selfHealAttempts": decision.self_heal_attempts, "attempt": decision.attempt,
            "controller": identity}
