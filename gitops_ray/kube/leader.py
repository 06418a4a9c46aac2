"""Leader election on a ``coordination.k8s.io/v1`` Lease: only one controller replica writes.

The algorithm is client-go's (``tools/leaderelection``), written against our own
:class:`~gitops_ray.kube.Kube` client instead of ``kubernetes.leaderelection``. That
library (``LeaseLock`` since kubernetes 37) was the first choice and was set aside
because it:

* cannot release the lease on shutdown, so a rolling update would wait a full lease
  duration for the new pod to take over;
* talks through the *global* default client configuration, not the connection (and the
  request metrics) the rest of the controller uses;
* calls ``sys.exit`` on bad settings and sleeps with ``time.sleep`` in loops that cannot be
  stopped, which makes a clean SIGTERM, and fast tests, impossible.

How it stays safe:

* a candidate takes the lease only when it is free (no holder, as left by
  :meth:`LeaderElector.release`) or when it has seen the same lease record, unchanged,
  for ``leaseDurationSeconds`` on its *own monotonic clock* (never by comparing the
  holder's ``renewTime`` with the local wall clock, so clock skew between nodes does not
  matter);
* every write carries the ``resourceVersion`` it was based on, so two candidates racing
  for an expired lease cannot both win (the loser gets 409 Conflict);
* a leader that cannot renew within ``renew_deadline`` (< lease duration) stops leading
  before anybody else may take over, measured from when its last successful renewal was
  *sent*; a leader that finds the lease held by anybody else stops at once;
* while leading, every write of the process goes through a
  :class:`~gitops_ray.kube.fence.WriteFence` that this elector keeps granted until that
  same deadline, with a term that changes on every acquisition, so a leader that was
  paused past its deadline cannot write even before its renew loop runs again (the
  lease's own writes are exempt, see :func:`~gitops_ray.kube.fence.unfenced`).

A lease namespace that does not exist is created (the controller needs it for its app
records anyway); when RBAC forbids that, the error says which namespace and what to do,
is logged at warning level and stays in :attr:`LeaderElector.last_error` for readiness.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.errors import ConfigError
from gitops_ray.kube.client import Kube
from gitops_ray.kube.errors import Conflict, KubeError, NotFound
from gitops_ray.kube.fence import NO_TERM, WriteFence, unfenced
from gitops_ray.types import Manifest

LEASE_API = "coordination.k8s.io/v1"
JITTER_FACTOR = 1.2  # client-go: renewDeadline must exceed retryPeriod * 1.2
log = structlog.get_logger(__name__)
Clock = Callable[[], float]


@dataclass(frozen=True)
class LeaseSettings:
    """Which Lease, who we are, and client-go's three durations (seconds)."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    annotations: tuple[tuple[str, str], ...] = ()  # written on the lease while we lead
    labels: tuple[tuple[str, str], ...] = ()  # always on the lease (listed by label)

    def __post_init__(self) -> None:
        if not (self.name and self.namespace and self.identity):
            raise ConfigError("leader election needs a lease name, namespace and identity")
        if self.retry_period <= 0:
            raise ConfigError("leaderElection.retryPeriod must be positive")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ConfigError("leaderElection.renewDeadline must exceed 1.2 x retryPeriod")
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError("leaderElection.leaseDuration must exceed renewDeadline")


