"""Whether this replica can do its job right now: ``/readyz`` and ``gitops_ray_ready``.

Why a model instead of "loaded once": readiness used to mean "the first catalog load and
the first list of every watched kind are done", so a replica stayed ready through a
45 s API-server outage and while RBAC denied every refresh. A ready replica is one that
can compare and (when leading) sync: it is in the Service (it receives webhooks), and an
operator reads ``kubectl get pods`` and the ``gitops_ray_ready`` gauge to find out why
nothing happens. Each :class:`Check` has a name and, when failing, a reason; the 503 body
lists the failing ones.

The signals come from what the controller does anyway, not from extra traffic:

* every API request reports its status through ``Kube.hooks`` (:class:`ApiHealth`): a
  transport failure or a 5xx means the API server is not answering; a ``401`` means our
  credentials are rejected; requests to Leases tell whether leader election works;
* every refresh reports its outcome (:class:`RefreshOutcomes`): when the last refresh of
  *every* app was denied (401/403, e.g. a ServiceAccount without the chart's RBAC), the
  replica cannot do its job. One app denied is that app's problem (its status says so),
  not a reason to take the replica out of the Service;
* the catalog and the watch cache say whether apps are loaded and caches synced.

While the API server is not answering, the runtime probes it (``GET /version``) every few
seconds so readiness returns as soon as it does, not at the next watch retry (up to 30 s);
a healthy replica sends no probe at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gitops_ray.kube import Forbidden, Unauthorized

Clock = Callable[[], float]
PROBE_INTERVAL = 2.0  # seconds between API probes while the API server is not answering
_LEASES = "leases"
_LEASE_ANSWERS = (404, 409)  # no lease yet / lost a race: the lease loop works


class Check(StrEnum):
    """The named readiness checks (label ``check`` of ``gitops_ray_ready``)."""

    APPS_LOADED = "apps_loaded"  # the app sources were read at least once
    CACHES_SYNCED = "caches_synced"  # every watched kind has been listed
    API_REACHABLE = "api_reachable"  # the API server answers
    API_AUTHORIZED = "api_authorized"  # credentials accepted; not every refresh denied
    LEADER_ELECTION = "leader_election"  # lease reads/writes work (leader or follower)


@dataclass(frozen=True)
class CheckResult:
    check: Check
    ok: bool
    reason: str = ""


def failing(results: Iterable[CheckResult]) -> dict[str, str]:
    """``{check: reason}`` of the failing checks (empty: ready)."""
    return {r.check.value: r.reason for r in results if not r.ok}


def denied(error: BaseException | None) -> bool:
    """Whether an error is, or was caused by, a 401/403 from the API server."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, Forbidden | Unauthorized):
            return True
        error, seen = error.__cause__, seen + 1
    return False


class _Since:
    """When a condition started to hold (``None``: it does not hold), with its last detail."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.detail = ""

    def set(self, on: bool, now: float, detail: str = "") -> None:
        if not on:
            self.since = None
        elif self.since is None:
            self.since = now
        if on:
            self.detail = detail


class ApiHealth:
    """What the API requests' statuses say (a :data:`gitops_ray.kube.client.RequestHook`)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._down = _Since()  # transport failures / 5xx since the last answer
        self._rejected = _Since()  # 401 since the last 2xx
        self._lease = _Since()  # lease requests failing since the last that worked

    def observe(self, verb: str, resource: str, status: int, seconds: float) -> None:
        now = self._clock()
        down = status == 0 or (status >= 500 and verb != "discovery")
        with self._lock:
            self._down.set(down, now, f"HTTP {status}" if status else "no connection")
            if status == 401 or 200 <= status < 300:
                self._rejected.set(status == 401, now)
            if resource == _LEASES:
                works = 200 <= status < 300 or status in _LEASE_ANSWERS
                self._lease.set(not works, now, f"HTTP {status}" if status else "no connection")

    @property
    def down(self) -> bool:
        with self._lock:
            return self._down.since is not None

    def reachable(self) -> CheckResult:
        return self._result(Check.API_REACHABLE, self._down,
                            "the API server has not answered for {age}s ({detail})")

    def authenticated(self) -> CheckResult:
        return self._result(Check.API_AUTHORIZED, self._rejected,
                            "the API server rejects our credentials (401) for {age}s")

    def lease(self) -> CheckResult:
        return self._result(Check.LEADER_ELECTION, self._lease,
                            "lease requests fail for {age}s ({detail})")

    def _result(self, check: Check, state: _Since, template: str) -> CheckResult:
        with self._lock:
            since, detail = state.since, state.detail
        if since is None:
            return CheckResult(check, True)
        age = round(self._clock() - since)
        return CheckResult(check, False, template.format(age=age, detail=detail))


class RefreshOutcomes:
    """Whether each app's last refresh was denied by the API server (401/403)."""

    def __init__(self) -> None:
        self._denied: dict[str, bool] = {}
        self._lock = threading.Lock()

    def observe(self, app: str, error: BaseException | None) -> None:
        with self._lock:
            self._denied[app] = denied(error)

    def forget(self, app: str) -> None:
        with self._lock:
            self._denied.pop(app, None)

    def authorized(self) -> CheckResult:
        with self._lock:
            outcomes = list(self._denied.values())
        if outcomes and all(outcomes):
            return CheckResult(Check.API_AUTHORIZED, False, f"the last refresh of every app "
                               f"({len(outcomes)}) was denied by the API server (401/403)")
        return CheckResult(Check.API_AUTHORIZED, True)


def evaluate(*, apps_loaded: bool, unsynced: Sequence[str], api: ApiHealth,
             refreshes: RefreshOutcomes, leader_election: bool) -> list[CheckResult]:
    """One result per :class:`Check`, in declaration order."""
    authorized = api.authenticated()
    if authorized.ok:
        authorized = refreshes.authorized()
    return [
        CheckResult(Check.APPS_LOADED, apps_loaded, "" if apps_loaded
                    else "the app sources have not been loaded yet"),
        CheckResult(Check.CACHES_SYNCED, not unsynced, "" if not unsynced
                    else "not listed yet: " + ", ".join(unsynced[:10])),
        api.reachable(),
        authorized,
        api.lease() if leader_election else CheckResult(Check.LEADER_ELECTION, True),
    ]
