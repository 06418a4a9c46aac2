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
  before anybody else may take over.
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

from gitops_ray.errors import ConfigError
from gitops_ray.kube.client import Kube
from gitops_ray.kube.errors import KubeError
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
    """

    def __init__(self, kube: Kube, settings: LeaseSettings, *,
                 on_started: Callable[[], None], on_stopped: Callable[[], None],
                 clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        self.kube = kube
        self.settings = settings
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._clock = clock
        self._wall = wall
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._observed_annotations: dict[str, str] = {}
        self._leading = threading.Event()

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def current_leader(self) -> tuple[str, dict[str, str]]:
        """The holder identity and lease annotations as last seen (``""`` when free)."""
        holder = (self._observed or {}).get("holderIdentity") or ""
        return str(holder), dict(self._observed_annotations) if holder else {}

    # -- one step ----------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or renew the lease; ``True`` when we hold it afterwards."""
        s = self.settings
        try:
            lease = self.kube.get(LEASE_API, "Lease", s.name, s.namespace)
            if lease is None:
                return self._create()
            current = lease.get("spec") or {}
            self._observe(current, lease)
            if self._held_by_other(current):
                return False
            return self._write(lease, next_spec(current, s.identity, s.lease_duration,
                                                self._wall()))
        except KubeError as e:
            log.info("lease_not_acquired", lease=s.name, error=str(e))
            return False

    def _observe(self, spec: dict[str, Any], lease: Manifest) -> None:
        self._observed_annotations = dict((lease.get("metadata") or {}).get("annotations")
                                          or {})
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), self._clock()

    def _held_by_other(self, spec: dict[str, Any]) -> bool:
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.settings.identity:
            return False
        duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration)
        return self._observed_at + duration > self._clock()

    def _create(self) -> bool:
        s = self.settings
        spec = next_spec({}, s.identity, s.lease_duration, self._wall())
        body = {"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace,
                             "annotations": dict(s.annotations)},
                "spec": spec}
        self._observe(spec, self.kube.create(body, field_manager="gitops-ray"))
        return True

    def _write(self, lease: Manifest, spec: dict[str, Any], *, ours: bool = True) -> bool:
        annotations = dict(self.settings.annotations) if ours else {}
        body = {"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": self.settings.name, "namespace": self.settings.namespace,
                             "resourceVersion": lease["metadata"]["resourceVersion"],
                             "annotations": annotations},
                "spec": spec}
        written = self.kube.replace(body, field_manager="gitops-ray")
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
        log.info("leader_elected", lease=self.settings.name, identity=self.settings.identity)
        self._leading.set()
        try:
            self._on_started()
            lost = self._renew(stop)
        finally:
            self._leading.clear()
            self._on_stopped()
        if lost:
            log.error("leader_lease_lost", lease=self.settings.name,
                      identity=self.settings.identity)
        return lost

    def _campaign(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            stop.wait(self.settings.retry_period)
        return False

    def _renew(self, stop: threading.Event) -> bool:
        last_renewed = self._clock()
        while not stop.wait(self.settings.retry_period):
            if self.try_acquire_or_renew():
                last_renewed = self._clock()
            elif self._clock() - last_renewed >= self.settings.renew_deadline:
                return True
        return False

    def release(self) -> bool:
        """Give the lease up (empty holder) so another replica can take over at once."""
        s = self.settings
        try:
            lease = self.kube.get(LEASE_API, "Lease", s.name, s.namespace)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != s.identity:
                return False
            now = micro_time(self._wall())
            self._write(lease, {**spec, "holderIdentity": None, "leaseDurationSeconds": 1,
                                "acquireTime": now, "renewTime": now}, ours=False)
        except KubeError as e:
            log.warning("lease_not_released", lease=s.name, error=str(e))
            return False
        log.info("leader_lease_released", lease=s.name, identity=s.identity)
        return True


__all__ = ["LeaderElector", "LeaseSettings", "micro_time", "next_spec"]
