"""The validated settings as frozen dataclasses.

What :func:`~gitops_ray.settings.load_settings` returns; nothing here parses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gitops_ray import limits
from gitops_ray.kube.leader import LeaseSettings
from gitops_ray.reconcile.autosync import (
    AutoSyncSettings,
)
from gitops_ray.settings.convert import Secret
from gitops_ray.types import Manifest


@dataclass(frozen=True)
class AppSourceSpec:
    """An app-of-apps directory: every Argo CD Application in ``path`` of ``repo``."""

    repo: str
    revision: str = "HEAD"
    path: str = "."


@dataclass(frozen=True)
class RepoCredential:
    """Credentials for repositories whose URL starts with ``url``.

    Files are read when git needs them (so a rotated token is picked up); inline
    ``password`` is for tests and environments without files.
    """

    url: str
    username: str = ""
    password: Secret = field(default_factory=lambda: Secret(""))
    password_file: str = ""
    ssh_key_file: str = ""
    known_hosts_file: str = ""
    secret: str = ""  # Secret name in controlNamespace (keys username/password/sshPrivateKey)
    ca_file: str = ""  # Helm repositories and registries over TLS: the CA bundle to trust
    cert_file: str = ""  # TLS client certificate and key (PEM files)
    key_file: str = ""


@dataclass(frozen=True)
class Listen:
    """Where the HTTP endpoints listen (empty disables; equal addresses share a server)."""

    metrics: str
    health: str
    webhook: str
    ui: str  # "" when the web page is off (its default, the metrics address, is resolved)


@dataclass(frozen=True)
class PodShapes:
    """The in-cluster pod-shape ConfigMaps, by name in the control namespace ("": none)."""

    instance_types: str = ""
    patches: str = ""


@dataclass(frozen=True)
class Sharding:
    """``sharding.*``: split the apps between replicas (:mod:`gitops_ray.runtime.shards`)."""

    enabled: bool = False
    shards: int = 16


@dataclass(frozen=True)
class Sources:
    """``sources.*``: which hosts sources come from, and how much of a chart is read."""

    allowed_hosts: tuple[str, ...] = ()
    timeout: float = 30.0
    max_index_bytes: int = limits.MAX_CHART_INDEX_BYTES
    max_chart_bytes: int = limits.MAX_CHART_BYTES


@dataclass(frozen=True)
class ArgoCD:
    """Argo CD integration (``argocd.*``): which in-cluster Applications are ours."""

    enabled: bool = False
    namespace: str = "argocd"
    application_namespaces: tuple[str, ...] = ()
    views: bool = False  # the resource tree and managed resources into Argo CD's Redis
    redis: str = ""  # host:port; "" = argocd-redis in Argo CD's namespace
    redis_compression: str = "gzip"
    server: str = ""  # argocd-server's URL; "" = argocd-server in Argo CD's namespace
    version: str = ""  # "" = argocd-server's /api/version

    @property
    def redis_address(self) -> str:
        return self.redis or f"argocd-redis.{self.namespace}.svc:6379"

    @property
    def server_url(self) -> str:
        return (self.server or f"https://argocd-server.{self.namespace}.svc").rstrip("/")

    @property
    def watched(self) -> tuple[str, ...]:
        """Every namespace whose Applications are watched, Argo CD's own first."""
        return tuple(dict.fromkeys((self.namespace, *self.application_namespaces)))


@dataclass(frozen=True)
class Settings:
    """Everything ``gitops-ray run`` needs, validated.

    No defaults here: :func:`load_settings` fills every field, with the defaults of
    :data:`OPTIONS`, so each default is written once.
    """

    control_namespace: str
    kubeconfig: str
    context: str
    interval: float
    jitter: float
    workers: int
    sync_parallelism: int
    debounce: float
    cache_dir: Path
    helm_bin: str
    value_file_hosts: tuple[str, ...]
    child_memory_limit: int
    app_sources: tuple[AppSourceSpec, ...]
    applications: tuple[Manifest, ...]
    credentials: tuple[RepoCredential, ...]
    webhook_secret: Secret
    webhook_advertise_url: str
    listen: Listen
    ui_actions: bool
    ui_token_audience: str
    leader_election: bool
    lease: LeaseSettings
    autosync: AutoSyncSettings
    log_format: str
    log_level: str
    shutdown_timeout: float
    pod_shapes: PodShapes
    argocd: ArgoCD
    sharding: Sharding
    sources: Sources = Sources()

    @property
    def connections(self) -> int:
        """Connections kept open per cluster: one per request that may be in flight.

        Every apply at once (``workers`` x ``sync.parallelism``), plus room for the
        watches and the rest.
        """
        return self.workers * self.sync_parallelism + WATCH_CONNECTIONS


WATCH_CONNECTIONS = 16
"""Connections a cluster's client keeps beyond the applies: watches, leases, records."""


