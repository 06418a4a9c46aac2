"""Argo CD's repository Secrets as credentials, in ``--argocd`` mode.

An Argo CD installation keeps its repository credentials in Secrets of its namespace,
labelled ``argocd.argoproj.io/secret-type``: ``repository`` (one repository, matched by
its URL) and ``repo-creds`` (a credential template, matched by URL prefix, the longest
one first), with the keys ``url``, ``username``, ``password``, ``sshPrivateKey``,
``tlsClientCertData`` and ``tlsClientCertKey``; CA certificates of TLS servers are in the
ConfigMap ``argocd-tls-certs-cm`` (one key per host name). A gitops-ray that syncs Argo
CD's Applications in its place uses the same credentials for git, Helm repositories and
OCI registries, matched as Argo CD matches them (``util/db/repository.go``): a
``repository`` Secret for the URL first, a ``repo-creds`` template when that one has no
credentials or there is none. The settings' own ``credentials`` entries still come first.

Why a module of its own: where credentials come from is a deployment concern
(:mod:`gitops_ray.runtime.credentials`); this is one more place. The Secrets are listed
by label at most once a minute (a rotated password is seen within that), decoded here
and never logged: a Secret that cannot be read is reported by name only. Client
certificates and CAs are written to 0600 files under the cache's ``.secrets`` directory,
since TLS libraries read them from files.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

from gitops_ray.kube import Kube, KubeError
from gitops_ray.source import Credentials
from gitops_ray.source.auth import write_private

log = structlog.get_logger(__name__)
SECRET_TYPE = "argocd.argoproj.io/secret-type"
REPOSITORY, REPO_CREDS = "repository", "repo-creds"
TLS_CERTS = "argocd-tls-certs-cm"
REFRESH = 60.0


@dataclass(frozen=True)
class RepoSecret:
    """One ``repository`` or ``repo-creds`` Secret, decoded."""

    kind: str
    url: str
    username: str = ""
    password: str = field(default="", repr=False)
    ssh_key: str = field(default="", repr=False)
    cert: str = ""
    key: str = field(default="", repr=False)

    @property
    def has_credentials(self) -> bool:
        return bool(self.password or self.ssh_key or self.cert)


def normalize(url: str) -> str:
    """URLs compared as Argo CD compares them: lower case, no ``oci://``, ``.git`` or ``/``."""
    return url.strip().lower().removeprefix("oci://").removesuffix("/").removesuffix(".git")


def parse_secret(secret: Mapping[str, Any]) -> RepoSecret | None:
    """The Secret's credentials, or ``None`` if it is not a repository Secret with a URL."""
    labels = (secret.get("metadata") or {}).get("labels") or {}
    kind = labels.get(SECRET_TYPE)
    data = {k: _decode(v) for k, v in (secret.get("data") or {}).items()}
    if kind not in (REPOSITORY, REPO_CREDS) or not data.get("url"):
        return None
    return RepoSecret(kind, data["url"], data.get("username", ""), data.get("password", ""),
                      data.get("sshPrivateKey", ""), data.get("tlsClientCertData", ""),
                      data.get("tlsClientCertKey", ""))


def match(secrets: list[RepoSecret], url: str) -> RepoSecret | None:
    """Argo CD's choice: the repository's own Secret with credentials, else a template."""
    wanted = normalize(url)
    own = next((s for s in secrets if s.kind == REPOSITORY and normalize(s.url) == wanted),
               None)
    if own is not None and own.has_credentials:
        return own
    templates = sorted((s for s in secrets if s.kind == REPO_CREDS
                        and wanted.startswith(normalize(s.url))), key=lambda s: -len(s.url))
    return templates[0] if templates else own


class ArgoRepositories:
    """``url -> Credentials | None`` from Argo CD's repository Secrets (cached a minute)."""

    def __init__(self, kube: Kube, namespace: str, secrets_dir: Path, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._namespace = namespace
        self._dir = secrets_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at = -REFRESH
        self._secrets: list[RepoSecret] = []
        self._cas: dict[str, str] = {}

    def __call__(self, url: str) -> Credentials | None:
        secrets, cas = self._current()
        found = match(secrets, url)
        ca = cas.get((urlsplit(url if "://" in url else "//" + url).hostname or "").lower())
        if found is None and ca is None:
            return None
        found = found or RepoSecret(REPOSITORY, url)
        return Credentials(
            username=found.username or "git", token=found.password or None,
            ssh_key=found.ssh_key or None, ca_file=self._file("ca", ca) if ca else None,
            cert_file=self._file("cert", found.cert) if found.cert else None,
            key_file=self._file("key", found.key) if found.key else None)

    def _current(self) -> tuple[list[RepoSecret], dict[str, str]]:
        with self._lock:
            if self._clock() - self._read_at >= REFRESH:
                self._secrets, self._cas = self._read()
                self._read_at = self._clock()
            return self._secrets, self._cas

    def _read(self) -> tuple[list[RepoSecret], dict[str, str]]:
        found: list[RepoSecret] = []
        for kind in (REPOSITORY, REPO_CREDS):
            try:
                items, _ = self._kube.list("v1", "Secret", self._namespace,
                                           label_selector=f"{SECRET_TYPE}={kind}")
            except KubeError as e:
                log.warning("argocd_repo_secrets_unreadable", namespace=self._namespace,
                            error=type(e).__name__)
                return self._secrets, self._cas  # keep the last ones known
            found += [s for item in items if (s := parse_secret(item)) is not None]
        return found, self._read_cas()

    def _read_cas(self) -> dict[str, str]:
        try:
            cm = self._kube.get("v1", "ConfigMap", name=TLS_CERTS, namespace=self._namespace)
        except KubeError:
            return self._cas
        data = (cm or {}).get("data") or {}
        return {str(k).lower(): str(v) for k, v in data.items()}

    def _file(self, what: str, text: str) -> str:
        name = f"argocd-{what}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.pem"
        path = self._dir / name
        if not path.exists():
            write_private(path, text if text.endswith("\n") else text + "\n", mode=0o600)
        return str(path)


def _decode(value: object) -> str:
    try:
        return base64.b64decode(str(value)).decode()
    except ValueError:
        return ""
