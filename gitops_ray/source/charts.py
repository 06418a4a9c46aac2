"""Charts from Helm repositories and OCI registries: resolve a version, fetch it once, unpack.

An Application with ``chart:`` names a chart in a Helm repository (``repoURL`` is
``http(s)://``: ``index.yaml`` plus archives) or an OCI registry (``oci://host/path`` or
Argo CD's scheme-less ``host/path``, :mod:`gitops_ray.source.oci`). ``targetRevision``
becomes a chart version as Argo CD makes it (the version itself if the index lists it,
else the greatest version the semver constraint allows, :mod:`gitops_ray.source.semver`),
and the render stage gets a directory holding that chart, like a git checkout: the
version is the revision recorded and shown everywhere, and a new version the constraint
allows is a new revision, synced like a new commit.

* **The index is read on the app's refresh cycle** (:meth:`ChartSource.resolve`, which the
  controller's revision cache calls as it calls ``git ls-remote``, so a hard refresh reads
  it again); the last one read is kept in memory, so rendering a known version reads no
  index.
* **A chart version is fetched once** (:class:`~gitops_ray.source.chartstore.ChartStore`:
  unpacked by URL, version and digest).
* **Verified**: the archive's sha256 must be the index's ``digest``; a mismatch is a
  ``DigestMismatch`` and nothing is unpacked. An index entry without a digest (hand-made
  indexes) is keyed by the digest of what was fetched.
* **Bounded**: index and archive sizes (settings ``sources.maxIndexSize``,
  ``sources.maxChartSize``); YAML aliases in an index are refused (``helm repo index``
  writes none; a bomb must not be built).

Credentials come from the same lookup as git's (by URL prefix), as basic auth and TLS
settings of :class:`~gitops_ray.source.http.Http`; they are sent to the repository's host
only (an archive on another host is fetched without them) and never reach argv, logs or
messages.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import yaml

from gitops_ray.redact import redact
from gitops_ray.source.chartstore import (
    ChartLimits,
    ChartNotFound,
    ChartStore,
    CredentialLookup,
    InvalidChart,
    bare_url,
    check_digest,
    existing_chart,
    pick_version,
    unpack,
)
from gitops_ray.source.http import Http
from gitops_ray.source.oci import OciRegistry


@dataclass(frozen=True)
class Entry:
    """One version of one chart in an index."""

    version: str
    digest: str  # sha256 hex of the archive ("" when the index has none)
    urls: tuple[str, ...]


def is_oci(repo_url: str) -> bool:
    """``oci://...``, or Argo CD's scheme-less registry form (only ever with ``chart:``)."""
    return repo_url.startswith("oci://") or "://" not in repo_url


def parse_index(text: bytes, chart: str, where: str) -> tuple[Entry, ...] | None:
    """The versions of ``chart`` in an ``index.yaml``; ``None`` if it has no such chart."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                raise InvalidChart(f"{where}: the index uses YAML aliases, which a Helm "
                                   "index never needs; refused")
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        problem = str(getattr(e, "problem", "") or "malformed")
        raise InvalidChart(f"{where}: the index is not YAML ({problem})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise InvalidChart(f"{where} is not a Helm repository index (no entries)")
    found = data["entries"].get(chart)
    if found is None:
        return None
    if not isinstance(found, list):
        raise InvalidChart(f"{where}: entries.{chart} is not a list")
    return tuple(entry for raw in found if (entry := _entry(raw)) is not None)


def _entry(raw: object) -> Entry | None:
    if not isinstance(raw, dict) or raw.get("version") is None:
        return None
    urls = raw.get("urls") or []
    digest = str(raw.get("digest") or "").lower().removeprefix("sha256:")
    return Entry(str(raw["version"]), digest, tuple(str(u) for u in urls if isinstance(u, str)))


class ChartSource(ChartStore):
    """Helm repositories (here) and OCI registries (:attr:`oci`)."""

    def __init__(self, cache_dir: Path, *, credentials: CredentialLookup, http: Http,
                 budget: ChartLimits | None = None) -> None:
        super().__init__(cache_dir, credentials=credentials, http=http,
                         budget=budget or ChartLimits())
        self._indexes: dict[tuple[str, str], tuple[Entry, ...]] = {}
        self.oci = OciRegistry(self)

    def resolve(self, repo_url: str, chart: str, revision: str) -> str:
        """The chart version ``revision`` names now (the index or the tags are read)."""
        if is_oci(repo_url):
            return self.oci.resolve(repo_url, chart, revision)
        entries = self._read_index(repo_url, chart)
        return pick_version(tuple(e.version for e in entries), revision,
                            f"chart {chart} in {redact(repo_url)}")

    def checkout(self, repo_url: str, chart: str, revision: str) -> tuple[str, Path]:
        """``(version, chart directory)``, fetched and unpacked unless already there."""
        if is_oci(repo_url):
            return self.oci.checkout(repo_url, chart, revision)
        where = f"chart {chart} in {redact(repo_url)}"
        with self._guard:
            known = self._indexes.get((bare_url(repo_url), chart))
        if known is None or revision not in {e.version for e in known}:
            known = self._read_index(repo_url, chart)
        version = pick_version(tuple(e.version for e in known), revision, where)
        entry = next(e for e in known if e.version == version)
        return version, self._archive(repo_url, chart, entry, f"{where} {version}")

    def _read_index(self, repo_url: str, chart: str) -> tuple[Entry, ...]:
        url, credentials = self.credentials(repo_url)
        index_url = url.rstrip("/") + "/index.yaml"
        where = f"Helm repository {redact(url)}"
        self.fetches[redact(index_url)] += 1
        body = self.http.get(index_url, limit=self.budget.index_bytes,
                             credentials=credentials, what=f"{where} index.yaml").body
        entries = parse_index(body, chart, where)
        if entries is None:
            raise ChartNotFound(f"{where} has no chart named {chart!r}")
        with self._guard:
            self._indexes[(bare_url(repo_url), chart)] = entries
        return entries

    def _archive(self, repo_url: str, chart: str, entry: Entry, where: str) -> Path:
        if not entry.urls:
            raise InvalidChart(f"{where}: the index lists no archive URL")
        into = self.chart_dir(repo_url, chart, entry.version, entry.digest or "nodigest")
        found = existing_chart(into) if entry.digest else None
        if found is not None:
            return found  # this version with this digest was fetched before: never again
        with self.lock(str(into)):
            found = existing_chart(into) if entry.digest else None
            if found is not None:
                return found
            body = self._download(repo_url, entry, where)
            if not entry.digest:  # an index without digests: keyed by what was fetched
                into = self.chart_dir(repo_url, chart, entry.version,
                                      hashlib.sha256(body).hexdigest())
                found = existing_chart(into)
                if found is not None:
                    return found
            into.parent.mkdir(parents=True, exist_ok=True)
            return unpack(body, into, self.budget, where)

    def _download(self, repo_url: str, entry: Entry, where: str) -> bytes:
        url, credentials = self.credentials(repo_url)
        archive_url = entry.urls[0] if "://" in entry.urls[0] else \
            urljoin(url.rstrip("/") + "/", entry.urls[0])
        if urlsplit(archive_url).netloc != urlsplit(url).netloc:
            credentials = None  # another host (a release page): helm's passCredentials false
        self.fetches[redact(archive_url)] += 1
        body = self.http.get(archive_url, limit=self.budget.chart_bytes,
                             credentials=credentials, what=f"{where} archive").body
        check_digest(body, entry.digest, where, "the index")
        return body
