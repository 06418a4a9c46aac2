"""The write fence: a replica writes only while its own clock says it still holds the Lease.

Why this exists: leader election alone does not stop a leader that was paused (SIGSTOP,
a long GC or swap stall, a frozen VM) from writing after it resumes. By then another
replica may have taken the lease over and synced a newer revision, and every write the
old leader still had queued rolls an object back (issue 13: 52 stale writes in 0.9 s).
The elector only notices on its next renewal; the fence does not wait for that.

How it works:

* the elector *grants* the fence a **term** (an id that changes on every acquisition) and
  a deadline on the local monotonic clock: the time the last successful acquire/renew
  request was *sent* plus ``renewDeadline``. Other replicas only take over
  ``leaseDuration`` after they *saw* that write, so the gap between ``renewDeadline`` and
  ``leaseDuration`` is the safety margin (in-flight requests, clock-rate drift);
* a unit of work (one refresh that may sync) *captures* the term when it starts
  (:meth:`WriteFence.scope`, a :mod:`contextvars` variable, so each worker thread has
  its own) and every write it makes must still be in that term: a sync started under one
  term never finishes under another;
* :class:`~gitops_ray.kube.Kube` calls :meth:`WriteFence.check` right before it sends
  every mutating request (POST/PUT/PATCH/DELETE that is not a dry run); a refusal raises
  :class:`~gitops_ray.kube.errors.LeaseExpired`, which aborts the running sync. The
  elector's own Lease writes are sent inside :func:`unfenced`.

What it cannot do: a request that passed the check and is then delayed (the process
stopped between the check and the socket write) still reaches the server. The Kubernetes
API has no cross-object precondition to close that gap; the check is made as late as
possible, so at most one request per worker thread can slip through.

**Per shard** (``sharding.enabled``, :mod:`gitops_ray.runtime.shards`): each shard Lease a
replica holds has its own fence, term and deadline. A refresh captures the fence of its
app's shard, and every write it makes is checked against that fence, not the client's;
losing one shard revokes only its fence. The client's own fence is then never granted,
so a write made outside any shard's scope is refused.

The decision itself is the pure :func:`refusal`, unit-tested with fake clocks.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gitops_ray.kube.errors import LeaseExpired

NO_TERM = 0  # "not leading": never a granted term
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Clock = Callable[[], float]

_captured: contextvars.ContextVar[tuple[WriteFence, int] | None] = contextvars.ContextVar(
    "gitops_ray_fence_term", default=None)
_exempt: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "gitops_ray_fence_exempt", default=False)


def is_write(method: str, query: Mapping[str, Any] | None, body: Any) -> bool:
    """Whether a request changes state on the server (a dry run does not)."""
    if method.upper() not in MUTATING:
        return False
    if (query or {}).get("dryRun"):
        return False
    return not (method.upper() == "DELETE" and isinstance(body, Mapping)
                and body.get("dryRun"))


def refusal(*, captured: int | None, term: int, valid_until: float, now: float) -> str | None:
    """Why a write must not be sent now, or ``None`` when it may (pure).

    ``captured`` is the term the work started under (``None``: no scope, so any valid
    term will do; :data:`NO_TERM`: it started while we were not leading), ``term`` and
    ``valid_until`` what the elector granted last (:data:`NO_TERM` once revoked).
    """
    if term == NO_TERM:
        return "this replica is not the leader"
    if captured is not None and captured != term:
        return (f"the work started under lease term {captured} but the current term is "
                f"{term}" if captured != NO_TERM else "the work started while not leading")
    if now >= valid_until:
        return (f"the lease may have expired {now - valid_until:.1f}s ago by this "
                "replica's clock (no successful renewal within renewDeadline)")
    return None


@contextlib.contextmanager
def unfenced() -> Iterator[None]:
    """Let the requests made inside through the fence (the elector's own Lease writes)."""
    token = _exempt.set(True)
    try:
        yield
    finally:
        _exempt.reset(token)


class WriteFence:
    """Thread-safe holder of the current term and its deadline (see the module docstring)."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._term = NO_TERM
        self._valid_until = 0.0
        self.refused = 0  # writes refused so far (logged by the caller, read by tests)

    # -- the elector's side ------------------------------------------------------------

    def grant(self, term: int, valid_until: float) -> None:
        """Allow writes in ``term`` until ``valid_until`` (monotonic seconds)."""
        if term == NO_TERM:
            raise ValueError("term 0 means 'not leading' and cannot be granted")
        with self._lock:
            self._term, self._valid_until = term, valid_until

    def revoke(self) -> None:
        """Refuse every write from now on (until the next :meth:`grant`)."""
        with self._lock:
            self._term, self._valid_until = NO_TERM, 0.0

    def remaining(self) -> float:
        """Seconds left in the current term (``0`` when none is valid)."""
        with self._lock:
            if self._term == NO_TERM:
                return 0.0
            return max(0.0, self._valid_until - self._clock())

    # -- the writers' side -------------------------------------------------------------

    def term(self) -> int:
        """The current term if it is still valid by our clock, else :data:`NO_TERM`."""
        with self._lock:
            reason = refusal(captured=None, term=self._term, valid_until=self._valid_until,
                             now=self._clock())
            return self._term if reason is None else NO_TERM

    @contextlib.contextmanager
    def scope(self) -> Iterator[bool]:
        """Capture this fence and its current term for the writes made inside.

        Yields whether the term is valid. Inside, every write is checked against *this*
        fence, whichever fence the client has installed: with sharding, a refresh
        captures the fence of its app's shard (see the module docstring).
        """
        term = self.term()
        token = _captured.set((self, term))
        try:
            yield term != NO_TERM
        finally:
            _captured.reset(token)

    def check(self, request: str) -> None:
        """Raise :class:`LeaseExpired` unless ``request`` may be sent now.

        Checked against the fence captured by the enclosing :meth:`scope` if any (a
        shard's), else against this one (the client's) with any valid term.
        """
        if _exempt.get():
            return
        captured = _captured.get()
        fence, term = captured if captured is not None else (self, None)
        fence._check(request, term)

    def _check(self, request: str, captured: int | None) -> None:
        with self._lock:
            reason = refusal(captured=captured, term=self._term,
                             valid_until=self._valid_until, now=self._clock())
            if reason is None:
                return
            self.refused += 1
        raise LeaseExpired(f"{request}: write refused: {reason}", reason="LeaseExpired")


__all__ = ["NO_TERM", "WriteFence", "is_write", "refusal", "unfenced"]
