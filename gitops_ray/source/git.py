"""Git: resolve a revision cheaply, fetch only what changed, hand out one tree per commit.

The controller asks "what does ``main`` point to now?" for every app every few minutes.
:meth:`GitSource.resolve` answers with one ``ls-remote`` (no objects are downloaded), and
:meth:`GitSource.checkout` fetches into a bare mirror per repository URL only when the
resolved commit is not there yet, then materialises that commit's tree once, read-only by
convention, reused until evicted. A lock per URL lets many apps share one repository
safely from many threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import git

from gitops_ray.errors import SourceError
from gitops_ray.source.auth import Credentials, git_env

_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-fA-F]{4,39}$")
_AUTH_FAILED = ("authentication failed", "could not read username", "could not read password",
                "permission denied (publickey", "http 401", "http 403",
                "the requested url returned error: 401", "the requested url returned error: 403",
                "invalid username or password")
KEEP_TREES = 16


class SourceAuthError(SourceError):
    """The remote rejected our credentials (or asked for some and we had none)."""


class UnreachableRemote(SourceError):
    """The remote could not be reached or is not a git repository."""


class UnknownRevision(SourceError):
    """The revision names no branch, tag or commit of the repository."""


@dataclass(frozen=True)
class Checkout:
    """One commit of one repository, as a directory tree."""

    repo_url: str
    revision: str
    sha: str
    root: Path


CredentialLookup = Callable[[str], "Credentials | None"]


def redact(url: str) -> str:
    """``url`` without any user or password (safe for messages and logs)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


