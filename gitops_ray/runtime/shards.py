"""Sharding: several controller replicas split the apps, coordinated by Leases only.

Why apps and not clusters (Argo CD shards its controller by destination cluster): the
fleet this is built for may keep 10,000 RayClusters in *one* cluster, and a shard per
cluster cannot split one big cluster. An app is the unit every refresh, sync and record
already has, so it is the unit of ownership.

How (no other coordination than ``coordination.k8s.io/v1`` Leases):

* there is a fixed number of shards ``S`` (``sharding.shards``); an app's shard is a
  stable hash of its name mod ``S`` (:func:`shard_of`, BLAKE2b, never Python's
  per-process ``hash``), so every replica computes the same one;
* each shard is one Lease ``<leaseName>-shard-<i>``, held through a
  :class:`~gitops_ray.kube.leader.LeaderElector` step by step
  (:meth:`~gitops_ray.kube.leader.LeaderElector.keep`): the same take-when-free-or-
  expired rule, ``resourceVersion`` preconditions and monotonic-clock expiry as the single
  leader Lease, and its own :class:`~gitops_ray.kube.fence.WriteFence` (a term per
  acquisition, a deadline of renewDeadline after the last renewal was sent);
* each replica also renews a membership Lease ``<leaseName>-member-<identity>`` carrying
  its advertised webhook URL, so one LIST of the group's Leases (by label) shows the live
  members, who holds which shard, and where to forward a webhook;
* the *desired* owner of shard ``i`` is the live member with the highest rendezvous hash
  of ``(i, member)`` (:func:`owner`): adding an N-th replica moves about ``S/N`` shards
  (only those it now wins), removing one moves only its own;
* a replica takes a shard it is the desired owner of as soon as the Lease is free,
  released or expired by its own clock; one it no longer should own is first closed to
  new work, then released once its running writes finished (bounded by renewDeadline;
  the Lease is renewed meanwhile), so the next owner takes it at once. A member whose
  Lease expired (killed, paused, partitioned) is no longer live; its shards' Leases
  expire too and go to their new desired owners at once: a step is planned for the
  moment a member's (or a shard's) Lease expires by our clock, not left to the next
  retryPeriod;
* expiry is timed from when a renewal was first *seen*, as client-go's leader election
  does (never from the ``renewTime`` another machine's clock wrote). The step LISTs every
  retryPeriod, so it would see a renewal up to a retryPeriod late and time a dead
  replica's expiry that much too late; a watch of the group's Leases
  (:class:`~gitops_ray.runtime.watches.KindWatch`) notes each renewal as it happens, and
  the step times expiries from the earlier of the two sightings of the same record. It
  only ever moves an expiry earlier to a moment after the renewal was written, so it stays
  on the safe side of the holder's own renewDeadline; without the watch (not allowed by
  RBAC, or broken) the LIST's timing applies alone;
* each of another replica's apps has one *successor*, the replica that would own its
  shard if the holder went (the rendezvous owner among the other live members); only it
  prepares the app on standby, so a takeover finds it rendered and compared;
* a live member not seen renewing for :data:`SILENT_AFTER` retryPeriods is *silent*: it
  renews every retryPeriod, so it is most likely dead, though its Leases stay its own
  until they expire. ``on_silent(member)`` tells the controller at once (a step is
  planned for that moment), whose successors then finish preparing its apps, dry runs
  included, in the rest of the lease duration instead of on the takeover's critical
  path. A member that renews again is no longer silent; nothing is written either way.

Membership Leases of replicas gone for good (a pod's identity changes on every restart)
are deleted by one janitor, the live member with the lowest identity: a released one at
once, an expired one after :data:`STALE_LEASES` lease durations, each with a
``resourceVersion`` precondition, so the one LIST per step stays small.

Safety does not depend on the replicas agreeing on the members: two replicas that both
believe they should own a shard still cannot both hold its Lease, and a refresh writes
only inside its shard's fence (:meth:`ShardCoordinator.scope`), so a replica that was
paused past its deadline writes nothing when it resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import structlog

from gitops_ray.kube import Kube, KubeError
from gitops_ray.kube.fence import WriteFence, unfenced
from gitops_ray.kube.leader import LEASE_API, LeaderElector, LeaseSettings
from gitops_ray.runtime.kindwatch import KindWatch, WatchOptions
from gitops_ray.settings import MAX_SHARDS
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)
GROUP_LABEL = "gitops-ray.io/lease-group"
ROLE_LABEL = "gitops-ray.io/lease-role"
WEBHOOK_URL_ANNOTATION = "gitops-ray.io/webhook-url"
STALE_LEASES = 4  # an expired member Lease is deleted after this many lease durations
EXPIRY_MARGIN = 0.05  # seconds: a step planned at a member's expiry runs this much after
RENEWALS_IN_FLIGHT = 8
"""Shard Leases renewed at once in a step. One after the other, a step of a replica holding
six shards took over renewDeadline on a home API server busy with a fleet's cold sync
(3 x 1,000: 23 shard Leases lost in its first minute), so every sync of those shards was
aborted and started again."""
SILENT_AFTER = 2  # retryPeriods without a renewal seen: a member is silent (module doc)
LEASE_WATCH_TIMEOUT = 60  # seconds: the server ends the Lease watch then, and it resumes
Clock = Callable[[], float]


# -- pure: who should own what ---------------------------------------------------------

def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(app: str, shards: int) -> int:
    """The shard of an app: the same on every replica and in every process."""
    return _digest(app) % shards


def owner(shard: int, members: Iterable[str]) -> str | None:
    """The member that should own ``shard``: highest rendezvous hash (``None``: nobody)."""
    return max(members, key=lambda m: (_digest(f"{shard}/{m}"), m), default=None)


def assignment(shards: int, members: Collection[str]) -> dict[int, str]:
    """Every shard's desired owner among ``members`` (empty when there are none)."""
    if not members:
        return {}
    return {i: str(owner(i, members)) for i in range(shards)}


