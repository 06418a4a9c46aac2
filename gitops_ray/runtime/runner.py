"""``gitops-ray run``: wire settings into a running controller, and shut it down cleanly.

Why one object owns every thread: start-up and shutdown order is where controllers lose
data. Start: HTTP (probes answer at once), the scheduler, the first catalog
load, then leader election. SIGTERM: stop polling, stop leading (waiting for a running
sync to finish, bounded by ``shutdownTimeout``), **release the lease** so a replica
takes over immediately instead of after the lease duration, drain the workers, stop the
watches and the HTTP servers. Losing the lease (renewal failed) exits with status 1, as
client-go controllers do, so Kubernetes restarts the pod as a clean follower.

This module is the wiring and that order, nothing else. The components call back into
rooms built after them (the controller needs the work queue, the queue's turns need the
controller), so those callbacks are late-bound through the :class:`Runtime`, and every
cycle of the wiring is here in :meth:`Runtime.__init__`. The rooms:

* :mod:`gitops_ray.runtime.triggers`: every trigger (watch events, pod-shape and
  argocd-cm edits, Application events, polls, clusters that changed) and the turns of
  the one :class:`~gitops_ray.runtime.queue.WorkQueue` they feed;
* :mod:`gitops_ray.runtime.pushes`: the push webhook, its refreshes and its forwarding
  to the leader (or, sharded, to each member holding a matched app's shard);
* :mod:`gitops_ray.runtime.shardwork`: with ``sharding.enabled``, what this replica
  does when :class:`~gitops_ray.runtime.shards.ShardCoordinator` says its shards changed
  (there is no leader Lease then; on SIGTERM the controller's writes are drained before
  every shard Lease is released);
* :mod:`gitops_ray.runtime.routes`: the HTTP route table, ``/healthz``, ``/readyz``
  (from :mod:`gitops_ray.runtime.readiness`; ``gitops_ray_ready{check}`` in the metrics)
  and ``/metrics``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import signal
import threading
import time
from collections.abc import Callable

import structlog

from gitops_ray import childproc
from gitops_ray.heap import SETTLE_EVERY_S, Heap
from gitops_ray.kube import Kube, KubeError
from gitops_ray.kube.fence import WriteFence
from gitops_ray.kube.leader import LeaderElector
from gitops_ray.kube.outbox import Outbox
from gitops_ray.reconcile.argocdcm import ARGOCD_CM, configmap_settings
from gitops_ray.reconcile.pipeline import (
    Pipeline,
    ShapesSource,
    SystemSource,
    configmap_shapes,
)
from gitops_ray.reconcile.project import IN_CLUSTER, Cluster, ProjectsFrom
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.apps import Application, Destination
from gitops_ray.render.tools import RenderTools
from gitops_ray.runtime.argocd import ArgoBridge, ClusterApplications, StatusWriter
from gitops_ray.runtime.argoredis import ArgoViews
from gitops_ray.runtime.catalog import Catalog
from gitops_ray.runtime.clusters import ClusterBundle, ClusterRegistry
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.credentials import git_source
from gitops_ray.runtime.inline import parse_inline
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.pushes import LEADER_URL_ANNOTATION, PushWebhook
from gitops_ray.runtime.queue import WorkQueue
from gitops_ray.runtime.readiness import (
    PROBE_INTERVAL,
    ApiHealth,
    Check,
    CheckResult,
    RefreshOutcomes,
    evaluate,
)
from gitops_ray.runtime.revisions import RECENT, Revisions
from gitops_ray.runtime.routes import Probes, route_table, web_site
from gitops_ray.runtime.scheduling import Scheduler
from gitops_ray.runtime.server import HttpServers, Refusal, group_routes
from gitops_ray.runtime.shards import ShardCoordinator
from gitops_ray.runtime.shardwork import ShardWork
from gitops_ray.runtime.triggers import CATALOG, CLUSTERS, Triggers
from gitops_ray.runtime.watches import LiveCache, NamedObjects
from gitops_ray.settings import Settings
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore

log = structlog.get_logger(__name__)
HEAP_JOB = "(heap)"  # scheduler job id of the heap settle; never a valid app name


class Runtime:
    """The running controller: every component, started and stopped in order."""

    def __init__(self, settings: Settings, *, kube: Kube | None = None) -> None:
        self.settings = settings
        childproc.configure(settings.child_memory_limit)  # every helm, kustomize, git, jq
        self.metrics = Metrics()
        self.kube = kube or Kube.connect(settings.kubeconfig or None, settings.context or None)
        self.kube.keep_connections(settings.connections)
        self.kube.hooks.append(self.metrics.observe_request)
        sharded = settings.sharding.enabled  # then never granted: writes need a shard's scope
        self.fence = WriteFence() if settings.leader_election or sharded else None
        self.kube.fence = self.fence  # every write checks the lease (kube.fence)
        self.kube.outbox = self._outbox()  # Events are posted off the workers
        self.api_health = ApiHealth()
        self.kube.hooks.append(self.api_health.observe)
        self.refreshes = RefreshOutcomes()
        self.heap = Heap()
        self.stopping = threading.Event()
        self._shut_down = False
        self._shutdown_lock = threading.Lock()
        self.ready = threading.Event()
        self.exit_code = 0
        # Callbacks into self.triggers and self.shard_work are late-bound (the lambdas, so
        # PLW0108 is off for them): those rooms need the controller, built after these.
        self.cache = LiveCache(
            self.kube, metrics=self.metrics,
            on_event=lambda kind, obj: self.triggers.on_watch_event(kind, obj))  # noqa: PLW0108
        self.queue = WorkQueue(
            lambda key, reason: self.triggers.work(key, reason),  # noqa: PLW0108
            workers=settings.workers,
            standby=(lambda key: self.triggers.standby(key)) if sharded else None)  # noqa: PLW0108
        self.scheduler = Scheduler(lambda key: self.queue.submit(key, "due", urgent=True))
        self.shape_configmaps: NamedObjects | None = None
        self.argocd_cm: NamedObjects | None = None
        self.applications = (ClusterApplications(
            self.kube, settings.argocd, metrics=self.metrics,
            notify=lambda name, change: self.triggers.on_application(name, change))  # noqa: PLW0108
            if settings.argocd.enabled else None)
        self.shards = self._shards()
        self.controller = self._controller()
        self.catalog, self.revisions = self.controller.catalog, self.controller.revisions
        self.elector = self._elector()
        self.triggers = Triggers(settings, self.controller, self.queue, self.scheduler,
                                 self.cache, self.metrics, self.refreshes, self.applications,
                                 self.ready)
        self.shard_work = (ShardWork(self.shards, self.controller, self.queue, self.metrics)
                           if self.shards is not None else None)
        self.http = self._http()
        self.metrics.readiness.source = lambda: [(r.check.value, r.ok)
                                                 for r in self.readiness()]
        self._threads: list[threading.Thread] = []

    def _controller(self) -> Controller:
        s = self.settings
        store = RecordStore(self.kube, s.control_namespace, lookup=self.cache.known)
        source = git_source(s, self.kube)
        projects = (ProjectsFrom(self.applications.project, s.argocd.namespace)
                    if self.applications is not None else None)
        shapes, system = self._pod_shapes(), self._argocd_settings()

        def reconciler(kube: Kube, cache: LiveCache) -> Reconciler:
            """The pipeline and syncer of one cluster; the records always in ours."""
            pipeline = Pipeline(kube, source, store, tools=RenderTools(
                                helm_bin=s.helm_bin, value_file_hosts=s.value_file_hosts),
                                live=cache.get, live_version=cache.version,
                                events=cache.ray, shapes=shapes, projects=projects,
                                system=system, clusters=self._resolve,
                                generation=functools.partial(_heard, cache, self.cache))
            return Reconciler(pipeline, Syncer(kube, store, live_lookup=cache.lookup,
                                               parallelism=s.sync_parallelism))

        local = reconciler(self.kube, self.cache)
        self.clusters = self._clusters(local, reconciler)
        if self.applications is not None:
            self.applications.handed_over = self.clusters.handed_over
        argocd = (ArgoBridge(self.applications, StatusWriter(self.kube, self.applications),
                             ArgoViews(self.kube, s.argocd) if s.argocd.views else None)
                  if self.applications is not None else None)
        return Controller(
            reconciler=local, cache=self.cache, route=self._route,
            catalog=Catalog(source, s.app_sources, parse_inline(s.applications),
                            cluster=self.applications),
            revisions=Revisions(source.resolve), metrics=self.metrics, autosync=s.autosync,
            identity=s.lease.identity, requeue=self.scheduler.schedule, fence=self.fence,
            recent=min(RECENT, s.interval / 2) if s.interval > 0 else RECENT,
            on_refreshed=self.refreshes.observe, argocd=argocd, shards=self.shards)

    def _clusters(self, local: Reconciler,
                  reconciler: Callable[[Kube, LiveCache], Reconciler]) -> ClusterRegistry:
        """Destination clusters from cluster Secrets (see :mod:`gitops_ray.runtime.clusters`).

        In Argo CD's namespace with ``argocd.enabled``, else in the control namespace.
        """
        def build(kube: Kube) -> tuple[LiveCache, Reconciler]:
            kube.fence = self.fence  # a write to any cluster needs the lease
            kube.outbox = self._outbox()
            kube.keep_connections(self.settings.connections)
            kube.hooks.append(self.metrics.observe_request)
            cache = LiveCache(kube, metrics=self.metrics, on_event=lambda kind, obj:
                              self.triggers.on_cluster_event(cache, obj))
            return cache, reconciler(kube, cache)

        namespace = (self.settings.argocd.namespace if self.settings.argocd.enabled
                     else self.settings.control_namespace)
        return ClusterRegistry(self.kube, namespace, build=build,
                               local=ClusterBundle(IN_CLUSTER, self.kube, self.cache, local),
                               on_change=lambda: self.queue.submit(CLUSTERS, "cluster-changed"))

    def _outbox(self) -> Outbox:
        """A cluster's queue of Events to post (:mod:`gitops_ray.kube.outbox`)."""
        return Outbox(name="events", on_drop=self.metrics.events_dropped.inc)

    def _resolve(self, dest: Destination) -> Cluster | str:
        return self.clusters.resolve(dest)  # a method: the registry is made after pipelines

    def _route(self, app: Application) -> tuple[Reconciler, LiveCache]:
        bundle = self.clusters.route(app)
        return bundle.reconciler, bundle.cache

    def _pod_shapes(self) -> ShapesSource | None:
        """The pod-shape ConfigMaps, read from watches on their names.

        An edit refreshes every app (the render cache is keyed by the ConfigMaps' content,
        so only then are apps re-rendered).
        """
        names, namespace = self.settings.pod_shapes, self.settings.control_namespace
        if not (names.instance_types or names.patches):
            return None
        self.shape_configmaps = self.cache.watch_named(
            "v1", "ConfigMap", namespace, (names.instance_types, names.patches),
            on_event=lambda kind, obj: self.triggers.on_shapes_event(kind, obj))  # noqa: PLW0108
        return configmap_shapes(self.shape_configmaps.get, namespace=namespace,
                                instance_types=names.instance_types, patches=names.patches)

    def _argocd_settings(self) -> SystemSource | None:
        """Argo CD's argocd-cm, read from a watch on its name when ``argocd.enabled``."""
        if not self.settings.argocd.enabled:
            return None
        namespace = self.settings.argocd.namespace
        self.argocd_cm = self.cache.watch_named(
            "v1", "ConfigMap", namespace, (ARGOCD_CM,),
            on_event=lambda kind, obj: self.triggers.on_argocd_cm_event(kind, obj))  # noqa: PLW0108
        return configmap_settings(self.argocd_cm.get, namespace=namespace)

    def _http(self) -> HttpServers:
        """The HTTP servers of every route (:mod:`gitops_ray.runtime.routes`)."""
        webhook = PushWebhook(self.settings, self.controller, self.queue, self.metrics,
                              self.elector, self.shards)
        site = web_site(self.settings, kube=self.kube, controller=self.controller,
                        cache=self.cache, queue=self.queue)
        probes = Probes(self.scheduler, self.stopping, self.readiness, self.metrics)
        table = route_table(self.settings, site=site, probes=probes, webhook=webhook.route())
        return HttpServers(group_routes(table), on_refused=self._refused)

    def _refused(self, reason: Refusal) -> None:
        self.metrics.http_refused.labels(reason.value).inc()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start everything in the background (see the module docstring for the order)."""
        self.http.start()
        self.scheduler.start()
        self.heap.tune()
        self.scheduler.every(HEAP_JOB, SETTLE_EVERY_S, self._settle_heap, now=True)
        if self.shape_configmaps is not None:
            self.shape_configmaps.start()
        if self.argocd_cm is not None:
            self.argocd_cm.start()
        if self.applications is not None:
            self.applications.start()
        self.clusters.start()
        if self.catalog.specs:
            self.triggers.poll(CATALOG)
        self.queue.submit(CATALOG, "startup")
        self._spawn(self._probe_api, "api-probe")
        if self.shards is not None:
            self._spawn(self._hold_shards, "shards")
        elif self.elector is None:
            self._start_leading()
        else:
            self._spawn(self._elect, "leader-election")
        log.info("controller_started", identity=self.settings.lease.identity,
                 leader_election=self.elector is not None, app_sources=len(self.catalog.specs),
                 shards=self.settings.sharding.shards if self.shards is not None else 0)

    def run(self) -> int:
        """Start, block until SIGTERM/SIGINT (or a lost lease), shut down; the exit code."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.start()
        self.stopping.wait()
        self.shutdown()
        return self.exit_code

    def shutdown(self) -> None:
        """Stop everything; only the first call does anything (a stopped runtime stays so)."""
        with self._shutdown_lock:
            if self._shut_down:
                return
            self._shut_down = True
        log.info("controller_stopping")
        self.stopping.set()
        self.scheduler.stop()  # no job runs after this returns
        self.heap.release()
        for thread in self._threads:
            thread.join(self.settings.shutdown_timeout + self.settings.lease.retry_period)
        if self.elector is None and self.shards is None:
            self.controller.stop_leading(self.settings.shutdown_timeout)
        self.queue.drain(self.settings.shutdown_timeout)
        self._flush_events()  # without a lease (a lost one refuses them at once)
        self.cache.stop()
        self.clusters.stop()
        if self.applications is not None:
            self.applications.stop()
        self.http.stop()
        log.info("controller_stopped", exit_code=self.exit_code)

    def _flush_events(self) -> None:
        """Post the Events the last syncs queued, ``shutdownTimeout`` at most in all."""
        deadline = time.monotonic() + self.settings.shutdown_timeout
        for kube in [self.kube, *(b.kube for b in self.clusters.bundles())]:
            if kube.outbox is not None and not kube.outbox.flush(
                    max(0.0, deadline - time.monotonic())):
                log.warning("events_not_posted_at_shutdown", cluster=kube.host)

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _settle_heap(self) -> None:
        """Freeze what survived (see :mod:`gitops_ray.heap`); at start, the imports."""
        self.metrics.heap_frozen.set(self.heap.settle().frozen)

    def _probe_api(self) -> None:
        """While the API server is not answering, ask it every few seconds whether it is."""
        while not self.stopping.wait(PROBE_INTERVAL):
            if self.api_health.down:
                with contextlib.suppress(KubeError):
                    self.kube.call("GET", "/version", verb="probe", timeout=PROBE_INTERVAL)

    def readiness(self) -> list[CheckResult]:
        """Every readiness check, now (``/readyz`` and ``gitops_ray_ready``)."""
        unsynced = self.cache.unsynced() + (self.applications.unsynced()
                                            if self.applications is not None else [])
        results = evaluate(apps_loaded=self.ready.is_set(), unsynced=unsynced,
                           api=self.api_health, refreshes=self.refreshes,
                           leader_election=self.elector is not None or self.shards is not None)
        holder = self.elector or self.shards
        problem = holder.last_error if holder is not None else None
        if not problem:
            return results
        return [CheckResult(r.check, False, problem)  # e.g. no lease namespace, cannot create
                if r.check is Check.LEADER_ELECTION and r.ok else r for r in results]

    # -- leadership ------------------------------------------------------------------

    def _elector(self) -> LeaderElector | None:
        if not self.settings.leader_election or self.settings.sharding.enabled:
            return None
        lease = self.settings.lease
        if self.settings.webhook_advertise_url:
            lease = dataclasses.replace(lease, annotations=(
                (LEADER_URL_ANNOTATION, self.settings.webhook_advertise_url),))
        return LeaderElector(self.kube, lease, on_started=self._start_leading,
                             on_stopped=self._stop_leading, fence=self.fence)

    def _elect(self) -> None:
        assert self.elector is not None
        if self.elector.run(self.stopping):
            self.exit_code = 1  # lost the lease: exit, be restarted as a follower
            self.stopping.set()
        else:
            self.elector.release()

    def _start_leading(self) -> None:
        self.controller.start_leading()
        for name in self.catalog.apps():
            self.queue.submit(name, "leader-elected")

    def _stop_leading(self) -> None:
        """Let the running syncs finish, and post their Events, before the lease goes."""
        if not self.controller.stop_leading(self.settings.shutdown_timeout):
            log.warning("sync_still_running_at_shutdown")
        self._flush_events()

    # -- shards ----------------------------------------------------------------------

    def _shards(self) -> ShardCoordinator | None:
        """The coordinator; its callbacks go to :mod:`gitops_ray.runtime.shardwork`."""
        s = self.settings
        if not s.sharding.enabled:
            return None
        return ShardCoordinator(self.kube, s.lease, shards=s.sharding.shards,
                                advertise_url=s.webhook_advertise_url,
                                adopt=lambda held: self._sharded().adopt(held),
                                on_gained=lambda held: self._sharded().gained(held),
                                on_lost=lambda held: self._sharded().lost(held),
                                busy=lambda shard: self._sharded().busy(shard),
                                on_silent=lambda member: self._sharded().silent(member),
                                on_heir=lambda held: self._sharded().heir(held))

    def _sharded(self) -> ShardWork:
        assert self.shard_work is not None  # built right after the controller, when sharded
        return self.shard_work

    def _hold_shards(self) -> None:
        """Hold shards until SIGTERM; then drain the writes and release every Lease."""
        assert self.shards is not None
        self.shards.run(self.stopping)
        self._stop_leading()
        self.shards.release_all()


def _heard(cache: LiveCache, records: LiveCache) -> int | None:
    """Watch events heard by a cluster's cache and by ours, which holds the app records.

    The pipeline's :data:`~gitops_ray.reconcile.pipeline.Generation`: a comparison also
    reads the app's record (inventory, applied marks), which lives in our cluster whatever
    the destination. Both counts only grow, so their sum moves when either does.
    """
    here, there = cache.generation(), records.generation()
    return None if here is None or there is None else here + there