class GitSource:
    """Bare mirrors and per-commit trees under ``cache_dir``."""

    def __init__(self, cache_dir: Path, *, credentials: CredentialLookup | None = None,
                 timeout: float = 60.0) -> None:
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self._credentials = credentials or (lambda _url: Credentials.from_env())
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.fetches: Counter[str] = Counter()

    # -- public ----------------------------------------------------------------------

    def resolve(self, repo_url: str, revision: str) -> str:
        """The commit ``revision`` points to now (a full SHA), without downloading objects."""
        revision = revision.strip() or "HEAD"
        if _FULL_SHA.match(revision):
            return revision.lower()
        refs = self._ls_remote(repo_url)
        for candidate in (revision, f"refs/heads/{revision}", f"refs/tags/{revision}^{{}}",
                          f"refs/tags/{revision}"):
            if candidate in refs:
                return refs[candidate]
        if _SHORT_SHA.match(revision):
            return self._resolve_short(repo_url, revision)
        raise UnknownRevision(f"revision {revision!r} not found in {redact(repo_url)}")

    def checkout(self, repo_url: str, revision: str) -> Checkout:
        """The tree of ``revision`` (fetched only if the commit is not local yet)."""
        sha = self.resolve(repo_url, revision)
        with self._lock(repo_url):
            mirror = self._mirror(repo_url)
            if not self._has_commit(mirror, sha):
                self._fetch(repo_url, mirror, sha)
            if not self._has_commit(mirror, sha):
                raise UnknownRevision(f"commit {sha} not found in {redact(repo_url)}")
            root = self._tree(mirror, sha)
        return Checkout(repo_url, revision, sha, root)

    # -- git plumbing ----------------------------------------------------------------

    def _dir(self, repo_url: str) -> Path:
        return self.cache_dir / hashlib.sha256(repo_url.encode()).hexdigest()[:16]

    def _lock(self, repo_url: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(repo_url, threading.Lock())

    def _run(self, repo_url: str, args: list[str], cwd: Path | None = None) -> str:
        env = git_env(self._credentials(repo_url), self.cache_dir / ".secrets")
        try:
            out = git.Git(str(cwd) if cwd else None).execute(
                ["git", *args], env=env, kill_after_timeout=self.timeout,
                stdout_as_string=True)
        except git.GitCommandError as e:
            raise _classify(repo_url, str(e.stderr or e)) from None
        return str(out)

    def _ls_remote(self, repo_url: str) -> dict[str, str]:
        refs: dict[str, str] = {}
        for line in self._run(repo_url, ["ls-remote", "--", repo_url]).splitlines():
            sha, _, ref = line.partition("\t")
            refs[ref.strip()] = sha.strip()
        return refs

    def _mirror(self, repo_url: str) -> Path:
        mirror = self._dir(repo_url) / "mirror.git"
        if not (mirror / "HEAD").exists():
            mirror.mkdir(parents=True, exist_ok=True)
            git.Repo.init(mirror, bare=True)
        return mirror

    def _has_commit(self, mirror: Path, sha: str) -> bool:
        try:
            git.Git(str(mirror)).execute(["git", "cat-file", "-e", f"{sha}^{{commit}}"])
        except git.GitCommandError:
            return False
        return True

    def _fetch(self, repo_url: str, mirror: Path, sha: str | None = None) -> None:
        self.fetches[repo_url] += 1
        self._run(repo_url, ["fetch", "--quiet", "--prune", "--no-tags", "--", repo_url,
                             "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                  cwd=mirror)
        if sha and not self._has_commit(mirror, sha):
            # A commit no branch or tag points to (servers may refuse this).
            with contextlib.suppress(SourceError):
                self._run(repo_url, ["fetch", "--quiet", "--", repo_url, sha], cwd=mirror)

    def _resolve_short(self, repo_url: str, prefix: str) -> str:
        with self._lock(repo_url):
            mirror = self._mirror(repo_url)
            self._fetch(repo_url, mirror)
            try:
                out = git.Git(str(mirror)).execute(
                    ["git", "rev-parse", "--verify", "--quiet", f"{prefix}^{{commit}}"],
                    stdout_as_string=True)
            except git.GitCommandError:
                raise UnknownRevision(f"revision {prefix!r} not found in {redact(repo_url)} "
                                      "(or the short SHA is ambiguous)") from None
        return str(out).strip()

    def _tree(self, mirror: Path, sha: str) -> Path:
        trees = mirror.parent / "trees"
        target = trees / sha
        if target.exists():
            os.utime(target)
            return target
        trees.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=trees) as tmp:
            archive = Path(tmp) / "tree.tar"
            with open(archive, "wb") as handle:
                git.Git(str(mirror)).execute(["git", "archive", "--format=tar", sha],
                                             output_stream=handle)
            extracted = Path(tmp) / "tree"
            with tarfile.open(archive) as tar:
                tar.extractall(extracted, filter="tar")
            os.rename(extracted, target)
        self._evict(trees)
        return target

    def _evict(self, trees: Path) -> None:
        entries = sorted((p for p in trees.iterdir() if p.is_dir() and _FULL_SHA.match(p.name)),
                         key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[KEEP_TREES:]:
            shutil.rmtree(old, ignore_errors=True)


def _classify(repo_url: str, stderr: str) -> SourceError:
    text = stderr.lower()
    where = redact(repo_url)
    detail = _last_line(stderr, repo_url)
    if any(marker in text for marker in _AUTH_FAILED):
        return SourceAuthError(f"authentication to {where} failed: {detail}")
    if "timed out" in text or "timeout" in text:
        return UnreachableRemote(f"{where} did not answer in time: {detail}")
    return UnreachableRemote(f"cannot read repository {where}: {detail}")


def _last_line(stderr: str, repo_url: str) -> str:
    """The most telling line of git's stderr (its ``fatal:``/``error:`` line), redacted."""
    lines = [re.sub(r"^(stderr:\s*)?'?", "", ln.strip()).rstrip("'")
             for ln in stderr.replace(repo_url, redact(repo_url)).splitlines()
             if ln.strip() and not ln.strip().startswith("cmdline:")]
    fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    text = (fatal or lines or ["git failed"])[0]
    return re.sub(r"^(fatal|error):\s*", "", text)[:300]
