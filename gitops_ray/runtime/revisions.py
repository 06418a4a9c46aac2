"""Which commit does (repo, revision) point at? Asked once, shared by every app that needs it.

Why: resolving is a network round trip (``git ls-remote``). Hundreds of apps usually live
in a handful of repositories, and a webhook refreshes all of them at once, so resolving
per app would turn one push into hundreds of identical requests to the git server. Here:

* concurrent requests for the same (repo, revision) share one call (single flight);
* an answer younger than ``max_age`` is reused. Polls accept a few seconds (apps on one
  repo poll at jittered times); refreshes caused by the cluster (a watch event, a due
  backoff) accept any age, as Argo CD's ``CompareWithRecent`` does: drift is about the
  cluster, not about git;
* a push webhook invalidates the pushed repository first, so the refreshes it
  triggers see the new commit; where the push itself says which commit a branch moved
  to, and from the commit this cache knows (``before``), that commit is the answer and
  git is not asked again (:meth:`Revisions.pushed`). From any other commit (a delivery
  out of order, one missed) the answer is only invalidated: a push never makes the
  cache go back to an older commit. An invalidated answer is never reused, whatever age the
  caller accepts: the work queue merges a push's request into one already waiting for
  the app (a watch event's, caused by the previous push's own sync), and that refresh,
  which accepts any age, must still see the new commit;
* a failure is remembered for a few seconds, and nobody waits long for a call already in
  flight, so fifty apps on an unreachable (or hanging) git server cannot occupy every
  worker: the other apps keep being refreshed.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from gitops_ray.errors import SourceError
from gitops_ray.logs import redact_url
from gitops_ray.runtime.webhook import Push, normalize_repo_url

Resolve = Callable[..., str]
"""``GitSource.resolve``: ``(repo, revision)``, and ``chart=`` for a chart's version."""
FOREVER = math.inf
RECENT = 5.0  # seconds: how old an answer a poll or a webhook-triggered refresh accepts
WAIT = 10.0  # seconds a refresh waits for another one's call to a slow git server


@dataclass
class _Entry:
    lock: threading.Lock
    sha: str = ""
    at: float = -math.inf
    error: SourceError | None = None  # the last failure, raised again (its reason kept)
    failed_at: float = -math.inf
    stale: bool = False  # a push invalidated it: ask git, whatever age is accepted


class Revisions:
    """A small cache in front of ``GitSource.resolve``."""

    def __init__(self, resolve: Resolve, *, clock: Callable[[], float] = time.monotonic,
                 wait: float = WAIT, retry_after: float = RECENT) -> None:
        self._resolve = resolve
        self._clock = clock
        self._wait = wait
        self._retry_after = retry_after
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._lock = threading.Lock()

    def resolve(self, repo: str, revision: str, *, max_age: float, chart: str = "") -> str:
        """The commit of ``revision``, resolved at most ``max_age`` seconds ago.

        With ``chart``, the version of that chart ``revision`` names (its repository's
        index or tags read at most ``max_age`` seconds ago: a hard refresh reads them).

        Raises :class:`~gitops_ray.errors.SourceError` when git fails, and again without
        asking for ``retry_after`` seconds; waits at most ``wait`` seconds for a call
        already in flight (then answers with the last known commit, if any).
        """
        entry = self._entry(repo, revision, chart)
        if not entry.lock.acquire(timeout=self._wait):
            if entry.sha:
                return entry.sha
            raise SourceError(f"{redact_url(repo)}: git has not answered yet; another "
                              "refresh is still waiting for it")
        try:
            return self._answer(entry, repo, revision, max_age, chart)
        finally:
            entry.lock.release()

    def _answer(self, entry: _Entry, repo: str, revision: str, max_age: float,
                chart: str) -> str:
        now = self._clock()
        if entry.sha and not entry.stale and now - entry.at <= max_age:
            return entry.sha
        if entry.error and now - entry.failed_at < self._retry_after:
            raise entry.error.with_traceback(None)
        try:
            sha = self._resolve(repo, revision, chart=chart) if chart else \
                self._resolve(repo, revision)
        except SourceError as e:
            entry.error, entry.failed_at = e, self._clock()
            raise
        entry.sha, entry.at, entry.error, entry.stale = sha, self._clock(), None, False
        return sha

    def pushed(self, push: Push) -> None:
        """A push webhook: take its branch's new commit, invalidate the rest of its repos.

        Only an entry of the pushed branch (``push.matches``, not a chart's) that holds
        the push's ``before`` commit, fresh, takes its ``after``; see the module doc.
        """
        moved = push.moved
        with self._lock:
            entries = [(key, e) for key, e in self._entries.items()
                       if normalize_repo_url(key[0]) in push.repos]
        for (repo, revision, chart), entry in entries:
            with entry.lock:
                if moved is not None and not chart and not entry.stale \
                        and entry.sha == moved[0] and push.matches(repo, revision):
                    entry.sha, entry.at, entry.error = moved[1], self._clock(), None
                else:
                    entry.stale, entry.failed_at = True, -math.inf

    def invalidate(self, repos: Collection[str]) -> None:
        """Forget what is known about these repositories (normalised URLs, as in a push)."""
        with self._lock:
            entries = [e for (r, _, _), e in self._entries.items()
                       if normalize_repo_url(r) in repos]
        for entry in entries:
            with entry.lock:
                entry.stale, entry.failed_at = True, -math.inf

    def _entry(self, repo: str, revision: str, chart: str) -> _Entry:
        with self._lock:
            return self._entries.setdefault((repo, revision, chart), _Entry(threading.Lock()))
