"""The shared revision cache: one git round trip per repo and trigger, not per app."""

from __future__ import annotations

import threading
from collections import Counter

from gitops_ray.runtime.revisions import FOREVER, RECENT, Revisions
from gitops_ray.runtime.webhook import normalize_repo_url


class Git:
    def __init__(self) -> None:
        self.sha = "a" * 40
        self.calls: Counter[tuple[str, str]] = Counter()

    def resolve(self, repo: str, revision: str) -> str:
        self.calls[(repo, revision)] += 1
        return self.sha


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_recent_answers_are_shared_and_old_ones_refreshed() -> None:
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    for _ in range(100):  # 100 apps on one repo, polled within a few seconds
        revisions.resolve("https://g/r.git", "main", max_age=RECENT)
    assert sum(git.calls.values()) == 1
    clock.now += RECENT + 1
    git.sha = "b" * 40
    assert revisions.resolve("https://g/r.git", "main", max_age=RECENT) == "b" * 40
    assert sum(git.calls.values()) == 2


def test_cluster_triggered_refreshes_never_ask_git_again() -> None:
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    revisions.resolve("r", "main", max_age=RECENT)
    clock.now += 10_000
    revisions.resolve("r", "main", max_age=FOREVER)
    assert sum(git.calls.values()) == 1


def test_webhook_invalidates_every_spelling_of_the_repo() -> None:
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    revisions.resolve("https://github.com/Org/Config.git", "main", max_age=RECENT)
    revisions.resolve("git@github.com:org/config.git", "dev", max_age=RECENT)
    revisions.resolve("https://github.com/org/other.git", "main", max_age=RECENT)
    revisions.invalidate({normalize_repo_url("https://github.com/org/config")})
    for repo, rev in (("https://github.com/Org/Config.git", "main"),
                      ("git@github.com:org/config.git", "dev"),
                      ("https://github.com/org/other.git", "main")):
        revisions.resolve(repo, rev, max_age=RECENT)
    assert git.calls[("https://github.com/Org/Config.git", "main")] == 2
    assert git.calls[("git@github.com:org/config.git", "dev")] == 2
    assert git.calls[("https://github.com/org/other.git", "main")] == 1


def test_concurrent_callers_share_one_call() -> None:
    release = threading.Event()
    calls: list[str] = []

    def slow(repo: str, revision: str) -> str:
        calls.append(repo)
        release.wait(10)
        return "c" * 40

    revisions = Revisions(slow)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(
        revisions.resolve("r", "main", max_age=RECENT))) for _ in range(8)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert results == ["c" * 40] * 8 and calls == ["r"]
