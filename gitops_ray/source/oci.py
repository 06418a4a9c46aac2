"""Helm charts in OCI registries, read through the distribution API (what ``helm pull`` does).

``repoURL: oci://registry.example.com/charts`` (or Argo CD's scheme-less
``registry.example.com/charts``) with ``chart: ray-cluster`` names the repository
``charts/ray-cluster`` of that registry. ``targetRevision`` is a tag (a chart version; helm
pushes ``+`` as ``_``), a semver constraint resolved against the repository's tags as Argo
CD does, or a manifest digest ``sha256:...`` (then the digest is the recorded revision).

Why the API rather than ``helm pull``: the same bounds, digest checks and failure reasons
as a Helm repository (:mod:`gitops_ray.source.charts`), with no registry login written to
a helm home. A pull is: the manifest (bounded, its digest checked when pinned), its one
layer of media type :data:`CHART_LAYER`, that blob (bounded, its sha256 checked against
the layer digest, which is what makes OCI content-addressed). Registries that want a
token (``WWW-Authenticate: Bearer realm=...``) get the usual token request, with the
repository's basic credentials; docker-registry's htpasswd takes basic auth directly.
HTTPS always: a registry on 127.0.0.1 in tests has a CA (``caFile`` in the credentials).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import urlencode, urljoin, urlsplit

from gitops_ray import limits
from gitops_ray.redact import redact
from gitops_ray.source.auth import Credentials
from gitops_ray.source.chartstore import (
    ChartStore,
    DigestMismatch,
    InvalidChart,
    check_digest,
    existing_chart,
    pick_version,
    unpack,
)
from gitops_ray.source.http import Response, check_status
from gitops_ray.source.semver import Version

CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json, "
                  "application/vnd.docker.distribution.manifest.v2+json")
MAX_TAG_PAGES = 20
TOKEN_TTL = 50.0
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def reference(repo_url: str, chart: str) -> tuple[str, str]:
    """``(https://registry, repository name)`` of ``chart`` under ``repo_url``."""
    bare = repo_url.removeprefix("oci://")
    host, _, path = bare.partition("/")
    name = "/".join(p for p in (*path.strip("/").split("/"), chart.strip("/")) if p)
    return f"https://{host}", name


def canonical(repo_url: str) -> str:
    """``oci://host/path`` for both spellings (one cache entry for both)."""
    return "oci://" + repo_url.removeprefix("oci://").strip("/")


def tag_of(version: str) -> str:
    """The tag helm pushes a chart version as (``+`` is not allowed in a tag)."""
    return version.replace("+", "_")


class OciRegistry:
    """Resolve and fetch charts from OCI registries for a :class:`ChartSource`."""

    def __init__(self, charts: ChartStore) -> None:
        self._charts = charts
        self._layers: dict[tuple[str, str, str], str] = {}  # (repo, chart, rev) -> digest
        self._tokens: dict[tuple[str, str], tuple[float, str]] = {}
        self._guard = threading.Lock()

    def resolve(self, repo_url: str, chart: str, revision: str) -> str:
        """The version (tag) or digest ``revision`` names now (the tags are listed)."""
        if _DIGEST.match(revision.strip()):
            return revision.strip()
        versions = tuple(t.replace("_", "+") for t in self._tags(repo_url, chart))
        return pick_version(versions, revision, f"chart {chart} in {redact(repo_url)}")

    def checkout(self, repo_url: str, chart: str, revision: str) -> tuple[str, Path]:
        version = revision.strip()
        if not (_DIGEST.match(version) or (Version.parse(version) is not None
                and self._known(repo_url, chart, version))):
            version = self.resolve(repo_url, chart, revision)
        where = f"chart {chart} in {redact(repo_url)} {version}"
        layer = self._known(repo_url, chart, version) or self._layer(repo_url, chart, version)
        into = self._charts.chart_dir(canonical(repo_url) + f"/{chart}", chart, version,
                                      layer.removeprefix("sha256:"))
        found = existing_chart(into)
        if found is not None:
            return version, found
        with self._charts.lock(str(into)):
            found = existing_chart(into)
            if found is not None:
                return version, found
            body = self._get(repo_url, chart, f"blobs/{layer}", self._charts.budget.chart_bytes,
                             what=f"{where} chart layer").body
            check_digest(body, layer, where, "the manifest")
            into.parent.mkdir(parents=True, exist_ok=True)
            return version, unpack(body, into, self._charts.budget, where)

    # -- registry API ----------------------------------------------------------------

    def _known(self, repo_url: str, chart: str, version: str) -> str:
        with self._guard:
            return self._layers.get((canonical(repo_url), chart, version), "")

    def _layer(self, repo_url: str, chart: str, version: str) -> str:
        """The chart layer's digest in the manifest of ``version`` (a tag or a digest)."""
        ref = version if _DIGEST.match(version) else tag_of(version)
        where = f"chart {chart} in {redact(repo_url)} {version}"
        response = self._get(repo_url, chart, f"manifests/{ref}",
                             limits.MAX_OCI_MANIFEST_BYTES, what=f"{where} manifest",
                             accept=MANIFEST_TYPES)
        if _DIGEST.match(version):
            actual = "sha256:" + hashlib.sha256(response.body).hexdigest()
            if actual != version:
                raise DigestMismatch(f"{where}: the registry sent a manifest whose digest "
                                     f"is {actual[:23]}…")
        try:
            manifest = json.loads(response.body)
            layers = [x for x in manifest.get("layers") or [] if x.get("mediaType") == CHART_LAYER]
        except (ValueError, AttributeError, TypeError):
            raise InvalidChart(f"{where}: the manifest is not JSON") from None
        if len(layers) != 1 or not _DIGEST.match(str(layers[0].get("digest"))):
            raise InvalidChart(f"{where} is not a Helm chart (no {CHART_LAYER} layer)")
        digest = str(layers[0]["digest"])
        with self._guard:
            self._layers[(canonical(repo_url), chart, version)] = digest
        return digest

    def _tags(self, repo_url: str, chart: str) -> list[str]:
        tags: list[str] = []
        path = "tags/list?n=1000"
        for _ in range(MAX_TAG_PAGES):
            response = self._get(repo_url, chart, path, limits.MAX_OCI_MANIFEST_BYTES,
                                 what=f"chart {chart} in {redact(repo_url)} tags")
            try:
                found = json.loads(response.body).get("tags") or []
            except (ValueError, AttributeError):
                found = []
            tags += [str(t) for t in found if isinstance(t, str)]
            link = _NEXT.search(response.headers.get("link", ""))
            if link is None:
                break
            path = "tags/list?" + (urlsplit(link.group(1)).query or "n=1000")
        return tags

    def _get(self, repo_url: str, chart: str, path: str, limit: int, *, what: str,
             accept: str = "") -> Response:
        base, name = reference(repo_url, chart)
        self._charts.fetches[f"{base}/v2/{name}/{path.split('?', maxsplit=1)[0]}"] += 1
        _, credentials = self._charts.credentials(repo_url)
        url = f"{base}/v2/{name}/{path}"
        headers = {"Accept": accept} if accept else {}
        scope = f"repository:{name}:pull"
        token = self._token(base, scope)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        http = self._charts.http
        response = http.request(url, limit=limit, credentials=credentials, headers=headers,
                                what=what)
        challenge = response.headers.get("www-authenticate", "")
        if response.status == 401 and challenge.lower().startswith("bearer"):
            token = self._fetch_token(challenge, scope, credentials, base, what)
            headers["Authorization"] = f"Bearer {token}"
            response = http.request(url, limit=limit, credentials=credentials,
                                    headers=headers, what=what)
        check_status(response, what)
        return response

    def _token(self, base: str, scope: str) -> str:
        with self._guard:
            found = self._tokens.get((base, scope))
        return found[1] if found and time.monotonic() - found[0] < TOKEN_TTL else ""

    def _fetch_token(self, challenge: str, scope: str, credentials: Credentials | None,
                     base: str, what: str) -> str:
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            realm = urljoin(base, realm)
        query = urlencode({"service": params.get("service", ""), "scope": scope})
        response = self._charts.http.get(f"{realm}?{query}", limit=64 * 1024,
                                         credentials=credentials, what=f"{what} token")
        try:
            answer = json.loads(response.body)
            token = str(answer.get("token") or answer.get("access_token") or "")
        except (ValueError, AttributeError):
            token = ""
        with self._guard:
            self._tokens[(base, scope)] = (time.monotonic(), token)
        return token
