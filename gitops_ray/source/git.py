"""Git: resolve a revision cheaply, fetch only what changed, hand out one tree per commit.

The controller asks "what does ``main`` point to now?" for every app every few minutes.
:meth:`GitSource.resolve` answers with one ``ls-remote`` limited to branches and tags (no
objects are downloaded, and a forge's thousands of pull-request refs are not listed), and
:meth:`GitSource.checkout` fetches into a bare mirror per repository URL only when the
resolved commit is not there yet, then materialises that commit's tree once
(:mod:`gitops_ray.source.trees`: derived from the previous tree, so a small commit costs
little), read-only by convention, reused until evicted. A lock per URL lets many apps
share one repository safely from many threads.

Credentials never reach git's argv: a ``user:token@`` in a repository URL is taken out
(:func:`gitops_ray.source.auth.split_credentials`) and handed over like configured ones,
through a credential helper that reads the git process's environment. The mirror is
keyed and fetched by the URL without userinfo and has no remote configured, so neither
its directory name, its ``config`` nor its ``FETCH_HEAD`` holds a token.

Layout under ``cache_dir``: ``repos/<hmac(key, url)[:16]>/mirror.git`` (bare mirror) and
``repos/<...>/trees/<commit>/`` (one directory per commit), ``.secrets/`` (SSH keys
given as text, known hosts learnt on first use, and ``mirror-key``; mode 0700). The
directory of a repository is keyed by a random key made on first use, not by a plain
hash of its URL: a config repo that knew another repository's cache path could name it
(a kustomize ``file://`` base, a chart's ``file://`` dependency) and read it without
that repository's credentials or ``sourceRepos``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from gitops_ray import childproc
from gitops_ray.errors import SourceError
from gitops_ray.redact import redact
from gitops_ray.source.auth import Credentials, git_env, split_credentials
from gitops_ray.source.charts import ChartSource
from gitops_ray.source.http import HostNotAllowed, Http, host_allowed
from gitops_ray.source.trees import changes, existing_tree, tree
from gitops_ray.types import SourceReason

_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-fA-F]{4,39}$")
_AUTH_FAILED = ("authentication failed", "could not read username", "could not read password",
                "permission denied (publickey", "host key verification failed", "http 401",
                "http 403", "the requested url returned error: 401",
                "the requested url returned error: 403", "invalid username or password")
_TIMED_OUT = ("timed out", "timeout")
_KILLED = "Timeout: the command"  # GitPython's stderr when kill_after_timeout fired
# Make `git archive` write the commit's files as committed: a repository's own
# .gitattributes must not drop files (export-ignore) or rewrite them (export-subst).
_ARCHIVE_ATTRIBUTES = "* -export-ignore -export-subst\n"
SUBJECT_LIMIT = 120
"""Characters of a commit subject kept (it is recorded in every history entry)."""
_SUBJECTS_KEPT = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SourceAuthError(SourceError):
    """The remote rejected our credentials (or asked for some and we had none)."""

    reason = SourceReason.AUTH_FAILED


class UnreachableRemote(SourceError):
    """The remote could not be reached or is not a git repository."""

    reason = SourceReason.UNREACHABLE


class SourceTimeout(UnreachableRemote):
    """The remote did not answer within :attr:`GitSource.timeout` seconds."""

    reason = SourceReason.TIMEOUT


class UnknownRevision(SourceError):
    """The revision names no branch, tag or commit of the repository (or is ambiguous)."""

    reason = SourceReason.REVISION_NOT_FOUND


@dataclass(frozen=True)
class Checkout:
    """One commit of one repository, as a directory tree."""

    repo_url: str
    revision: str
    sha: str
    root: Path


CredentialLookup = Callable[[str], "Credentials | None"]


def match_ref(refs: Mapping[str, str], revision: str) -> str | None:
    """The commit ``revision`` names among ``ls-remote`` refs (tags peeled), if any.

    Order as in Argo CD: an exact ref name, then a branch, then a tag, then ``refs/<rev>``
    (so ``pull/12/head`` works).
    """
    for candidate in (f"{revision}^{{}}", revision, f"refs/heads/{revision}",
                      f"refs/tags/{revision}^{{}}", f"refs/tags/{revision}",
                      f"refs/{revision}^{{}}", f"refs/{revision}"):
        if candidate in refs:
            return refs[candidate]
    return None


def parse_ls_remote(output: str) -> dict[str, str]:
    """``{ref: sha}`` from ``git ls-remote`` output."""
    refs: dict[str, str] = {}
    for line in output.splitlines():
        sha, _, ref = line.partition("\t")
        if ref:
            refs[ref.strip()] = sha.strip().lower()
    return refs


class GitSource:
    """Bare mirrors and per-commit trees under ``cache_dir``.

    ``fetches`` counts the fetches made per repository URL (observability and tests).
    """

    def __init__(self, cache_dir: Path, *, credentials: CredentialLookup | None = None,
                 timeout: float = 60.0, charts: ChartSource | None = None,
                 allowed_hosts: Sequence[str] = ()) -> None:
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self.allowed_hosts = tuple(allowed_hosts)
        self._credentials = credentials or (lambda _url: None)
        self.charts = charts or ChartSource(self.cache_dir, credentials=self._credentials,
                                            http=Http(allowed_hosts=allowed_hosts))
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._key: bytes | None = None
        self.fetches: Counter[str] = Counter()
        self._subjects: dict[tuple[str, str], str] = {}
        self._subjects_guard = threading.Lock()

    # -- public ----------------------------------------------------------------------

    def resolve(self, repo_url: str, revision: str, *, chart: str = "") -> str:
        """The commit ``revision`` points to now (a full SHA), without downloading objects.

        A full SHA is returned as is; a short SHA is looked up in the local mirror
        (fetching only if it is not there) and must be unambiguous. With ``chart``, the
        repository is a Helm repository or OCI registry and the answer is the chart
        version (:mod:`gitops_ray.source.charts`).
        """
        if chart:
            return self.charts.resolve(repo_url, chart, revision)
        revision = revision.strip() or "HEAD"
        if _FULL_SHA.match(revision):
            return revision.lower()
        hexish = _SHORT_SHA.match(revision) is not None
        sha = match_ref(self._ls_remote(repo_url, revision), revision)
        if sha is None and not hexish and revision != "HEAD":
            sha = match_ref(self._ls_remote(repo_url, None), revision)  # e.g. pull/7/head
        if sha is not None:
            return sha
        if hexish:
            return self._resolve_short(repo_url, revision.lower())
        raise UnknownRevision(f"revision {revision!r} not found in {redact(repo_url)}")

    def checkout(self, repo_url: str, revision: str, *, chart: str = "") -> Checkout:
        """The tree of ``revision`` (fetched only if the commit is not local yet).

        With ``chart``: the chart's directory at the version ``revision`` names, whose
        ``sha`` is that version.
        """
        if chart:
            version, chart_dir = self.charts.checkout(repo_url, chart, revision)
            return Checkout(repo_url, revision, version, chart_dir)
        sha = self.resolve(repo_url, revision)
        with self._lock(repo_url):
            mirror = self._mirror(repo_url)
            root = existing_tree(mirror, sha)  # the usual case: no git process at all
            if root is None:
                if not _has_commit(mirror, sha):
                    self._fetch(repo_url, mirror, sha)
                if not _has_commit(mirror, sha):
                    raise UnknownRevision(f"commit {sha} (revision {revision!r}) not found "
                                          f"in {redact(repo_url)}")
                root = tree(mirror, sha)
        return Checkout(repo_url, revision, sha, root)

    def changed_paths(self, repo_url: str, old: str, new: str) -> frozenset[str] | None:
        """The repository paths that differ between two local commits.

        ``None`` when the paths alone do not say what changed (see
        :func:`gitops_ray.source.trees.changes`).
        """
        found = changes(self._mirror(repo_url), old, new)
        return frozenset(path for _, path in found) if found is not None else None

    def subject(self, repo_url: str, sha: str) -> str:
        """The subject line of commit ``sha`` (one line, at most :data:`SUBJECT_LIMIT`).

        Read from the local mirror, which has the commit once it was checked out; "" when
        it does not (nothing is fetched for it). Remembered per commit: a commit's
        message never changes.
        """
        key = (str(self.repo_dir(repo_url)), sha)
        with self._subjects_guard:
            known = self._subjects.get(key)
        if known is not None:
            return known
        found = self._read_subject(self.repo_dir(repo_url) / "mirror.git", sha)
        if found is None:
            return ""
        with self._subjects_guard:
            if len(self._subjects) >= _SUBJECTS_KEPT:
                self._subjects.pop(next(iter(self._subjects)))
            self._subjects[key] = found
        return found

    @staticmethod
    def _read_subject(mirror: Path, sha: str) -> str | None:
        if not _FULL_SHA.match(sha) or not (mirror / "HEAD").exists():
            return None
        try:
            with git.Repo(mirror) as repo:
                summary = repo.commit(sha).summary
        except (ValueError, git.GitError):
            return None
        return one_line(summary if isinstance(summary, str) else summary.decode(errors="replace"))

    def repo_dir(self, repo_url: str) -> Path:
        """Where the mirror and trees of ``repo_url`` live (keyed without credentials).

        Not derivable from the URL alone: keyed with :meth:`_mirror_key`.
        """
        bare, _ = split_credentials(repo_url, None)
        digest = hmac.new(self._mirror_key(), bare.encode(), hashlib.sha256).hexdigest()
        return self.cache_dir / "repos" / digest[:16]

    def _mirror_key(self) -> bytes:
        """The random key of the cache's directory names (``.secrets/mirror-key``, 0600)."""
        if self._key is None:
            with self._locks_guard:
                if self._key is None:
                    self._key = _read_or_make_key(self.cache_dir / ".secrets" / "mirror-key")
        return self._key

    # -- git plumbing ----------------------------------------------------------------

    def _lock(self, repo_url: str) -> threading.Lock:
        bare, _ = split_credentials(repo_url, None)
        with self._locks_guard:
            return self._locks.setdefault(bare, threading.Lock())

    def _remote(self, repo_url: str) -> tuple[str, Credentials | None]:
        """The URL git is given (no userinfo) and the credentials that go with it."""
        bare, _ = split_credentials(repo_url, None)
        return split_credentials(repo_url, self._credentials(bare))

    def _run(self, repo_url: str, args: list[str], cwd: Path | None = None) -> str:
        """Run a git command that talks to ``repo_url``; failures become SourceErrors.

        Every argument equal to ``repo_url`` is replaced by the URL without userinfo.
        """
        url, credentials = self._remote(repo_url)
        self._check_host(url)
        env = git_env(credentials, self.cache_dir / ".secrets", url)
        try:
            out = git.Git(str(cwd) if cwd else None).execute(
                ["git", *(url if a == repo_url else a for a in args)], env=env,
                kill_after_timeout=self.timeout, stdout_as_string=True,
                **childproc.popen_options())
        except git.GitCommandError as e:
            error = _classify(repo_url, str(e.stderr or e), args[0], self.timeout)
            raise type(error)(_scrub(str(error), credentials)) from None
        return str(out)

    def _check_host(self, url: str) -> None:
        """Refuse a remote whose host the settings do not allow (a local path has none)."""
        if not self.allowed_hosts or url.startswith(("file://", "/", ".")):
            return
        scp = "://" not in url and ":" in url  # git@host:org/repo
        target = "ssh://" + url.replace(":", "/", 1) if scp else url
        if "://" in target and not host_allowed(target, self.allowed_hosts):
            raise HostNotAllowed(f"{redact(url)}: its host is not among the allowed source "
                                 "hosts (setting sources.allowedHosts)")

    def _ls_remote(self, repo_url: str, revision: str | None) -> dict[str, str]:
        """Refs of the remote: HEAD alone, branches and tags, or (``None``) every ref."""
        if revision == "HEAD":
            args = ["ls-remote", "--", repo_url, "HEAD"]
        elif revision is None:
            args = ["ls-remote", "--", repo_url]
        else:
            args = ["ls-remote", "--heads", "--tags", "--", repo_url]
        return parse_ls_remote(self._run(repo_url, args))

    def _mirror(self, repo_url: str) -> Path:
        mirror = self.repo_dir(repo_url) / "mirror.git"
        if not (mirror / "HEAD").exists():
            mirror.mkdir(parents=True, exist_ok=True)
            git.Repo.init(mirror, bare=True)
        attributes = mirror / "info" / "attributes"
        if not attributes.exists():
            attributes.parent.mkdir(exist_ok=True)
            attributes.write_text(_ARCHIVE_ATTRIBUTES)
        return mirror

    def _fetch(self, repo_url: str, mirror: Path, sha: str | None = None) -> None:
        """Fetch all branches and tags (and ``sha`` itself if no ref reaches it)."""
        self.fetches[redact(repo_url)] += 1
        self._run(repo_url, ["fetch", "--quiet", "--prune", "--no-tags", "--", repo_url,
                             "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                  cwd=mirror)
        if sha and not _has_commit(mirror, sha):
            # Servers may refuse to send a commit no ref reaches; then it is unknown.
            with contextlib.suppress(SourceError):
                self._run(repo_url, ["fetch", "--quiet", "--", repo_url, sha], cwd=mirror)

    def _resolve_short(self, repo_url: str, prefix: str) -> str:
        with self._lock(repo_url):
            mirror = self._mirror(repo_url)
            sha = _local_commit(mirror, prefix, repo_url)
            if sha is None:
                self._fetch(repo_url, mirror)
                sha = _local_commit(mirror, prefix, repo_url)
        if sha is None:
            raise UnknownRevision(f"revision {prefix!r} not found in {redact(repo_url)}")
        return sha


def _read_or_make_key(path: Path) -> bytes:
    """The key in ``path``, made (32 random bytes, mode 0600) if there is none yet.

    Written to a private file first and linked into place, so two processes sharing a
    cache agree on one key and neither reads a half-written one.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mirror-key-")  # mode 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        os.unlink(tmp)
    return path.read_bytes()


def one_line(text: str, limit: int = SUBJECT_LIMIT) -> str:
    """``text``'s first line without control characters, cut to ``limit`` (with an ellipsis)."""
    line = _CONTROL.sub(" ", text.strip().splitlines()[0] if text.strip() else "").strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _has_commit(mirror: Path, sha: str) -> bool:
    try:
        git.Git(str(mirror)).execute(["git", "cat-file", "-e", f"{sha}^{{commit}}"],
                                     **childproc.popen_options())
    except git.GitCommandError:
        return False
    return True


def _local_commit(mirror: Path, prefix: str, repo_url: str) -> str | None:
    """The one local commit whose SHA starts with ``prefix``; None if there is none."""
    try:
        out = git.Git(str(mirror)).execute(
            ["git", "rev-parse", "--verify", f"{prefix}^{{commit}}"],
            stdout_as_string=True, **childproc.popen_options())
    except git.GitCommandError as e:
        if "ambiguous" in str(e.stderr):
            raise UnknownRevision(f"short SHA {prefix!r} is ambiguous in {redact(repo_url)}; "
                                  "use more characters") from None
        return None
    return str(out).strip()


def _classify(repo_url: str, stderr: str, command: str, timeout: float) -> SourceError:
    """The SourceError subclass for git's stderr, quoting its most telling line (redacted)."""
    where = redact(repo_url)
    if _KILLED in stderr:
        return SourceTimeout(f"{where} did not answer within {timeout:g} s (git {command})")
    if childproc.out_of_memory(1, stderr):
        return SourceError(childproc.explain(f"git {command} of {where}"))
    lines = _stderr_lines(stderr, repo_url)
    if auth := _first_with(lines, _AUTH_FAILED):
        return SourceAuthError(f"authentication to {where} failed: {auth}")
    if slow := _first_with(lines, _TIMED_OUT):
        return SourceTimeout(f"{where} did not answer in time: {slow}")
    telling = [ln for ln in lines if ln.startswith(("ssh:", "fatal:", "error:"))]
    return UnreachableRemote(f"cannot read repository {where}: "
                             f"{_bare((telling or lines or ['git failed'])[0])}")


def _stderr_lines(stderr: str, repo_url: str) -> list[str]:
    """Git's stderr lines (as GitPython quotes them), with the URL redacted."""
    return [re.sub(r"^(stderr:\s*)?'?", "", ln.strip()).rstrip("'")
            for ln in stderr.replace(repo_url, redact(repo_url)).splitlines()
            if ln.strip() and not ln.strip().startswith("cmdline:")]


def _first_with(lines: list[str], markers: tuple[str, ...]) -> str | None:
    line = next((ln for ln in lines if any(m in ln.lower() for m in markers)), None)
    return None if line is None else _bare(line)


def _bare(line: str) -> str:
    return re.sub(r"^(fatal|error|ssh):\s*", "", line)[:300]


def _scrub(message: str, credentials: Credentials | None) -> str:
    """``message`` with any secret of ``credentials`` masked (belt and braces)."""
    if credentials is not None and credentials.token:
        message = message.replace(credentials.token, "***")
    return redact(message)
