"""Destination clusters: Argo CD cluster Secrets, and one client + watch cache + pipeline each.

Why a registry: an Application's ``destination`` may name another cluster, and syncing
it into ours instead is worse than not syncing it. So the controller watches the
cluster Secrets (label ``argocd.argoproj.io/secret-type: cluster``; parsed by
:mod:`gitops_ray.kube.clusters`) in Argo CD's namespace when ``argocd.enabled``, else in
the control namespace, and resolves each app's destination as Argo CD does
(:meth:`ClusterRegistry.resolve`, by the rules of :mod:`gitops_ray.reconcile.destinations`,
which the one-shot commands share): ``name`` by the Secret's ``name``, ``server`` by its
``server``; ``in-cluster``, ``https://kubernetes.default.svc`` or no destination at all is
the controller's own cluster. A destination that resolves to nothing is refused by the
pipeline with Argo CD's message (an ``InvalidSpecError``): nothing rendered, applied or
pruned anywhere.

Each remote cluster gets its own :class:`ClusterBundle`, built on first use: its
:class:`~gitops_ray.kube.Kube` (with the controller's write fence), its own
:class:`~gitops_ray.runtime.watches.LiveCache` (its watch threads, its discovery) and
its own pipeline and syncer; records stay in the control namespace of our own cluster
for every app (one :class:`~gitops_ray.sync.records.RecordStore`). A changed Secret
rebuilds only that cluster's bundle (the old watches stop); a deleted one drops it, and
its apps are refused again.

**Connection state.** Every request to a cluster feeds its own
:class:`~gitops_ray.runtime.readiness.ApiHealth`; a new bundle is probed once
(``GET /version``, :data:`~gitops_ray.reconcile.destinations.PROBE_TIMEOUT`). While a
cluster does not answer, its apps fail fast with
:class:`~gitops_ray.reconcile.destinations.ClusterUnavailable` (no request, no worker
held: sync and health ``Unknown``, a ``ComparisonError`` naming the cluster, never its
credentials) and a probe thread asks it again every
:data:`~gitops_ray.runtime.readiness.PROBE_INTERVAL` seconds; when it answers,
``on_change`` refreshes the apps. Other clusters' apps never wait for
it: its watches run in their own threads, with their own backoff.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from gitops_ray.kube import Kube
from gitops_ray.kube.clusters import (
    CLUSTER_SECRET_SELECTOR,
    ClusterConfig,
    ClusterSecretError,
    connect_cluster,
    hand_over,
    normalize_server,
)
from gitops_ray.reconcile.destinations import (
    Broken,
    ClusterUnavailable,
    answers,
    as_cluster,
    claimed_identity,
    is_local,
    read_secret,
    resolve_destination,
    unreachable,
)
from gitops_ray.reconcile.project import IN_CLUSTER_NAME, Cluster
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.redact import redact
from gitops_ray.render.applications import IN_CLUSTER_SERVER
from gitops_ray.render.apps import Application, Destination
from gitops_ray.runtime.kindwatch import KindWatch, WatchOptions
from gitops_ray.runtime.readiness import PROBE_INTERVAL, ApiHealth
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.types import MANAGED_ANNOTATION, SKIP_RECONCILE_ANNOTATION, Manifest

log = structlog.get_logger(__name__)
Build = Callable[[Kube], tuple[LiveCache, Reconciler]]
"""Make a cluster's watch cache and reconciler around its client (the runner's wiring)."""


@dataclass
class ClusterBundle:
    """Everything that talks to one destination cluster."""

    cluster: Cluster
    kube: Kube
    cache: LiveCache
    reconciler: Reconciler
    digest: str = ""
    health: ApiHealth = field(default_factory=ApiHealth)


class ClusterRegistry:
    """The cluster Secrets of ``namespace``, resolved and connected (see module doc)."""

    def __init__(self, kube: Kube, namespace: str, *, local: ClusterBundle, build: Build,
                 on_change: Callable[[], None], options: WatchOptions | None = None
                 ) -> None:
        self.namespace = namespace
        self.local = local
        self._build = build
        self._on_change = on_change
        self._lock = threading.Lock()
        self._building = threading.Lock()
        self._configs: dict[str, ClusterConfig] = {}  # by Secret name
        self._broken: dict[str, Broken] = {}  # by Secret name
        self._handed: dict[str, tuple[str, str]] = {}  # (name, server) handed over, by Secret
        self._bundles: dict[str, ClusterBundle] = {}  # by server
        self._stop = threading.Event()
        self._watch = KindWatch(
            kube, "v1", "Secret", namespace, on_event=self._on_secret, stop=self._stop,
            options=_secret_options(options or WatchOptions()))

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        threading.Thread(target=self._watch.run, name="watch-cluster-secrets",
                         daemon=True).start()
        threading.Thread(target=self._probe, name="cluster-probe", daemon=True).start()
        log.info("cluster_secrets_watched", namespace=self.namespace)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            bundles, self._bundles = list(self._bundles.values()), {}
        for bundle in bundles:
            bundle.cache.stop()

    def ready(self, wait: float) -> bool:
        """Whether the Secrets have been listed once (waits up to ``wait``)."""
        return self._watch.ready(wait)

    # -- resolution ------------------------------------------------------------------

    def resolve(self, dest: Destination) -> Cluster | str:
        """Argo CD's ``GetDestinationCluster``: the cluster, or its error message."""
        if (dest.server and dest.name) or is_local(dest):
            return resolve_destination(dest, [], [])
        self._watch.ready(self._watch.options.sync_wait)
        with self._lock:
            configs, broken = list(self._configs.values()), list(self._broken.values())
        return resolve_destination(dest, configs, broken,
                                   forbidden_in=self.namespace if self._watch.forbidden else "")

    def handed_over(self, dest: Destination) -> bool:
        """Whether the Secret of ``dest``'s cluster hands all its apps to gitops-ray.

        Argo CD's ``IsManagedClusterByServer`` looks the Secret up by server, our own
        cluster's too (a Secret for ``https://kubernetes.default.svc``), so does this.
        """
        with self._lock:
            handed = list(self._handed.values())
            known = [(c.name, c.server) for c in self._configs.values()]
        server = normalize_server(dest.server) if dest.server else ""
        if not server:
            named = {s for n, s in [*known, *handed] if n == (dest.name or IN_CLUSTER_NAME)}
            server = named.pop() if len(named) == 1 else \
                (IN_CLUSTER_SERVER if dest.name in ("", IN_CLUSTER_NAME) else "")
        return any(s == server for _, s in handed)

    def route(self, app: Application) -> ClusterBundle:
        """The bundle that syncs ``app``; :class:`ClusterUnavailable` while it is down.

        Our own for a destination that does not resolve: its pipeline then refuses it.
        """
        cluster = self.resolve(app.destination)
        if isinstance(cluster, str) or cluster.server == IN_CLUSTER_SERVER:
            return self.local
        bundle = self._bundle(cluster.server)
        if bundle.health.down:  # the same words each time: one record write, one Event
            raise unreachable(cluster)
        return bundle

    def bundles(self) -> list[ClusterBundle]:
        """The remote bundles built so far."""
        with self._lock:
            return list(self._bundles.values())

    def _bundle(self, server: str) -> ClusterBundle:
        with self._building:  # one bundle per cluster, however many workers ask at once
            with self._lock:
                config = next((c for c in self._configs.values() if c.server == server), None)
                bundle = self._bundles.get(server)
            if config is None:
                raise ClusterUnavailable(f"destination cluster {redact(server)} has no Secret")
            if bundle is not None and bundle.digest == config.digest:
                return bundle
            bundle = self._connect(config)
        _ping(bundle)  # bounded; outside the lock, so other clusters' apps do not wait
        return bundle

    def _connect(self, config: ClusterConfig) -> ClusterBundle:
        try:
            kube = connect_cluster(config)
        except ClusterSecretError as e:
            raise ClusterUnavailable(str(e)) from e
        health = ApiHealth()
        kube.hooks.append(health.observe)
        cache, reconciler = self._build(kube)
        bundle = ClusterBundle(as_cluster(config), kube, cache, reconciler, config.digest, health)
        with self._lock:
            old = self._bundles.get(config.server)
            self._bundles[config.server] = bundle
        if old is not None:
            old.cache.stop()
        log.info("cluster_connected", cluster=config.name, server=redact(config.server))
        return bundle

    # -- events ----------------------------------------------------------------------

    def _on_secret(self, kind: str, secret: Manifest) -> None:
        name = str((secret.get("metadata") or {}).get("name", ""))
        with self._lock:
            self._configs.pop(name, None)
            self._broken.pop(name, None)
            self._handed.pop(name, None)
        if kind != "DELETED":
            self._read(name, secret)
        self._drop_unused()
        log.info("cluster_secret_changed", secret=name, change=kind)
        self._on_change()

    def _read(self, name: str, secret: Manifest) -> None:
        config = read_secret(secret)
        managed, skipped = hand_over((secret.get("metadata") or {}).get("annotations"))
        if managed and skipped:  # whether or not we can connect (our own cluster's need not)
            with self._lock:
                self._handed[name] = claimed_identity(secret)
        elif managed != skipped:
            log.warning("cluster_half_handed_over", secret=name, managed=managed,
                        skip_reconcile=skipped, detail="a cluster is handed to gitops-ray "
                        f"with both {MANAGED_ANNOTATION}=true and "
                        f"{SKIP_RECONCILE_ANNOTATION}=true on its Secret")
        if isinstance(config, Broken):
            with self._lock:
                self._broken[name] = config
            log.warning("cluster_secret_unusable", secret=name, error=config.error)
            return
        with self._lock:
            self._configs[name] = config

    def _drop_unused(self) -> None:
        """Stop the bundles whose Secret went or changed (rebuilt on their next use)."""
        with self._lock:
            digests = {c.server: c.digest for c in self._configs.values()}
            stale = [s for s, b in self._bundles.items() if digests.get(s) != b.digest]
            dropped = [self._bundles.pop(s) for s in stale]
        for bundle in dropped:
            bundle.cache.stop()
            log.info("cluster_disconnected", server=redact(bundle.cluster.server))

    def _probe(self) -> None:
        """Ask the clusters that do not answer again; refresh the apps when one does."""
        while not self._stop.wait(PROBE_INTERVAL):
            back = [b for b in self.bundles() if b.health.down and _ping(b)]
            for bundle in back:
                log.info("cluster_reachable", server=redact(bundle.cluster.server))
            if back:
                self._on_change()


def _ping(bundle: ClusterBundle) -> bool:
    """One bounded ``GET /version``; whether it answered (its health records either way)."""
    return answers(bundle.kube)


def _secret_options(options: WatchOptions) -> WatchOptions:
    return WatchOptions(label_selector=CLUSTER_SECRET_SELECTOR, timeout=options.timeout,
                        sync_wait=options.sync_wait, page_size=options.page_size,
                        backoff=options.backoff)
