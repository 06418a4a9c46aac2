"""The shared revision cache: one git round trip per repo and trigger, not per app."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from gitops_ray.errors import SourceError
from gitops_ray.runtime.revisions import FOREVER, RECENT, Revisions
from gitops_ray.runtime.webhook import Push, normalize_repo_url


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


def test_after_a_push_even_a_cluster_triggered_refresh_asks_git_once() -> None:
    """A push's request can be merged into a watch event's refresh, which accepts any age."""
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    revisions.resolve("https://g/r.git", "main", max_age=RECENT)
    clock.now += 0.7  # the second push, well within RECENT of the first one's answer
    git.sha = "b" * 40
    revisions.invalidate({normalize_repo_url("https://g/r.git")})
    assert revisions.resolve("https://g/r.git", "main", max_age=FOREVER) == "b" * 40
    assert revisions.resolve("https://g/r.git", "main", max_age=FOREVER) == "b" * 40
    assert sum(git.calls.values()) == 2  # the first one and one after the push


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


def test_failures_are_remembered_briefly() -> None:
    calls: list[str] = []
    clock = Clock()

    def down(repo: str, revision: str) -> str:
        calls.append(repo)
        raise SourceError(f"{repo}: connection refused")

    revisions = Revisions(down, clock=clock, retry_after=5)
    for _ in range(10):
        with pytest.raises(SourceError, match="connection refused"):
            revisions.resolve("r", "main", max_age=RECENT)
    assert calls == ["r"]
    clock.now += 6
    with pytest.raises(SourceError):
        revisions.resolve("r", "main", max_age=RECENT)
    assert calls == ["r", "r"]


class Hanging:
    """A git server that answers only when released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def resolve(self, repo: str, revision: str) -> str:
        self.entered.set()
        self.release.wait(10)
        return "a" * 40


def test_a_hanging_git_server_does_not_hold_other_refreshes() -> None:
    git = Hanging()
    revisions = Revisions(git.resolve, wait=0.01)
    git.release.set()
    revisions.resolve("r", "main", max_age=RECENT)  # a known commit
    git.release.clear()
    git.entered.clear()
    stuck = threading.Thread(target=revisions.resolve, args=("r", "main"),
                             kwargs={"max_age": 0})
    stuck.start()
    try:
        assert git.entered.wait(10)
        assert revisions.resolve("r", "main", max_age=0) == "a" * 40  # last known answer
        git.entered.clear()
        other = threading.Thread(target=revisions.resolve, args=("new", "main"),
                                 kwargs={"max_age": 0})
        other.start()
        assert git.entered.wait(10)
        with pytest.raises(SourceError, match="not answered yet"):
            revisions.resolve("new", "main", max_age=0)  # nothing known: fail fast
    finally:
        git.release.set()
        stuck.join(10)
        other.join(10)


def _push(before: str, after: str, ref: str = "main") -> Push:
    return Push("github", frozenset({normalize_repo_url("https://g/r.git")}), ref, "main",
                after, before=before)


def test_a_push_that_moves_the_known_commit_is_the_answer_without_asking_git() -> None:
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    revisions.resolve("https://g/r.git", "main", max_age=RECENT)
    revisions.resolve("https://g/r.git", "HEAD", max_age=RECENT)
    revisions.resolve("https://g/r.git", "dev", max_age=RECENT)
    revisions.pushed(_push("a" * 40, "c" * 40))
    assert revisions.resolve("https://g/r.git", "main", max_age=RECENT) == "c" * 40
    assert revisions.resolve("https://g/r.git", "HEAD", max_age=RECENT) == "c" * 40  # default
    assert git.calls[("https://g/r.git", "main")] == 1
    git.sha = "d" * 40
    assert revisions.resolve("https://g/r.git", "dev", max_age=FOREVER) == "d" * 40  # asked
    assert git.calls[("https://g/r.git", "dev")] == 2


@pytest.mark.parametrize("push", [
    _push("b" * 40, "c" * 40),  # from a commit the cache does not know: out of order
    _push("0" * 40, "c" * 40),  # a created branch
    _push("a" * 40, "0" * 40),  # a deleted one
    _push("", "c" * 40),  # a tag push (its "after" may be a tag object), or no "before"
    _push("a" * 40, "not a sha"),
])
def test_any_other_push_only_invalidates(push: Push) -> None:
    git, clock = Git(), Clock()
    revisions = Revisions(git.resolve, clock=clock)
    revisions.resolve("https://g/r.git", "main", max_age=RECENT)
    revisions.pushed(push)
    git.sha = "e" * 40
    assert revisions.resolve("https://g/r.git", "main", max_age=FOREVER) == "e" * 40
    assert git.calls[("https://g/r.git", "main")] == 2