def micro_time(wall: float) -> str:
    """A Kubernetes ``MicroTime`` string for a POSIX timestamp."""
    moment = datetime.datetime.fromtimestamp(wall, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def next_spec(current: dict[str, Any], identity: str, duration: float,
              wall: float) -> dict[str, Any]:
    """The lease spec to write when ``identity`` acquires or renews (pure)."""
    now = micro_time(wall)
    ours = current.get("holderIdentity") == identity
    transitions = int(current.get("leaseTransitions") or 0)
    return {"holderIdentity": identity, "leaseDurationSeconds": max(1, math.ceil(duration)),
            "acquireTime": current.get("acquireTime") if ours and current.get("acquireTime")
            else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or not current else transitions + 1}


class LeaderElector:
    """Campaigns for one Lease and keeps renewing it while leading.

    ``on_started`` runs (in the thread calling :meth:`run`) when we become the leader;
    ``on_stopped`` when we stop leading, whether the lease was lost or :meth:`run` was
    asked to stop. Both must return promptly; ``on_stopped`` must make sure nothing is
    written any more before it returns, because the lease may be taken over right after.
    :attr:`fence` is what makes that hold for a paused process too: install it on the
    :class:`Kube` client the writers use.
    """

    def __init__(self, kube: Kube, settings: LeaseSettings, *,
                 on_started: Callable[[], None], on_stopped: Callable[[], None],
                 fence: WriteFence | None = None,
                 clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        self.kube = kube
        self.settings = settings
        self.fence = fence or WriteFence(clock=clock)
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._clock = clock
        self._wall = wall
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._observed_annotations: dict[str, str] = {}
        self._leading = threading.Event()
        self._term = NO_TERM
        self._sent_at = 0.0  # when the last successful acquire/renew was sent (monotonic)
        self._superseded = ""  # while leading: who holds the lease instead of us
        self._last_error: str | None = None
        self.takeover: dict[str, float] = {}  # how late the last acquisition came (a log's)

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def term(self) -> int:
        """How many times this elector acquired the lease (a new term each time)."""
        return self._term

    @property
    def last_error(self) -> str | None:
        """Why the last attempt to take or renew the lease failed (``None``: it did not).

        Being a follower is not an error; an API error (e.g. the lease namespace is
        missing and cannot be created) is, and a readiness probe may report it.
        """
        return self._last_error

    def current_leader(self) -> tuple[str, dict[str, str]]:
        """The holder identity and lease annotations as last seen (``""`` when free)."""
        holder = (self._observed or {}).get("holderIdentity") or ""
        return str(holder), dict(self._observed_annotations) if holder else {}

    # -- one step ----------------------------------------------------------------------

    def try_acquire_or_renew(self, listed: tuple[Manifest | None] | None = None) -> bool:
        """One attempt to take or renew the lease; ``True`` when we hold it afterwards.

        ``listed``: the lease as the caller just listed it (``(None,)``: it does not
        exist), which saves the GET; its ``resourceVersion`` still guards the write.
        """
        sent = self._clock()
        try:
            with unfenced():
                held = self._acquire_or_renew(listed)
        except KubeError as e:
            self._failed(e)
            return False
        self._last_error = None
        if held:
            self._sent_at = sent
        return held

    def _acquire_or_renew(self, listed: tuple[Manifest | None] | None) -> bool:
        s = self.settings
        lease = listed[0] if listed is not None else self.kube.get(
            LEASE_API, "Lease", name=s.name, namespace=s.namespace)
        if lease is None and self.is_leader:
            self._superseded = "(lease deleted)"
            return False
        if lease is None:
            return self._create()
        current = lease.get("spec") or {}
        self._observe(current, lease)
        if self.is_leader and current.get("holderIdentity") != s.identity:
            self._superseded = str(current.get("holderIdentity") or "(released)")
            return False  # somebody else led in between: this term is over
        if self._held_by_other(current):
            return False
        return self._write(lease, next_spec(current, s.identity, s.lease_duration,
                                            self._wall()))

    def _failed(self, error: KubeError) -> None:
        s = self.settings
        if isinstance(error, Conflict):  # another candidate won the race: routine
            log.info("lease_not_acquired", lease=s.name, error=str(error))
            return
        repeated, self._last_error = self._last_error == str(error), str(error)
        report = log.info if repeated else log.warning
        report("lease_not_acquired", lease=s.name, namespace=s.namespace, error=str(error))

    def _observe(self, spec: dict[str, Any], lease: Manifest,
                 seen_at: float | None = None) -> None:
        self._observed_annotations = dict((lease.get("metadata") or {}).get("annotations")
                                          or {})
        if spec != self._observed:
            self._observed = dict(spec)
            self._observed_at = self._clock() if seen_at is None else seen_at
        elif seen_at is not None and seen_at < self._observed_at:
            self._observed_at = seen_at  # seen earlier elsewhere (a watch): still after the write

    def _held_by_other(self, spec: dict[str, Any]) -> bool:
        expires = self._others_expiry(spec)
        return expires is not None and expires > self._clock()

    def _others_expiry(self, spec: dict[str, Any]) -> float | None:
        """When another holder's lease as observed expires (or expired) by our clock."""
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.settings.identity:
            return None
        return self._observed_at + float(spec.get("leaseDurationSeconds")
                                         or self.settings.lease_duration)

    def _create(self) -> bool:
        s = self.settings
        spec = next_spec({}, s.identity, s.lease_duration, self._wall())
        body = {"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace,
                             "labels": dict(s.labels), "annotations": dict(s.annotations)},
                "spec": spec}
        try:
            created = self.kube.create(body, field_manager=FIELD_MANAGER)
        except NotFound:  # the namespace does not exist (yet)
            self._create_namespace()
            created = self.kube.create(body, field_manager=FIELD_MANAGER)
        self._observe(spec, created)
        return True

    def _create_namespace(self) -> None:
        ns = self.settings.namespace
        try:
            self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                             field_manager=FIELD_MANAGER)
        except Conflict:
            return  # created concurrently (by the other replica): fine
        except KubeError as e:
            raise type(e)(
                f"lease namespace {ns!r} does not exist and could not be created ({e}); "
                f"create it (kubectl create namespace {ns}), allow this controller to create "
                "namespaces, or set leaderElection.namespace to an existing namespace",
                status=e.status, reason=e.reason) from e
        log.info("lease_namespace_created", namespace=ns)

    def _write(self, lease: Manifest, spec: dict[str, Any], *, ours: bool = True) -> bool:
        annotations = dict(self.settings.annotations) if ours else {}
        body = {"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": self.settings.name, "namespace": self.settings.namespace,
                             "resourceVersion": lease["metadata"]["resourceVersion"],
                             "labels": dict(self.settings.labels),
                             "annotations": annotations},
                "spec": spec}
        written = self.kube.replace(body, field_manager=FIELD_MANAGER)
        self._observe(written.get("spec") or spec, written)
        return True

    # -- loops -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> bool:
        """Campaign, then lead until ``stop`` is set or the lease is lost.

        Returns ``True`` when leadership was *lost* (the caller should exit, as
        client-go's users do), ``False`` when stopped on request.
        """
        if not self._campaign(stop):
            return False
        self._term += 1
        self._superseded = ""
        self._grant()
        log.info("leader_elected", lease=self.settings.name, identity=self.settings.identity,
                 term=self._term)
        self._leading.set()
        lost = True
        try:
            self._on_started()
            lost = self._renew(stop)
        finally:
            self._stop_leading(lost)
        return lost

    def _grant(self) -> None:
        self.fence.grant(self._term, self._sent_at + self.settings.renew_deadline)

    def _stop_leading(self, lost: bool) -> None:
        """Revoke the fence (before ``on_stopped`` when lost: not one more write)."""
        self._leading.clear()
        if lost:
            self.fence.revoke()
            log.error("leader_lease_lost", lease=self.settings.name,
                      identity=self.settings.identity, term=self._term,
                      reason=f"held by {self._superseded}" if self._superseded
                      else "no renewal within renewDeadline (paused or API unreachable)")
        self._on_stopped()  # on a requested stop, a running sync may finish in the term
        self.fence.revoke()

    def _campaign(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            stop.wait(self.settings.retry_period)
        return False

    def _renew(self, stop: threading.Event) -> bool:
        """Renew every ``retry_period``; ``True`` when the lease is (or may be) lost.

        The wait never outlasts the fence, so a leader that stops renewing (or was
        paused) stops leading as soon as its own clock says the lease may have expired.
        """
        while not stop.wait(min(self.settings.retry_period, self.fence.remaining())):
            if self.fence.term() != self._term:
                return True  # no successful renewal sent within renewDeadline
            if self.try_acquire_or_renew():
                self._grant()
            elif self._superseded:
                return True
        return False

    # -- held step by step (a shard) -------------------------------------------------

    def keep(self, listed: tuple[Manifest | None] | None = None) -> bool:
        """One step of holding the lease without :meth:`run`'s loop; whether it is held.

        For a caller that holds many leases from one loop (the shards of
        :mod:`gitops_ray.runtime.shards`): takes or renews the lease, grants :attr:`fence`
        (a new term on each acquisition, as :meth:`run`), and stops holding, fence revoked
        first, when the lease was taken over or no renewal succeeded within
        renewDeadline. The caller must call it at least every ``retry_period``.
        """
        if self.is_leader and self.fence.term() != self._term:
            self._stop_leading(True)  # paused or unreachable past the deadline
        previous = self._previous_holder()
        if self.try_acquire_or_renew(listed):
            if not self.is_leader:
                self._term += 1
                self.takeover = self._lateness(previous)
                self._superseded = ""
                self._leading.set()
            self._grant()
        elif self.is_leader and self._superseded:
            self._stop_leading(True)
        return self.is_leader

    def observe(self, lease: Manifest | None, seen_at: float | None = None) -> None:
        """Note the lease as listed, without writing (so its expiry is timed from then).

        A shard's Lease is observed on every step, so when its holder dies it can be
        taken as soon as it may be, not a lease duration after we started to care.
        ``seen_at``: when (our clock) this very spec was first seen, if earlier than now
        (a watch saw the renewal before the step listed it); never before it was written,
        so the expiry stays on the safe side of the holder's own deadline.
        """
        if lease is not None:
            self._observe(lease.get("spec") or {}, lease, seen_at)

    def expiry(self) -> float | None:
        """When the lease as last observed expires by our clock, if another holds it."""
        spec = self._observed or {}
        return self._others_expiry(spec) if self._held_by_other(spec) else None

    def _previous_holder(self) -> tuple[float, str] | None:
        """Another holder's lease as observed: its expiry (our clock), its ``renewTime``."""
        spec = self._observed or {}
        expires = self._others_expiry(spec)
        return None if expires is None else (expires, str(spec.get("renewTime") or ""))

    def _lateness(self, previous: tuple[float, str] | None) -> dict[str, float]:
        """How late a takeover came, for the log (seconds).

        After the expiry by our clock, and after the holder's last renewal by its
        ``renewTime`` (the two clocks' skew included: a diagnostic only).
        """
        if previous is None:
            return {}
        expired_at, renewed = previous
        late = {"after_expiry_s": round(self._clock() - expired_at, 3)}
        try:
            wall = datetime.datetime.fromisoformat(renewed).timestamp()
        except ValueError:
            return late
        return late | {"after_renewal_s": round(self._wall() - wall, 3)}

    def release(self) -> bool:
        """Give the lease up (empty holder) so another replica can take over at once."""
        s = self.settings
        self.fence.revoke()
        self._leading.clear()
        try:
            with unfenced():
                lease = self.kube.get(LEASE_API, "Lease", name=s.name, namespace=s.namespace)
                spec = (lease or {}).get("spec") or {}
                if lease is None or spec.get("holderIdentity") != s.identity:
                    return False
                now = micro_time(self._wall())
                self._write(lease, {**spec, "holderIdentity": None,
                                    "leaseDurationSeconds": 1, "acquireTime": now,
                                    "renewTime": now}, ours=False)
        except KubeError as e:
            log.warning("lease_not_released", lease=s.name, error=str(e))
            return False
        log.info("leader_lease_released", lease=s.name, identity=s.identity)
        return True


__all__ = ["LeaderElector", "LeaseSettings", "micro_time", "next_spec"]