def lease_name(base: str, role: str, key: str) -> str:
    """``<base>-<role>-<key>`` as a valid object name (an identity may hold ``_``)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")
    if clean != key:  # keep distinct identities distinct after cleaning
        clean = f"{clean[:40]}-{_digest(key):016x}".strip("-")
    return f"{base}-{role}-{clean}"[:253].rstrip("-")


# -- the Leases ------------------------------------------------------------------------

@dataclass(frozen=True)
class View:
    """The group as last listed: live members (identity -> webhook URL), shard holders."""

    members: Mapping[str, str]
    holders: Mapping[int, str]


class ShardCoordinator:
    """Holds this replica's membership Lease and the shard Leases it should own.

    ``adopt(shards)`` runs (in :meth:`run`'s thread) right after shards were taken and
    before their apps count as owned: the controller loads their records there;
    ``on_gained(shards)`` once they do (their apps are queued), ``on_lost(shards)`` after
    shards were released or lost. ``busy(i)``
    says whether a write of shard ``i`` is still running (a shard is released only when
    not, or after renewDeadline). ``on_heir(shards)``: this replica became the successor
    of these shards at the last step (their apps are to be prepared on standby).
    """

    def __init__(self, kube: Kube, lease: LeaseSettings, *, shards: int, advertise_url: str,
                 adopt: Callable[[frozenset[int]], None],
                 on_gained: Callable[[frozenset[int]], None],
                 on_lost: Callable[[frozenset[int]], None],
                 busy: Callable[[int], bool], clock: Clock = time.monotonic,
                 on_silent: Callable[[str], None] | None = None,
                 on_heir: Callable[[frozenset[int]], None] | None = None) -> None:
        self.kube, self.lease, self.shards = kube, lease, shards
        self.identity = lease.identity
        self._adopt, self._on_gained = adopt, on_gained
        self._on_silent, self._on_heir = on_silent, on_heir
        self._heir: frozenset[int] = frozenset()  # shards we were successor of, last step
        self._silent: frozenset[str] = frozenset()  # live members silent at the last step
        self._on_lost, self._busy = on_lost, busy
        self._clock = clock
        self._url = advertise_url
        group = ((GROUP_LABEL, lease.name),)
        url = ((WEBHOOK_URL_ANNOTATION, advertise_url),) if advertise_url else ()
        self.member = self._elector(lease_name(lease.name, "member", lease.identity),
                                    (*group, (ROLE_LABEL, "member")), url)
        self.electors = [self._elector(lease_name(lease.name, "shard", str(i)),
                                       (*group, (ROLE_LABEL, "shard")), ())
                         for i in range(shards)]
        self._lock = threading.Lock()
        self._ready: set[int] = set()  # held and adopted: their apps are ours
        self._releasing: dict[int, float] = {}  # shard -> when we stopped taking work
        self._terms: dict[int, int] = {}  # held shard -> its elector's term at the last report
        self._seen: dict[str, tuple[str, float]] = {}  # member lease -> (record, since)
        self._witnessed: dict[str, tuple[str, float]] = {}  # lease -> (record, first seen)
        self._watch_stop = threading.Event()
        self._watch = KindWatch(
            kube, LEASE_API, "Lease", lease.namespace, on_event=self._witness,
            stop=self._watch_stop, options=WatchOptions(
                label_selector=f"{GROUP_LABEL}={lease.name}", timeout=LEASE_WATCH_TIMEOUT))
        self._expiries: list[float] = []  # when others' member and shard Leases expire, unrenewed
        self.view = View({}, {})
        self.last_error: str | None = None
        self._renewals = ThreadPoolExecutor(min(RENEWALS_IN_FLIGHT, shards),
                                            thread_name_prefix="shard-lease")
        self._step_started = 0.0

    def _elector(self, name: str, labels: tuple[tuple[str, str], ...],
                 annotations: tuple[tuple[str, str], ...]) -> LeaderElector:
        settings = replace(self.lease, name=name, labels=labels, annotations=annotations)
        return LeaderElector(self.kube, settings, on_started=_nothing, on_stopped=_nothing,
                             fence=WriteFence(clock=self._clock), clock=self._clock)

    # -- what the controller asks ------------------------------------------------------

    def shard_of(self, app: str) -> int:
        return shard_of(app, self.shards)

    def owns(self, app: str) -> bool:
        """Whether this replica may work on ``app`` now (its shard held, adopted, kept)."""
        shard = self.shard_of(app)
        with self._lock:
            return shard in self._ready and shard not in self._releasing

    def term(self, app: str) -> int:
        """The term of the app's shard fence, if valid now (else ``NO_TERM``)."""
        return self.electors[self.shard_of(app)].fence.term()

    def scope(self, app: str) -> contextlib.AbstractContextManager[bool]:
        """Capture the app's shard fence for the writes made inside (kube.fence)."""
        return self.electors[self.shard_of(app)].fence.scope()

    def held(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._ready)

    def owner_of(self, app: str, view: View | None = None) -> tuple[str, str]:
        """Who holds the app's shard (as last listed, or in ``view``); its webhook URL."""
        view = view or self.view
        holder = view.holders.get(self.shard_of(app), "")
        return holder, view.members.get(holder, "")

    def successor(self, app: str) -> bool:
        """Whether this replica takes the app's shard over if its holder goes (last view).

        The desired owner once the holder is no longer a live member: with rendezvous
        hashing every replica computes the same one, so each of another replica's apps has
        exactly one standby replica (which prepares it ahead, see the controller).
        """
        return self._successor(self.shard_of(app), self.view)

    def _successor(self, shard: int, view: View) -> bool:
        holder = view.holders.get(shard, "")
        return owner(shard, [m for m in view.members if m != holder]) == self.identity

    def _report_heir(self) -> None:
        """Tell ``on_heir`` of the shards this replica became the successor of.

        Why: a standby pass is asked for by a push or a watch event and, when it runs,
        does nothing unless this replica is the app's successor *then*. A view that
        briefly said otherwise (our own membership renewal came late on a loaded
        machine, a member looked expired, a shard was changing hands) dropped the pass,
        and nothing asked again: the takeover found the app unprepared (the flake of
        tests/integration/test_sharding.py, issue 35). A replica that joins becomes the
        successor of apps it never prepared, too.
        """
        heir = frozenset(s for s in range(self.shards) if self._successor(s, self.view))
        new, self._heir = heir - self._heir, heir
        if new and self._on_heir is not None:
            self._on_heir(new)

    def silent(self, member: str) -> bool:
        """Whether ``member`` was silent at the last step (module doc)."""
        return member in self._silent

    def fresh_view(self) -> View:
        """The group as the API server says now (one LIST); the last view if it fails.

        For a webhook: the view of the last step may be a retryPeriod old, and a delivery
        forwarded by it can miss a shard that just changed hands.
        """
        try:
            listed, _ = self.kube.list(LEASE_API, "Lease", self.lease.namespace,
                                       label_selector=f"{GROUP_LABEL}={self.lease.name}")
        except KubeError as e:
            log.warning("shard_leases_not_listed", error=str(e))
            return self.view
        leases = {str(item["metadata"]["name"]): item for item in listed}
        return View(member_urls(leases.values()), self._holders(leases))

    # -- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """One :meth:`step` every retryPeriod until ``stop``.

        The caller then drains the controller's writes and calls :meth:`release_all`.
        The group's Lease watch runs meanwhile, in its own thread (module doc).
        """
        self.start_watching()
        try:
            while not stop.is_set():
                try:
                    self.step()
                except Exception:  # a bug in one step must not end the others' renewals
                    log.exception("shard_step_crashed", identity=self.identity)
                stop.wait(self.next_step_in())
        finally:
            self.stop_watching()

    def start_watching(self) -> None:
        """Start the group's Lease watch (:meth:`run` does; a test stepping by hand may)."""
        threading.Thread(target=self._watch.run, name="watch-shard-leases",
                         daemon=True).start()

    def stop_watching(self) -> None:
        self._watch_stop.set()

    def _witness(self, kind: str, lease: Manifest) -> None:
        """The watch's handler: note when each Lease record was first seen (our clock)."""
        name = str((lease.get("metadata") or {}).get("name") or "")
        now = self._clock()
        with self._lock:
            if kind == "DELETED":
                self._witnessed.pop(name, None)
                return
            record = _record(lease)
            if self._witnessed.get(name, ("", now))[0] != record:
                self._witnessed[name] = (record, now)

    def first_seen(self, name: str, lease: Manifest) -> float | None:
        """When the watch first saw this very record of the Lease (``None``: it did not)."""
        with self._lock:
            record, at = self._witnessed.get(name, ("", 0.0))
        return at if record == _record(lease) else None

    def next_step_in(self) -> float:
        """Seconds to the next step: a retryPeriod, or less if a member expires sooner.

        Why: a dead member's shards may be taken the moment its Lease expires by our
        clock; waiting for the next regular step would add up to a retryPeriod to every
        failover. The step right after the expiry takes them (:data:`EXPIRY_MARGIN` late,
        so the expiry has passed by then).
        """
        now = self._clock()
        soonest = min(self._expiries, default=now + self.lease.retry_period)
        return max(EXPIRY_MARGIN, min(self.lease.retry_period, soonest - now + EXPIRY_MARGIN))

    def step(self) -> None:
        """List the group's Leases once, renew membership, take/renew/release shards."""
        self._step_started = self._clock()
        try:
            listed, _ = self.kube.list(LEASE_API, "Lease", self.lease.namespace,
                                       label_selector=f"{GROUP_LABEL}={self.lease.name}")
            self.last_error = None
        except KubeError as e:
            self.last_error = f"leases not listed: {e}"
            log.warning("shard_leases_not_listed", error=str(e))
            self._renew_blind()
            return
        leases = {str(item["metadata"]["name"]): item for item in listed}
        self.member.keep((leases.get(self.member.settings.name),))
        members = self._live_members(leases)
        if members and min(members) == self.identity:
            self._sweep(leases)
        before = self.held()
        list(self._renewals.map(  # at once: one slow renewal must not delay the others'
            lambda shard: self._step_shard(shard, self.electors[shard],
                                           leases.get(self.electors[shard].settings.name),
                                           members),
            range(self.shards)))
        self._expiries += [t for t in (e.expiry() for e in self.electors) if t is not None]
        self.view = View(members, self._holders(leases))
        self._report(before)
        self._report_silent(leases, members)
        self._report_heir()

    def _renew_blind(self) -> None:
        """The LIST failed: renew what we hold, at once (each fails or expires alone)."""
        before = self.held()
        self.member.keep()
        list(self._renewals.map(LeaderElector.keep,
                                [e for e in self.electors if e.is_leader]))
        self._report(before)

    def _step_shard(self, shard: int, elector: LeaderElector, lease: Manifest | None,
                    members: Mapping[str, str]) -> None:
        desired = owner(shard, members)
        if lease is not None and not elector.is_leader:
            elector.observe(lease, self.first_seen(elector.settings.name, lease))
        if desired == self.identity and shard not in self._releasing:
            elector.keep((lease,))
        elif elector.is_leader:
            self._hand_over(shard, elector, lease)
        else:
            elector.observe(lease)

    def _hand_over(self, shard: int, elector: LeaderElector, lease: Manifest | None) -> None:
        """Stop taking work on the shard; release it once idle (or after renewDeadline)."""
        now = self._clock()
        with self._lock:
            since = self._releasing.setdefault(shard, now)
        if self._busy(shard) and now - since < self.lease.renew_deadline:
            elector.keep((lease,))  # a running sync may finish within its term
            return
        elector.release()
        with self._lock:
            self._releasing.pop(shard, None)
        log.info("shard_released", shard=shard, identity=self.identity)

    def _report_silent(self, leases: Mapping[str, Manifest], members: Mapping[str, str]
                       ) -> None:
        """Note the live members now silent; tell ``on_silent`` of each new one.

        A step is planned for the moment a member that is not silent yet would be.
        """
        now, quiet = self._clock(), SILENT_AFTER * self.lease.retry_period
        silent, due = set(), []
        for name, lease in leases.items():
            holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
            if holder not in members or holder == self.identity or name not in self._seen:
                continue
            since = self._seen[name][1]
            if now - since > quiet:
                silent.add(holder)
            else:
                due.append(since + quiet)
        self._expiries += due
        new, self._silent = silent - self._silent, frozenset(silent)
        for member in sorted(new):
            if self._on_silent is not None:
                self._on_silent(member)

    def _live_members(self, leases: Mapping[str, Manifest]) -> dict[str, str]:
        """Each live member's webhook URL (by identity): its Lease has not expired by our clock."""
        now, live = self._clock(), {}
        self._expiries = []
        for name, lease in leases.items():
            labels = (lease.get("metadata") or {}).get("labels") or {}
            if labels.get(ROLE_LABEL) != "member":
                continue
            spec = lease.get("spec") or {}
            record, witnessed = _record(lease), self.first_seen(name, lease)
            seen, since = self._seen.get(name, ("", now))
            since = since if seen == record else now
            self._seen[name] = (record, since if witnessed is None else min(since, witnessed))
            holder = str(spec.get("holderIdentity") or "")
            duration = float(spec.get("leaseDurationSeconds") or self.lease.lease_duration)
            ours = holder == self.identity and self.member.is_leader
            if holder and (ours or self._seen[name][1] + duration > now):
                annotations = (lease.get("metadata") or {}).get("annotations") or {}
                live[holder] = str(annotations.get(WEBHOOK_URL_ANNOTATION, ""))
                if not ours:
                    self._expiries.append(self._seen[name][1] + duration)
        for gone in set(self._seen) - set(leases):
            del self._seen[gone]
        if self.member.is_leader:  # also when created in this very step (not listed yet)
            live[self.identity] = self._url
        return live

    def _sweep(self, leases: Mapping[str, Manifest]) -> None:
        """Delete member Leases released, or expired for STALE_LEASES lease durations."""
        now = self._clock()
        for name, lease in leases.items():
            labels = (lease.get("metadata") or {}).get("labels") or {}
            if labels.get(ROLE_LABEL) != "member" or name == self.member.settings.name:
                continue
            spec = lease.get("spec") or {}
            duration = float(spec.get("leaseDurationSeconds") or self.lease.lease_duration)
            since = self._seen.get(name, ("", now))[1]
            if spec.get("holderIdentity") and now - since < STALE_LEASES * duration:
                continue
            try:
                with unfenced():
                    self.kube.delete(LEASE_API, "Lease", name=name,
                                     namespace=self.lease.namespace,
                                     resource_version=lease["metadata"]["resourceVersion"])
            except KubeError as e:  # changed meanwhile (it came back), or not allowed
                log.info("member_lease_not_deleted", lease=name, error=str(e))
                continue
            log.info("member_lease_deleted", lease=name, identity=self.identity)

    def _holders(self, leases: Mapping[str, Manifest]) -> dict[int, str]:
        out = {}
        for shard, elector in enumerate(self.electors):
            if elector.is_leader:
                out[shard] = self.identity
                continue
            spec = (leases.get(elector.settings.name) or {}).get("spec") or {}
            if spec.get("holderIdentity"):
                out[shard] = str(spec["holderIdentity"])
        return out

    def _report(self, before: frozenset[int]) -> None:
        """Adopt what was gained (callback first), forget what was lost.

        A shard held at both ends under a new term was lost and taken again in between
        (:meth:`LeaderElector.keep` does both in one call when a renewal came too late):
        it counts as lost and gained, so its apps are queued again. Their writes under the
        old term were refused (:class:`~gitops_ray.kube.LeaseExpired`) and nothing else
        would retry them.
        """
        now = frozenset(i for i, e in enumerate(self.electors) if e.is_leader)
        terms = {i: self.electors[i].term for i in now}
        regained = frozenset(i for i in before & now
                             if self._terms.get(i, terms[i]) != terms[i])
        self._terms = terms
        lost = (before - now) | regained
        with self._lock:
            self._ready -= lost
            for shard in lost:  # taken over while we were handing it over
                self._releasing.pop(shard, None)
        if lost:
            log.info("shards_lost", shards=sorted(lost), identity=self.identity)
            self._on_lost(lost)
        gained = (now - before - self._releasing.keys()) | regained
        if gained:
            taken = self._clock()
            log.info("shards_gained", shards=sorted(gained), identity=self.identity,
                     step_s=round(taken - self._step_started, 3),
                     late={i: self.electors[i].takeover for i in sorted(gained)})
            self._adopt(gained)
            with self._lock:
                self._ready |= gained
            log.debug("shards_adopted", shards=sorted(gained),
                      seconds=round(self._clock() - taken, 3))
            self._on_gained(gained)

    def release_all(self) -> None:
        """On shutdown (after the controller's writes stopped): give every Lease up."""
        held = self.held()
        with self._lock:
            self._ready.clear()
        for elector in self.electors:
            if elector.is_leader:
                elector.release()
        self.member.release()
        self._renewals.shutdown(wait=False)
        if held:
            self._on_lost(held)


def member_urls(leases: Iterable[Manifest]) -> dict[str, str]:
    """Each member Lease's holder and advertised webhook URL, live or not.

    The step's own bookkeeping of who is live is not touched: this runs on a webhook's
    thread.
    """
    out = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if (meta.get("labels") or {}).get(ROLE_LABEL) == "member" and holder:
            out[holder] = str((meta.get("annotations") or {}).get(WEBHOOK_URL_ANNOTATION, ""))
    return out


def _record(lease: Manifest) -> str:
    """A Lease's spec as one comparable value: a renewal changes it (``renewTime``)."""
    return repr(sorted((lease.get("spec") or {}).items()))


def _nothing() -> None:
    return None


__all__ = ["GROUP_LABEL", "MAX_SHARDS", "ROLE_LABEL", "WEBHOOK_URL_ANNOTATION",
           "ShardCoordinator", "View", "assignment", "lease_name", "owner", "shard_of"]
