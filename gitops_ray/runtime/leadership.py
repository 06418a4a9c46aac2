"""Who may write: leader election and shards, as the controller sees them.

The controller refreshes every app on every replica, but only the leader (with sharding:
the owner of the app's shard) syncs and writes. This part of
:class:`gitops_ray.runtime.controller.Controller` keeps that straight: starting to lead
loads what the previous leader recorded (last and running operations), a gained shard
loads its apps' records, stopping waits for running writes, and every write runs inside
:meth:`Leadership._write_guard`, which captures the lease term (the write fence,
:mod:`gitops_ray.kube.fence`) so a replica that lost its lease writes nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping

from gitops_ray.kube import KubeError
from gitops_ray.kube.fence import NO_TERM
from gitops_ray.reconcile.autosync import LastOperation
from gitops_ray.runtime.bookkeeping import Bookkeeping, _log, fingerprint
from gitops_ray.sync.operation import OperationState
from gitops_ray.sync.records import AppRecord

TERM_RETRY_SECONDS = 2.0
"""When a refresh may not write because its lease's term is not confirmed right now (a
renewal is late: a loaded API server or machine), it is tried again this much later. Nothing
else would retry it: an app in sync elsewhere gets no watch event, polling may be off."""


class Leadership(Bookkeeping):
    """Leading, owning, and the write guard (see the module doc)."""

    @property
    def leading(self) -> bool:
        return self._leading

    def start_leading(self) -> None:
        """Load what the previous leader recorded, then allow writes."""
        records = self._records()
        with self._cond:
            for _, memory in self._apps.each():
                memory.forget_leadership()
            self._load(records)
            self._leading = True
        self.metrics.leader.set(1)

    def adopt(self, owned: Callable[[str], bool]) -> None:
        """Gained shards: load the ``owned`` apps' records (their previous owner wrote them).

        By record, not by catalog: the catalog may not be loaded yet at start-up. Their
        next refresh resolves the revision anew: a revision this replica resolved before
        it lost the shard (or was paused) may be older than what the previous owner synced.
        """
        records = self._records(owned)
        with self._cond:
            for name in self.catalog.apps():
                if owned(name):
                    with self._apps.of(name) as memory:
                        memory.after_operation = True
            for _, memory in self._apps.each(owned):
                memory.forget_leadership()
            self._load(records)
            self._leading = True

    def _load(self, records: Mapping[str, AppRecord]) -> None:
        """Remember what the apps' ``records`` say: last and running operation, status."""
        for name, record in records.items():
            with self._apps.of(name) as memory:
                memory.last_op = LastOperation.from_status(record.status)
                memory.running = OperationState.from_status(record.status)
                memory.written = fingerprint(record.status)

    def writing(self, shard: int) -> bool:
        """Whether a write of an app of ``shard`` is running (sharding only)."""
        assert self._shards is not None
        with self._cond:
            return any(self._shards.shard_of(n) == shard for n, c in self._writing.items()
                       if c)

    def owns(self, name: str) -> bool:
        """Whether this replica writes ``name`` while it leads (its shard, with sharding)."""
        return self._shards is None or self._shards.owns(name)

    def stop_leading(self, timeout: float) -> bool:
        """Forbid new writes and wait up to ``timeout`` for running ones to finish."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._leading = False
            for _, memory in self._apps.each():  # the next leader never saw them: never
                memory.requested = None  # run them later
            while self._writes:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        self.metrics.leader.set(0)
        return True

    @contextlib.contextmanager
    def _write_guard(self, name: str) -> Iterator[bool]:
        with self._cond:
            allowed = self._leading and self.owns(name)
            self._writes += allowed
            self._writing[name] += allowed
        try:
            with self._term(name) as in_term:
                yield allowed and in_term
        finally:
            if allowed:
                with self._cond:
                    self._writes -= 1
                    self._writing[name] -= 1
                    if not self._writing[name]:
                        del self._writing[name]
                    self._cond.notify_all()

    def _term_now(self, name: str) -> int:
        """The lease term ``name`` is written in now (``NO_TERM``: none, or no election)."""
        if self._shards is not None:
            return self._shards.term(name)
        return self._fence.term() if self._fence else NO_TERM

    def _term(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """Capture the lease term for the writes made inside (see the module docstring)."""
        if self._shards is not None:
            return self._shards.scope(name)
        return self._fence.scope() if self._fence else contextlib.nullcontext(True)

    def _records(self, wanted: Callable[[str], bool] | None = None) -> dict[str, AppRecord]:
        try:
            return self.store.list_apps(wanted)
        except KubeError as e:
            _log.warning("records_not_loaded", error=str(e))
            return {}

    def _retry_unwritten(self, name: str) -> None:
        """Try again shortly: a refresh of an app this replica writes may not write now.

        Its lease's term is unconfirmed (a late renewal), or its shard is changing hands.
        Not on a follower: it never writes. With sharding, the retry of an app that is
        another replica's by then is only a standby pass.
        """
        if self._shards is not None or self._leading:
            _log.debug("write_deferred", app=name, retry_s=TERM_RETRY_SECONDS)
            self._requeue(name, TERM_RETRY_SECONDS)
