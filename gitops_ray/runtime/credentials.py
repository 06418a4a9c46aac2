"""Repository credentials for the controller: settings entries, files and Secrets -> git.

Why here and not in ``source``: where credentials come from is a deployment concern
(mounted files, Secrets in the control namespace, environment), while ``source`` only
needs "credentials for this URL". Entries match by URL prefix on a path boundary, longest
first, like Argo CD's credential templates (``https://git.example/team`` is not a prefix
of ``https://git.example/team-evil``, :func:`~gitops_ray.source.in_scope`); a URL no entry
covers gets the ``GITOPS_RAY_GIT_*`` variables only if it is on the host of a configured
app source (``repo``, ``appSources``) or under ``GITOPS_RAY_GIT_URL``. Secrets use Argo
CD's repository keys (``username``, ``password``, ``sshPrivateKey``) so existing
repository Secrets can be reused.

Files and Secrets are re-read at most once a minute, so a rotated token is picked up
without a restart. Nothing read here is ever logged; a Secret that cannot be read is
reported by name only, and git then fails with an authentication error for that app
alone.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from gitops_ray.kube import Kube, KubeError
from gitops_ray.runtime.argorepos import ArgoRepositories
from gitops_ray.settings import RepoCredential, Settings, Sources
from gitops_ray.source import Credentials, GitSource, env_lookup, in_scope
from gitops_ray.source.charts import ChartSource
from gitops_ray.source.chartstore import ChartLimits
from gitops_ray.source.http import Http

log = structlog.get_logger(__name__)
REFRESH = 60.0


def git_source(settings: Settings, kube: Kube) -> GitSource:
    """The controller's :class:`GitSource`, with credentials and bounds from the settings.

    Git, Helm repositories and OCI registries alike. A URL no entry covers gets Argo CD's
    repository Secrets (``--argocd``), else the ``GITOPS_RAY_GIT_*`` variables for the
    hosts of the configured app sources.
    """
    env = env_lookup(s.repo for s in settings.app_sources)
    argo = (ArgoRepositories(kube, settings.argocd.namespace, settings.cache_dir / ".secrets")
            if settings.argocd.enabled else None)

    def fallback(url: str) -> Credentials | None:
        return (argo(url) if argo is not None else None) or env(url)

    lookup = CredentialLookup(settings.credentials, kube, settings.control_namespace,
                              fallback=fallback)
    return sources_for(settings.cache_dir, settings.sources, lookup)


def sources_for(cache_dir: Path, sources: Sources,
                lookup: Callable[[str], Credentials | None] | None = None) -> GitSource:
    """A :class:`GitSource` (with its charts) under the ``sources.*`` settings."""
    lookup = lookup or (lambda _url: None)
    http = Http(timeout=sources.timeout, allowed_hosts=sources.allowed_hosts)
    charts = ChartSource(cache_dir, credentials=lookup, http=http,
                         budget=ChartLimits(index_bytes=sources.max_index_bytes,
                                            chart_bytes=sources.max_chart_bytes))
    return GitSource(cache_dir, credentials=lookup, charts=charts,
                     allowed_hosts=sources.allowed_hosts)


class CredentialLookup:
    """``url -> Credentials | None`` for :class:`GitSource`, cached for :data:`REFRESH` s."""

    def __init__(self, entries: Sequence[RepoCredential], kube: Kube, namespace: str, *,
                 fallback: Callable[[str], Credentials | None] = lambda _url: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._entries = tuple(sorted(entries, key=lambda c: -len(c.url)))
        self._fallback = fallback
        self._kube = kube
        self._namespace = namespace
        self._clock = clock
        self._cache: dict[str, tuple[float, Credentials | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, url: str) -> Credentials | None:
        entry = next((e for e in self._entries if in_scope(url, e.url)), None)
        if entry is None:
            return self._fallback(url)
        with self._lock:
            cached = self._cache.get(entry.url)
        if cached is not None and self._clock() - cached[0] < REFRESH:
            return cached[1]
        credentials = self._materialize(entry)
        with self._lock:
            self._cache[entry.url] = (self._clock(), credentials)
        return credentials

    def _materialize(self, entry: RepoCredential) -> Credentials | None:
        if entry.secret:
            return self._from_secret(entry)
        token = entry.password.reveal() or _read(entry.password_file) or None
        return Credentials(username=entry.username or "git", token=token,
                           ssh_key_file=entry.ssh_key_file or None,
                           known_hosts_file=entry.known_hosts_file or None, scope=entry.url,
                           **_tls(entry))

    def _from_secret(self, entry: RepoCredential) -> Credentials | None:
        try:
            secret = self._kube.get("v1", "Secret", name=entry.secret, namespace=self._namespace)
        except KubeError as e:
            log.warning("repo_secret_unreadable", secret=entry.secret, error=type(e).__name__)
            return None
        if secret is None:
            log.warning("repo_secret_missing", secret=entry.secret, namespace=self._namespace)
            return None
        data = {k: _decode(v) for k, v in (secret.get("data") or {}).items()}
        return Credentials(username=data.get("username") or entry.username or "git",
                           token=data.get("password") or None,
                           ssh_key=data.get("sshPrivateKey") or None,
                           known_hosts_file=entry.known_hosts_file or None, scope=entry.url,
                           **_tls(entry))


def _tls(entry: RepoCredential) -> dict[str, str | None]:
    return {"ca_file": entry.ca_file or None, "cert_file": entry.cert_file or None,
            "key_file": entry.key_file or None}


def _read(path: str) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError as e:
        log.warning("credential_file_unreadable", path=path, error=e.strerror)
        return ""


def _decode(value: object) -> str:
    try:
        return base64.b64decode(str(value)).decode()
    except ValueError:
        return ""
