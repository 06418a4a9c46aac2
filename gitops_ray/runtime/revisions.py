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
  triggers see the new commit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from gitops_ray.runtime.webhook import normalize_repo_url

Resolve = Callable[[str, str], str]
FOREVER = math.inf
RECENT = 5.0  # seconds: how old an answer a poll or a webhook-triggered refresh accepts


@dataclass
class _Entry:
    lock: threading.Lock
    sha: str = ""
    at: float = -math.inf


class Revisions:
    """A small cache in front of ``GitSource.resolve``."""

    def __init__(self, resolve: Resolve, *, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._resolve = resolve
        self._clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def resolve(self, repo: str, revision: str, *, max_age: float) -> str:
        """The commit of ``revision``, resolved at most ``max_age`` seconds ago."""
        entry = self._entry(repo, revision)
        with entry.lock:  # single flight: later callers reuse the first one's answer
            if not entry.sha or self._clock() - entry.at > max_age:
                entry.sha = self._resolve(repo, revision)
                entry.at = self._clock()
            return entry.sha

    def invalidate(self, repos: Collection[str]) -> None:
        """Forget what is known about these repositories (normalised URLs, as in a push)."""
        with self._lock:
            entries = [e for (r, _), e in self._entries.items() if normalize_repo_url(r) in repos]
        for entry in entries:
            with entry.lock:
                entry.at = -math.inf

    def _entry(self, repo: str, revision: str) -> _Entry:
        with self._lock:
            return self._entries.setdefault((repo, revision), _Entry(threading.Lock()))
