"""``gitops-ray run``: wire settings into a running controller, and shut it down cleanly.

Why one object owns every thread: start-up and shutdown order is where controllers lose
data. Start: HTTP (probes answer at once), the scheduler, the first catalog
load, then leader election. SIGTERM: stop polling, stop leading (waiting for a running
sync to finish, bounded by ``shutdownTimeout``), **release the lease** so a replica
takes over immediately instead of after the lease duration, drain the workers, stop the
watches and the HTTP servers. Losing the lease (renewal failed) exits with status 1, as
client-go controllers do, so Kubernetes restarts the pod as a clean follower.

Triggers, all funnelled into one :class:`~gitops_ray.runtime.queue.WorkQueue`:

* an interval job per app (``interval`` + up to ``jitter``), and one for the app-of-apps
  sources, on the one :class:`~gitops_ray.runtime.scheduling.Scheduler` (APScheduler)
  that also times the debounced and delayed refreshes below;
* a watch event on a managed object: a debounced refresh of its app;
* an edit of a pod-shape ConfigMap (``podShapes.*``, watched by name): a debounced
  refresh of every app (the render cache is keyed by the ConfigMaps' content, so only
  then are apps re-rendered);
* a backoff that is due (self-heal, retry);
* a cluster Secret that changed, or a destination cluster that answers again
  (:mod:`gitops_ray.runtime.clusters`): a debounced refresh of every app whose
  destination is not our own cluster;
* with ``argocd.enabled``, an event on an opted-in Argo CD Application
  (:mod:`gitops_ray.runtime.argocd`): a changed definition re-merges the catalog (no git
  call), a requested operation or refresh refreshes that app at once;
* a push webhook: an immediate refresh of the apps whose repo and revision match. A
  follower that receives one refreshes locally *and* forwards it, unchanged, to the
  leader's advertised URL (read from the Lease), so it does not matter which replica
  the Service picked. With ``sharding.enabled`` a replica refreshes the matched apps of
  its own shards and forwards the delivery once to each other member that holds a shard
  of a matched app (URL from its membership Lease); a forwarded delivery is never
  forwarded again.

With ``sharding.enabled`` (:mod:`gitops_ray.runtime.shards`) there is no leader Lease: a
:class:`~gitops_ray.runtime.shards.ShardCoordinator` thread holds this replica's shards,
a gained shard's records are loaded and its apps queued at once, and on SIGTERM the
controller's writes are drained before every shard Lease is released.

``/readyz`` answers from :mod:`gitops_ray.runtime.readiness` (named checks, the failing
ones and their reasons in the 503 body, ``gitops_ray_ready{check}`` in the metrics). The
webhook route admits a delivery on its headers before its body is read (see
:func:`gitops_ray.runtime.webhook.admit` and :mod:`gitops_ray.runtime.server`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST

from gitops_ray import childproc
from gitops_ray.heap import SETTLE_EVERY_S, Heap
from gitops_ray.kube import Kube, KubeError
from gitops_ray.kube.fence import WriteFence
from gitops_ray.kube.leader import LeaderElector
from gitops_ray.kube.outbox import Outbox
from gitops_ray.logs import Throttle
from gitops_ray.reconcile.argocdcm import ARGOCD_CM, configmap_settings
from gitops_ray.reconcile.destinations import is_local
from gitops_ray.reconcile.pipeline import (
    Pipeline,
    RenderTools,
    ShapesSource,
    SystemSource,
    configmap_shapes,
)
from gitops_ray.reconcile.project import IN_CLUSTER, Cluster, ProjectsFrom
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.apps import Application, Destination
from gitops_ray.runtime.argocd import ArgoBridge, Change, ClusterApplications, StatusWriter
from gitops_ray.runtime.argoredis import ArgoViews
from gitops_ray.runtime.catalog import Catalog
from gitops_ray.runtime.clusters import ClusterBundle, ClusterRegistry
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.credentials import git_source
from gitops_ray.runtime.inline import parse_inline
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.queue import WorkQueue, across_clusters
from gitops_ray.runtime.readiness import (
    PROBE_INTERVAL,
    ApiHealth,
    Check,
    CheckResult,
    RefreshOutcomes,
    evaluate,
    failing,
)
from gitops_ray.runtime.revisions import RECENT, Revisions
from gitops_ray.runtime.scheduling import Scheduler
from gitops_ray.runtime.server import (
    HttpServers,
    Refusal,
    Request,
    Response,
    Route,
    Routes,
    group_routes,
)
from gitops_ray.runtime.shards import ShardCoordinator
from gitops_ray.runtime.watches import LiveCache, NamedObjects
from gitops_ray.runtime.web.auth import FormTokens, Reviewer
from gitops_ray.runtime.web.site import Actions, WebSite
from gitops_ray.runtime.webhook import (
    Push,
    WebhookRejected,
    admit,
    authenticate,
    parse_push,
    provider_of,
)
from gitops_ray.settings import AppSourceSpec, Settings
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)
CATALOG = "(app sources)"  # work-queue key of the catalog reload; never a valid app name
APPLICATIONS = "(applications)"  # re-merge the in-cluster Applications only (no git call)
HEAP_JOB = "(heap)"  # scheduler job id of the heap settle; never a valid app name
CLUSTERS = "(clusters)"  # refresh other clusters' apps: a Secret changed or one came back
SPECIAL_KEYS = frozenset({CATALOG, APPLICATIONS, CLUSTERS})
LEADER_URL_ANNOTATION = "gitops-ray.io/webhook-url"
FORWARDED_HEADER = "x-gitops-ray-forwarded"
REJECTION_LOG_PERIOD = 10.0  # at most one webhook_rejected line per reason per 10 s
_FORWARD_HEADERS = ("content-type", "x-github-event", "x-hub-signature-256", "x-gitlab-event",
                    "x-gitlab-token", "x-github-delivery")


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
        self._rejections = Throttle(REJECTION_LOG_PERIOD)
        self.stopping = threading.Event()
        self._shut_down = False
        self._shutdown_lock = threading.Lock()
        self.ready = threading.Event()
        self.exit_code = 0
        self.cache = LiveCache(self.kube, on_event=self._on_watch_event, metrics=self.metrics)
        self.queue = WorkQueue(self._work, workers=settings.workers,
                               standby=self._standby if sharded else None)
        self.scheduler = Scheduler(lambda key: self.queue.submit(key, "due", urgent=True))
        self.shape_configmaps: NamedObjects | None = None
        self.argocd_cm: NamedObjects | None = None
        self.applications = (ClusterApplications(self.kube, settings.argocd,
                                                 notify=self._on_application,
                                                 metrics=self.metrics)
                             if settings.argocd.enabled else None)
        self.shards = self._shards()
        self.controller = self._controller()
        self.catalog, self.revisions = self.controller.catalog, self.controller.revisions
        self.elector = self._elector()
        self.http = HttpServers(group_routes(self._routes()), on_refused=self._refused)
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
                              self._on_cluster_event(cache, obj))
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
        """The pod-shape ConfigMaps, read from watches on their names (see the docstring)."""
        names, namespace = self.settings.pod_shapes, self.settings.control_namespace
        if not (names.instance_types or names.patches):
            return None
        self.shape_configmaps = self.cache.watch_named(
            "v1", "ConfigMap", namespace, (names.instance_types, names.patches),
            on_event=self._on_shapes_event)
        return configmap_shapes(self.shape_configmaps.get, namespace=namespace,
                                instance_types=names.instance_types, patches=names.patches)

    def _argocd_settings(self) -> SystemSource | None:
        """Argo CD's argocd-cm, read from a watch on its name when ``argocd.enabled``."""
        if not self.settings.argocd.enabled:
            return None
        namespace = self.settings.argocd.namespace
        self.argocd_cm = self.cache.watch_named("v1", "ConfigMap", namespace, (ARGOCD_CM,),
                                                on_event=self._on_argocd_cm_event)
        return configmap_settings(self.argocd_cm.get, namespace=namespace)

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
            self._poll(CATALOG)
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
        s = self.settings
        if not s.sharding.enabled:
            return None
        return ShardCoordinator(self.kube, s.lease, shards=s.sharding.shards,
                                advertise_url=s.webhook_advertise_url,
                                adopt=self._adopt_shards, on_gained=self._gained_shards,
                                on_lost=self._lost_shards,
                                busy=self._shard_busy, on_silent=self._silent_member,
                                on_heir=self._heir_shards)

    def _shard_busy(self, shard: int) -> bool:
        return self.controller.writing(shard)  # the controller is built after the shards

    def _hold_shards(self) -> None:
        """Hold shards until SIGTERM; then drain the writes and release every Lease."""
        assert self.shards is not None
        self.shards.run(self.stopping)
        self._stop_leading()
        self.shards.release_all()

    def _standby(self, key: str) -> bool:
        """Whether a work-queue request is another replica's app: a standby pass."""
        return key not in SPECIAL_KEYS and not self.controller.owns(key)

    def _adopt_shards(self, shards: frozenset[int]) -> None:
        assert self.shards is not None
        shard_of = self.shards.shard_of
        self.controller.adopt(lambda name: shard_of(name) in shards)

    def _gained_shards(self, shards: frozenset[int]) -> None:
        assert self.shards is not None
        self.metrics.shards_held.set(len(self.shards.held()))
        self.metrics.shard_handovers.labels("gained").inc(len(shards))
        gained = [n for n in self.catalog.apps() if self.shards.shard_of(n) in shards]
        for name in across_clusters(gained, self._destination):
            self.queue.submit(name, "shard-gained")

    def _heir_shards(self, shards: frozenset[int]) -> None:
        """Shards this replica would now take over: prepare their apps (standby work)."""
        assert self.shards is not None
        heir = [n for n in self.catalog.apps() if self.shards.shard_of(n) in shards]
        for name in across_clusters(heir, self._destination):
            self.queue.submit(name, "successor")

    def _destination(self, name: str) -> tuple[str, str]:
        app = self.catalog.get(name)
        return (app.destination.server, app.destination.name) if app is not None else ("", "")

    def _silent_member(self, member: str) -> None:
        """A replica went silent: prepare the apps this one would take from it, in full.

        Standby passes (:meth:`Controller.refresh`), now dry-running what was left to
        the owner, so its takeover finds every verdict known (runtime.shards).
        """
        assert self.shards is not None
        mine = [name for name in self.catalog.apps()
                if self.shards.owner_of(name)[0] == member and self.controller.successor(name)]
        log.info("member_silent", member=member, apps=len(mine))
        for name in across_clusters(mine, self._destination):
            self.queue.submit(name, "owner-silent", urgent=True)  # before other standby

    def _lost_shards(self, shards: frozenset[int]) -> None:
        """Another replica refreshes these apps now: drop what this one published."""
        assert self.shards is not None
        self.metrics.shards_held.set(len(self.shards.held()))
        self.metrics.shard_handovers.labels("lost").inc(len(shards))
        for name in self.catalog.apps():
            if self.shards.shard_of(name) in shards:
                self.metrics.forget_app(name)
                self.controller.compared.forget(name)

    # -- work ------------------------------------------------------------------------

    def _work(self, key: str, reason: str) -> None:
        if key == CATALOG:
            self._reload_catalog(reason)
        elif key == APPLICATIONS:
            self._reload_catalog(reason, specs=())
        elif key == CLUSTERS:  # a cluster Secret changed or a cluster answers again
            if self.applications is not None:  # a cluster's hand-over may have changed
                self.applications.reconsider()
            for name, app in self.catalog.apps().items():
                if not is_local(app.destination):  # ours are not affected
                    self.scheduler.schedule(name, self.settings.debounce)
        else:
            self.controller.refresh(key, reason)

    def _reload_catalog(self, reason: str, *, specs: tuple[AppSourceSpec, ...] | None = None
                        ) -> None:
        """Reload the app sources (``specs``; ``()``: just re-merge the cluster's)."""
        change = self.catalog.reload(specs)
        for spec in change.failed:
            self.metrics.fetch_errors.labels(f"app-source:{spec.path}").inc()
        for spec in self.catalog.specs:
            self.metrics.app_source_errors.labels(spec.path).set(self.catalog.errors(spec))
        for app in map(self._handed_back, change.gone):  # deleted on its own queue turn
            self._unpoll(app.name)
            self.metrics.forget_app(app.name)
            self.controller.forget(app)
            self.queue.submit(app.name, "app-removed")
            log.info("app_removed", app=app.name, trigger=reason)
        for name in set(change.removed) - {app.name for app in change.gone}:
            self._unpoll(name)  # an invalid app whose Application left git
            self.metrics.forget_app(name)
            self.refreshes.forget(name)
            log.info("app_removed", app=name, trigger=reason)
        for name in change.touched:
            self._poll(name)
            self.queue.submit(name, "app-added" if name in change.added else "app-changed")
        self.ready.set()

    def _handed_back(self, app: Application) -> Application:
        """A removed app; without finalizers if it was handed back, not deleted.

        Its Application lost an annotation: its objects are orphaned, never deleted.
        """
        if self.applications is not None and self.applications.handed_back(app.name):
            return dataclasses.replace(app, finalizers=())
        return app

    def _settle_heap(self) -> None:
        """Freeze what survived (see :mod:`gitops_ray.heap`); at start, the imports."""
        self.metrics.heap_frozen.set(self.heap.settle().frozen)

    def _poll(self, key: str) -> None:
        if self.settings.interval <= 0:
            return
        self.scheduler.every(key, self.settings.interval,
                             functools.partial(self.queue.submit, key, "poll"),
                             jitter=self.settings.jitter)

    def _unpoll(self, key: str) -> None:
        self.scheduler.unevery(key)

    def _on_watch_event(self, kind: str, obj: Manifest) -> None:
        self._on_cluster_event(self.cache, obj)

    def _on_cluster_event(self, cache: LiveCache, obj: Manifest) -> None:
        """An event of ``cache``'s cluster (ours or a destination) about an app's object."""
        if obj.get("kind") == "Event":  # a Warning about a RayCluster: refresh its app
            obj = self._involved(cache, obj)
        elif obj.get("kind") == "Pod":  # a RayCluster's Pod: refresh the cluster's app
            obj = self._owner(cache, obj)
        app = self.controller.app_for_event(obj)
        if app is not None:
            self.scheduler.schedule(app, self.settings.debounce)

    def _on_application(self, name: str, change: Change) -> None:
        """An Application event: re-merge the catalog, or refresh the app at once."""
        if change is Change.DEFINITION:
            self.queue.submit(APPLICATIONS, "application-changed")
        elif change is not Change.NONE:
            self.queue.submit(name, change.value, urgent=True)

    def _on_shapes_event(self, kind: str, obj: Manifest) -> None:
        """A pod-shape ConfigMap changed: refresh every app (each re-renders if affected)."""
        log.info("pod_shapes_changed", change=kind,
                 configmap=str((obj.get("metadata") or {}).get("name", "")))
        for app in self.catalog.apps():
            self.scheduler.schedule(app, self.settings.debounce)

    def _on_argocd_cm_event(self, kind: str, obj: Manifest) -> None:
        """argocd-cm changed: refresh every app (its digest is part of every memo key)."""
        log.info("argocd_cm_changed", change=kind)
        for app in self.catalog.apps():
            self.scheduler.schedule(app, self.settings.debounce)

    def _involved(self, cache: LiveCache, event: Manifest) -> Manifest:
        about = event.get("involvedObject") or {}
        try:
            return cache.get(str(about.get("apiVersion", "")), str(about.get("kind", "")),
                                  str(about.get("namespace", "")),
                                  str(about.get("name", ""))) or {}
        except KubeError:
            return {}  # gone or unreadable: the next poll refreshes its app anyway

    def _owner(self, cache: LiveCache, pod: Manifest) -> Manifest:
        """The RayCluster that owns ``pod`` (its controller reference), or ``{}``."""
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "RayCluster" and ref.get("controller"):
                try:
                    return cache.get(str(ref.get("apiVersion", "")), "RayCluster",
                                          str(meta.get("namespace", "")),
                                          str(ref.get("name", ""))) or {}
                except KubeError:
                    return {}
        return {}

    # -- HTTP ------------------------------------------------------------------------

    def _routes(self) -> list[tuple[str, Routes]]:
        listen = self.settings.listen
        webhook = Route(self._webhook, admit=self._admit_webhook)
        return [
            (listen.ui, self._web_site().routes()),
            (listen.health, {("GET", "/healthz"): self._healthz,
                             ("GET", "/readyz"): self._readyz}),
            (listen.metrics, {("GET", "/metrics"): self._metrics}),
            (listen.webhook, {("POST", "/webhook"): webhook,
                              ("POST", "/api/webhook"): webhook}),
        ]

    def _web_site(self) -> WebSite:
        """The read-only page; with ``ui.actions``, its buttons (see runtime.web.auth)."""
        namespace = self.settings.control_namespace
        reviewer = Reviewer(self.kube, namespace, audience=self.settings.ui_token_audience)
        actions = Actions(reviewer, FormTokens(),
                          lambda app, reason: self.queue.submit(app, reason, urgent=True)
                          ) if self.settings.ui_actions else None
        return WebSite(controller=self.controller, cache=self.cache, namespace=namespace,
                       actions=actions)

    def _healthz(self, request: Request) -> Response:
        alive = self.scheduler.running or self.stopping.is_set()
        return Response() if alive else Response(500, b"scheduler stopped\n")

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

    def _readyz(self, request: Request) -> Response:
        failed = failing(self.readiness())
        return _json(503 if failed else 200, {"ready": not failed, "failing": failed})

    def _probe_api(self) -> None:
        """While the API server is not answering, ask it every few seconds whether it is."""
        while not self.stopping.wait(PROBE_INTERVAL):
            if self.api_health.down:
                with contextlib.suppress(KubeError):
                    self.kube.call("GET", "/version", verb="probe", timeout=PROBE_INTERVAL)

    def _refused(self, reason: Refusal) -> None:
        self.metrics.http_refused.labels(reason.value).inc()

    def _metrics(self, request: Request) -> Response:
        return Response(200, self.metrics.exposition(), CONTENT_TYPE_LATEST)

    def _admit_webhook(self, headers: Mapping[str, str]) -> Response | None:
        """Refuse, before its body is read, a delivery whose headers cannot be genuine."""
        provider = provider_of(headers)
        try:
            admit(provider, headers, self.settings.webhook_secret.reveal())
        except WebhookRejected as e:
            return self._rejected(provider, e)
        return None

    def _rejected(self, provider: str, e: WebhookRejected) -> Response:
        self.metrics.webhooks.labels(provider or "unknown", "rejected").inc()
        held = self._rejections.allow(e.reason)
        if held is not None:  # a flood of refusals is counted, not logged line by line
            log.warning("webhook_rejected", provider=provider or "unknown", reason=e.reason,
                        status=e.status, similar_suppressed=held)
        return Response(e.status, f"{e.reason}\n".encode())

    def _webhook(self, request: Request) -> Response:
        provider = provider_of(request.headers)
        try:
            authenticate(provider, request.headers, request.body,
                         self.settings.webhook_secret.reveal())
            push = parse_push(provider, request.headers, request.body)
        except WebhookRejected as e:
            return self._rejected(provider, e)
        if push is None:
            self.metrics.webhooks.labels(provider, "ignored").inc()
            return _json(200, {"refreshed": [], "note": "not a push event"})
        return _json(202, self._on_push(push, request))

    def _on_push(self, push: Push, request: Request) -> dict[str, Any]:
        self.metrics.webhooks.labels(push.provider, "accepted").inc()
        self.revisions.pushed(push)  # its commit, if it follows the one known
        specs = [s for s in self.catalog.specs if push.matches(s.repo, s.revision)]
        if specs:
            self.queue.submit(CATALOG, "webhook")
        matching = {n: a for n, a in self.catalog.apps().items()
                    if any(not s.chart and push.matches(s.repo_url, s.target_revision)
                           for s in a.all_sources)}  # a push to any of its git sources
        apps = sorted(n for n in matching if self.controller.owns(n))
        for name, urgent in push.refresh_order({n: matching[n].source.path for n in apps}):
            self.queue.submit(name, "webhook", urgent=urgent)  # what the push changed first
        for name in set(matching) - set(apps):  # others': prepared on standby (see queue)
            if self.controller.successor(name) and (
                    push.touches(matching[name].source.path) or not push.changed):
                self.queue.submit(name, "webhook")
        log.info("webhook_push", provider=push.provider, revision=push.revision,
                 sha=push.sha[:12], apps=apps)
        if self.shards is not None:
            forwarded = self._forward_to_owners(request, set(matching) - set(apps))
        else:
            forwarded = self._forward(request) if not self.controller.leading else ""
        return {"refreshed": apps, "appSources": len(specs), "forwardedTo": forwarded}

    def _forward(self, request: Request) -> str:
        """Hand a delivery to the leader (in the background); the leader's identity."""
        if request.headers.get(FORWARDED_HEADER) or self.elector is None:
            return ""
        leader, annotations = self.elector.current_leader()
        url = annotations.get(LEADER_URL_ANNOTATION, "")
        if not url or leader == self.settings.lease.identity:
            return ""
        self._spawn_forward(url, self._forwarded_headers(request), bytes(request.body))
        return leader

    def _forward_to_owners(self, request: Request, apps: set[str]) -> str:
        """Hand a delivery once to each member holding a shard of ``apps``; who, joined."""
        assert self.shards is not None
        if request.headers.get(FORWARDED_HEADER) or not apps:
            return ""
        view = self.shards.fresh_view()
        owners = {self.shards.owner_of(name, view) for name in apps}
        sent = sorted(holder for holder, url in owners
                      if holder and url and holder != self.settings.lease.identity)
        urls = dict(owners)
        for holder in sent:
            self._spawn_forward(urls[holder], self._forwarded_headers(request),
                                bytes(request.body))
        return ", ".join(sent)

    def _forwarded_headers(self, request: Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD_HEADERS}
        return {**headers, FORWARDED_HEADER: self.settings.lease.identity}

    def _spawn_forward(self, url: str, headers: Mapping[str, str], body: bytes) -> None:
        def send() -> None:
            req = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    log.info("webhook_forwarded", status=resp.status)
            except (urllib.error.URLError, OSError) as e:
                log.warning("webhook_not_forwarded", error=str(e))

        threading.Thread(target=send, name="webhook-forward", daemon=True).start()


def _heard(cache: LiveCache, records: LiveCache) -> int | None:
    """Watch events heard by a cluster's cache and by ours, which holds the app records.

    The pipeline's :data:`~gitops_ray.reconcile.pipeline.Generation`: a comparison also
    reads the app's record (inventory, applied marks), which lives in our cluster whatever
    the destination. Both counts only grow, so their sum moves when either does.
    """
    here, there = cache.generation(), records.generation()
    return None if here is None or there is None else here + there


def _json(status: int, doc: Mapping[str, Any]) -> Response:
    return Response(status, json.dumps(doc).encode() + b"\n", "application/json")
