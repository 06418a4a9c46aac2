"""Destination clusters for the one-shot commands: each app in the cluster it names.

Why: an Application's ``destination`` may name another cluster (an Argo CD cluster
Secret), and ``sync`` applying it to ours instead is worse than not syncing it at all. The
controller watches the Secrets (its cluster registry); ``sync``, ``diff``,
``get``, ``status --refresh``, ``wait``, ``rollback``, ``restart`` and ``delete`` read
them once, on the first app that names another cluster: one LIST by the label
``argocd.argoproj.io/secret-type: cluster`` in Argo CD's namespace with
``--argocd``/``--argocd-namespace``, else in ``--control-namespace``, as the controller
does. A Forbidden list means no other cluster, and the app gets the controller's
``InvalidSpecError`` saying so.

Each app's destination is resolved by the controller's own function
(:func:`~gitops_ray.reconcile.destinations.resolve_destination`); a destination that resolves to
nothing is refused by our cluster's pipeline, which writes nothing anywhere. Each cluster
used gets its own client and pipeline, built on first use; the records, pod-shape
ConfigMaps, AppProjects and ``argocd-cm`` stay our cluster's. The commands that start from
a record (``get``, ``wait``, ``restart``, ``delete``) use the destination it keeps
(``destinationName``/``destinationServer``, :func:`recorded_destination`); ``delete`` of
an app whose destination resolves to no cluster orphans its objects, as the controller
does. A cluster that does not answer one bounded probe
(:data:`~gitops_ray.reconcile.destinations.PROBE_TIMEOUT`) fails its apps with the
controller's message (:func:`~gitops_ray.reconcile.destinations.unreachable`) and the other
apps go on.
Credentials stay in memory: no message names them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from gitops_ray.cli.common import PipelineFor, argocd_namespace, connect, pipeline_factory
from gitops_ray.kube import Forbidden, Kube
from gitops_ray.kube.clusters import (
    CLUSTER_SECRET_SELECTOR,
    ClusterConfig,
    ClusterSecretError,
    connect_cluster,
)
from gitops_ray.reconcile.destinations import (
    Broken,
    ClusterUnavailable,
    answers,
    is_local,
    read_secret,
    resolve_destination,
    unreachable,
)
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.reconcile.project import Cluster
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.applications import IN_CLUSTER_SERVER
from gitops_ray.render.apps import Application, Destination
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore


class Destinations:
    """Our cluster's client and pipeline, and another's for each destination cluster.

    Pipelines need the app options (``--cache-dir``, ``--helm``, ...); a command without
    them (``delete``) uses the clients alone.
    """

    def __init__(self, opts: dict[str, Any], *, parallelism: int = 1) -> None:
        self._opts = opts
        self._parallelism = parallelism  # of each sync's applies (``sync.parallelism``)
        self._kube = connect(opts)
        self.store = RecordStore(self._kube, opts["control_namespace"])
        self.namespace = argocd_namespace(opts) or str(opts["control_namespace"])
        self._lock = threading.Lock()
        self._listing = threading.Lock()
        self._secrets: tuple[list[ClusterConfig], list[Broken], bool] | None = None
        self._clients: dict[str, Kube | str] = {}  # by server: its client, or why none
        self._pipelines: dict[str, Pipeline] = {}  # by server ("": ours)
        self._reconcilers: dict[str, Reconciler] = {}
        self._make: PipelineFor | None = None

    @property
    def local(self) -> Pipeline:
        """Our cluster's pipeline (also the one that refuses an unknown destination)."""
        return self._pipeline("", self._kube)

    @property
    def source(self) -> GitSource:
        return self.local.source

    def resolve(self, dest: Destination) -> Cluster | str:
        """The controller's resolution, among the Secrets read once."""
        if is_local(dest) or (dest.name and dest.server):
            return resolve_destination(dest, [], [])
        configs, broken, forbidden = self._read()
        return resolve_destination(dest, configs, broken,
                                   forbidden_in=self.namespace if forbidden else "")

    def pipeline(self, app: Application) -> Pipeline:
        """The pipeline of ``app``'s cluster; :class:`ClusterUnavailable` when it is down.

        Ours for a destination that resolves to no cluster: its pipeline refuses the app.
        """
        server, kube = self._target(app.destination)
        return self._pipeline(server, kube)

    def reconciler(self, app: Application) -> Reconciler:
        """The pipeline and syncer of ``app``'s cluster (records: ours)."""
        server, kube = self._target(app.destination)
        pipeline = self._pipeline(server, kube)
        with self._lock:
            found = self._reconcilers.get(server)
            if found is None:
                found = self._reconcilers[server] = Reconciler(
                    pipeline, Syncer(pipeline.kube, self.store, parallelism=self._parallelism,
                                     app_events=True))
        return found

    def kube(self, dest: Destination) -> Kube:
        """The client of the cluster of an app with this destination (ours if it has none).

        :class:`ClusterUnavailable` when it resolves to no cluster (nothing is read
        elsewhere instead) or does not answer.
        """
        cluster = self.resolve(dest)
        if isinstance(cluster, str):
            raise ClusterUnavailable(cluster)
        return self._target(dest)[1]

    def _target(self, dest: Destination) -> tuple[str, Kube]:
        """The remote cluster's server and client, or ``("", ours)``."""
        cluster = self.resolve(dest)
        if isinstance(cluster, str) or cluster.server == IN_CLUSTER_SERVER:
            return "", self._kube
        with self._lock:  # one client and one probe per cluster, however many apps ask
            found = self._clients.get(cluster.server)
            if found is None:
                found = self._clients[cluster.server] = self._connect(cluster)
        if isinstance(found, str):
            raise ClusterUnavailable(found)
        return cluster.server, found

    def _pipeline(self, server: str, kube: Kube) -> Pipeline:
        with self._lock:
            found = self._pipelines.get(server)
            if found is None:
                if self._make is None:  # read once: settings, pod shapes, argocd-cm
                    self._make = pipeline_factory(self._opts, self._kube, self.store)
                found = self._pipelines[server] = self._make(kube, self.resolve)
        return found

    def _read(self) -> tuple[list[ClusterConfig], list[Broken], bool]:
        """The cluster Secrets, listed once: usable ones, unusable ones, whether Forbidden."""
        with self._listing:
            if self._secrets is None:
                self._secrets = _list_secrets(self._kube, self.namespace)
            return self._secrets

    def _connect(self, cluster: Cluster) -> Kube | str:
        config = next(c for c in self._read()[0] if c.server == cluster.server)
        try:
            kube = connect_cluster(config)
        except ClusterSecretError as e:
            return str(e)
        return kube if answers(kube) else str(unreachable(cluster))


def recorded_destination(status: Mapping[str, Any]) -> Destination:
    """The destination an app's record names (ours for a record that names none)."""
    return Destination(namespace=str(status.get("destinationNamespace") or ""),
                       server=str(status.get("destinationServer") or ""),
                       name=str(status.get("destinationName") or ""))


def _list_secrets(kube: Kube, namespace: str) -> tuple[list[ClusterConfig], list[Broken], bool]:
    try:
        secrets, _ = kube.list("v1", "Secret", namespace, label_selector=CLUSTER_SECRET_SELECTOR)
    except Forbidden:  # RBAC: no other cluster, and the refusal says why
        return [], [], True
    read = [read_secret(s) for s in secrets]
    return ([c for c in read if isinstance(c, ClusterConfig)],
            [b for b in read if isinstance(b, Broken)], False)
