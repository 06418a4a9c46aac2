"""Best-effort writes sent from a background thread: the controller's Kubernetes Events.

Why: the API calls Events "informative, supplemental", and a sync never fails for one; yet
posted inline each is a round trip on the worker that syncs the app. A sync step that
changes one RayCluster posts two (``ResourceConfigured`` on the object's cluster and
``SyncSucceeded`` on the app's record), so when a replica takes over a dead one's apps,
or a commit touches many apps at once, every worker waited on two Event writes per app
before it could start the next one. An :class:`Outbox` takes them off the worker, as
client-go's event broadcaster does.

How:

* one outbox per :class:`~gitops_ray.kube.Kube` client (:attr:`Kube.outbox`), so a slow or
  unreachable cluster's backlog never delays another cluster's Events;
* a bounded queue (:data:`DEFAULT_LIMIT` items); when it is full the newest item is
  dropped and counted (:attr:`Outbox.dropped`), never waited for: an API server too slow
  to take Events must not slow the syncs down as well;
* one daemon thread sends the items in the order they were queued, and ends once the
  queue has been empty for :data:`IDLE_SECONDS` (the next item starts a new one), so a
  cluster that is no longer used costs no thread and needs no stop;
* each item runs in a copy of the :mod:`contextvars` context it was queued from: the
  write fence (:mod:`gitops_ray.kube.fence`) checks the lease term of the sync that
  queued it, so an Event of a sync whose lease or shard has been lost since is refused,
  never written;
* an item that fails (:class:`~gitops_ray.errors.GitOpsRayError`, a refused fence
  included) is logged at debug with the error's text only and dropped, as an inline post
  was.

:meth:`Outbox.flush` waits, bounded, until everything queued so far has been sent: the
controller calls it at shutdown before it lets the lease go.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable

import structlog

from gitops_ray.errors import GitOpsRayError

DEFAULT_LIMIT = 1000
"""Items waiting at most (client-go's broadcaster queues 1,000 events too)."""
IDLE_SECONDS = 5.0
"""The sending thread ends after this long with nothing to send."""

Send = Callable[[], object]
log = structlog.get_logger(__name__)


class Outbox:
    """A bounded queue of best-effort writes and the thread that sends them."""

    def __init__(self, *, limit: int = DEFAULT_LIMIT, idle: float = IDLE_SECONDS,
                 name: str = "outbox", on_drop: Callable[[], object] | None = None) -> None:
        self._items: queue.Queue[tuple[contextvars.Context, Send, str]] = queue.Queue(limit)
        self._idle = idle
        self._name = name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._on_drop = on_drop  # e.g. a metric's inc
        self.dropped = 0
        """Items not sent because the queue was full."""
        self.failed = 0
        """Items sent and refused (by the API server or the write fence)."""

    def put(self, send: Send, what: str) -> bool:
        """Queue ``send`` (``what`` names it in logs); ``False``: dropped, the queue is full."""
        item = (contextvars.copy_context(), send, what)
        with self._lock:
            try:
                self._items.put_nowait(item)
            except queue.Full:
                self.dropped += 1
                log.debug("outbox_full", outbox=self._name, what=what, dropped=self.dropped)
                if self._on_drop is not None:
                    self._on_drop()
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name,
                                                 daemon=True)
                self._thread.start()
        return True

    def flush(self, timeout: float) -> bool:
        """Wait until every item queued so far was sent or failed; ``False``: timed out."""
        deadline = time.monotonic() + timeout
        with self._items.all_tasks_done:
            while self._items.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._items.all_tasks_done.wait(left)
        return True

    def _run(self) -> None:
        while (item := self._next()) is not None:
            context, send, what = item
            try:
                context.run(send)
            except GitOpsRayError as e:
                self.failed += 1
                log.debug("outbox_not_sent", outbox=self._name, what=what, error=str(e))
            except Exception as e:  # a bug must not end the thread with items queued
                self.failed += 1
                log.warning("outbox_not_sent", outbox=self._name, what=what,
                            error_type=type(e).__name__)
            finally:
                self._items.task_done()

    def _next(self) -> tuple[contextvars.Context, Send, str] | None:
        """The next item, or ``None`` once idle (then this thread ends)."""
        while True:
            try:
                return self._items.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:  # a put that sees a thread must find it still running
                    if self._items.empty():
                        self._thread = None
                        return None
