"""What every chart source shares: the cache, bounds, failures and a safe unpacker.

:class:`ChartStore` is the part of :class:`~gitops_ray.source.charts.ChartSource` the Helm
repository and OCI readers both use: the HTTP client, the bounds, the credentials lookup,
the fetch counters and the directory a chart version is unpacked into
(``charts/<sha256(repo)[:16]>/<chart>/<version>-<digest[:16]>/``, so a version with a
known digest is never fetched again). Unpacking accepts only regular files and
directories under the archive's one top directory, within the size and file-count bounds.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gitops_ray import limits
from gitops_ray.source.auth import Credentials, split_credentials
from gitops_ray.source.http import Http, ReasonedSourceError, TooLarge
from gitops_ray.source.semver import ConstraintError, best_match, parse_constraint
from gitops_ray.types import SourceReason

LATEST = ("", "HEAD", "latest")  # no targetRevision: the greatest stable version
CredentialLookup = Callable[[str], "Credentials | None"]


class ChartNotFound(ReasonedSourceError):
    reason = SourceReason.CHART_NOT_FOUND


class NoMatchingVersion(ReasonedSourceError):
    reason = SourceReason.REVISION_NOT_FOUND


class DigestMismatch(ReasonedSourceError):
    reason = SourceReason.DIGEST_MISMATCH


class InvalidChart(ReasonedSourceError):
    reason = SourceReason.INVALID_CHART


@dataclass(frozen=True)
class ChartLimits:
    """How much of a chart source is read (settings ``sources.*``)."""

    index_bytes: int = limits.MAX_CHART_INDEX_BYTES
    chart_bytes: int = limits.MAX_CHART_BYTES
    unpacked_bytes: int = limits.MAX_CHART_UNPACKED_BYTES
    files: int = limits.MAX_CHART_FILES


class ChartStore:
    """The HTTP client, bounds, credentials and cache directory of the chart readers."""

    def __init__(self, cache_dir: Path, *, credentials: CredentialLookup, http: Http,
                 budget: ChartLimits) -> None:
        self.cache_dir = Path(cache_dir) / "charts"
        self.http = http
        self.budget = budget
        self._credentials = credentials
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.fetches: Counter[str] = Counter()

    def credentials(self, url: str) -> tuple[str, Credentials | None]:
        """The URL without userinfo and the credentials to use with it."""
        bare, _ = split_credentials(url, None)
        return split_credentials(url, self._credentials(bare))

    def chart_dir(self, repo_url: str, chart: str, version: str, digest: str) -> Path:
        """Where one version of one chart is unpacked (keyed by URL, version and digest)."""
        repo = hashlib.sha256(bare_url(repo_url).encode()).hexdigest()[:16]
        safe = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{version}-{digest[:16]}")
        return self.cache_dir / repo / re.sub(r"[^A-Za-z0-9._-]", "_", chart) / safe

    def lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


def pick_version(versions: tuple[str, ...], revision: str, where: str) -> str:
    """The version ``revision`` names: itself if listed, else the greatest it allows."""
    wanted = revision.strip()
    if wanted in versions:
        return wanted
    try:
        constraint = parse_constraint("*" if wanted in LATEST else wanted)
    except ConstraintError as e:
        raise NoMatchingVersion(f"{where}: targetRevision {revision!r} is neither a version "
                                f"nor a version constraint ({e})") from None
    found = best_match(versions, constraint)
    if found is None:
        raise NoMatchingVersion(f"{where}: no version matches {revision!r} (the "
                                f"{len(versions)} known: {_some(versions)})")
    return found


def _some(versions: tuple[str, ...]) -> str:
    shown = ", ".join(versions[:8])
    return shown + (", ..." if len(versions) > 8 else "") if versions else "none"


def unpack(archive: bytes, into: Path, budget: ChartLimits, where: str) -> Path:
    """Unpack a chart archive into ``into`` (which must not exist); its chart directory."""
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=into.parent))
    try:
        top = _extract(archive, tmp, budget, where)
        if not (tmp / top / "Chart.yaml").is_file():
            raise InvalidChart(f"{where}: the archive has no {top}/Chart.yaml")
        try:
            os.rename(tmp, into)
        except OSError:  # another thread unpacked the same digest first: keep theirs
            if not (into / top / "Chart.yaml").is_file():
                raise
        return into / top
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _extract(archive: bytes, target: Path, budget: ChartLimits, where: str) -> str:
    total, count, tops = 0, 0, set()
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar:
                count += 1
                total += max(member.size, 0)
                if count > budget.files or total > budget.unpacked_bytes:
                    raise TooLarge(f"{where}: the archive unpacks to more than "
                                   f"{budget.files:,} files or {budget.unpacked_bytes:,} bytes")
                tops.add(_check_member(member, where))
                if len(tops) > 1:
                    raise InvalidChart(f"{where}: the archive holds more than one directory")
                _write_member(tar, member, target)
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise InvalidChart(f"{where}: not a chart archive ({type(e).__name__})") from None
    if not tops:
        raise InvalidChart(f"{where}: the archive is empty")
    return tops.pop()


def _check_member(member: tarfile.TarInfo, where: str) -> str:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise InvalidChart(f"{where}: archive path {member.name[:100]!r} leaves the chart")
    if not (member.isfile() or member.isdir()):
        raise InvalidChart(f"{where}: archive entry {member.name[:100]!r} is not a regular "
                           "file or directory (links are refused)")
    return path.parts[0]


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    dest = target.joinpath(*PurePosixPath(member.name).parts)
    if member.isdir():
        dest.mkdir(parents=True, exist_ok=True)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        return
    with source, open(dest, "wb") as out:
        shutil.copyfileobj(source, out)


def check_digest(body: bytes, digest: str, where: str, source: str) -> None:
    """Raise :class:`DigestMismatch` unless ``body``'s sha256 is ``digest`` (if given)."""
    if not digest:
        return
    actual = hashlib.sha256(body).hexdigest()
    if actual != digest.lower().removeprefix("sha256:"):
        raise DigestMismatch(f"{where}: the archive's sha256 is {actual[:16]}…, "
                             f"{source} says {digest.removeprefix('sha256:')[:16]}…; "
                             "not used")


def existing_chart(into: Path) -> Path | None:
    """The chart directory unpacked at ``into`` before, if any."""
    if not into.is_dir():
        return None
    tops = [p for p in into.iterdir() if (p / "Chart.yaml").is_file()]
    return tops[0] if len(tops) == 1 else None


def bare_url(repo_url: str) -> str:
    """``repo_url`` without userinfo or a trailing slash (the cache's key)."""
    return split_credentials(repo_url, None)[0].rstrip("/")
