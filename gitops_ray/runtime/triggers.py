"""What each trigger puts on the work queue, and what a queue turn does with it.

Why its own room: the triggers and the turns of the one
:class:`~gitops_ray.runtime.queue.WorkQueue` they feed are the controller's steady state,
the part that runs between start-up and shutdown. Kept apart from the wiring
(:mod:`gitops_ray.runtime.runner`), an event can be followed to its refresh without
reading how the components were built, and each trigger's rule (debounced or at once,
one app or every app) is in one place. The triggers, all funnelled into the queue:

* an interval job per app (``interval`` + up to ``jitter``), and one for the app-of-apps
  sources, on the one :class:`~gitops_ray.runtime.scheduling.Scheduler` (APScheduler)
  that also times the debounced and delayed refreshes below;
* a watch event on a managed object: a debounced refresh of its app;
* an edit of a pod-shape ConfigMap (``podShapes.*``, watched by name): a debounced
  refresh of every app (the render cache is keyed by the ConfigMaps' content, so only
  then are apps re-rendered); with ``argocd.enabled`` an edit of argocd-cm, likewise;
* a backoff that is due (self-heal, retry);
* a cluster Secret that changed, or a destination cluster that answers again
  (:mod:`gitops_ray.runtime.clusters`): a debounced refresh of every app whose
  destination is not our own cluster;
* with ``argocd.enabled``, an event on an opted-in Argo CD Application
  (:mod:`gitops_ray.runtime.argocd`): a changed definition re-merges the catalog (no git
  call), a requested operation or refresh refreshes that app at once;
* a push webhook (:mod:`gitops_ray.runtime.pushes`) and a shard hand-over
  (:mod:`gitops_ray.runtime.shardwork`) queue their apps from their own rooms.

A queue key is an app's name or one of the special keys below (never a valid app name):
reload the app sources (:data:`CATALOG`), re-merge the in-cluster Applications only
(:data:`APPLICATIONS`), refresh the apps of other clusters (:data:`CLUSTERS`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import structlog

from gitops_ray.kube import KubeError
from gitops_ray.reconcile.destinations import is_local
from gitops_ray.render.apps import Application
from gitops_ray.runtime.argocd import Change, ClusterApplications
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.queue import WorkQueue
from gitops_ray.runtime.readiness import RefreshOutcomes
from gitops_ray.runtime.scheduling import Scheduler
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.settings import AppSourceSpec, Settings
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)
CATALOG = "(app sources)"  # work-queue key of the catalog reload; never a valid app name
APPLICATIONS = "(applications)"  # re-merge the in-cluster Applications only (no git call)
CLUSTERS = "(clusters)"  # refresh other clusters' apps: a Secret changed or one came back
SPECIAL_KEYS = frozenset({CATALOG, APPLICATIONS, CLUSTERS})


@dataclasses.dataclass(frozen=True, eq=False)
class Triggers:
    """The triggers' handlers and the work queue's turns (see the module docstring).

    ``ready`` is set once the app sources have been loaded (``/readyz``'s apps check).
    """

    settings: Settings
    controller: Controller
    queue: WorkQueue
    scheduler: Scheduler
    cache: LiveCache  # our cluster's, which holds the app records
    metrics: Metrics
    refreshes: RefreshOutcomes
    applications: ClusterApplications | None
    ready: threading.Event

    # -- the queue's turns ----------------------------------------------------------

    def work(self, key: str, reason: str) -> None:
        if key == CATALOG:
            self._reload_catalog(reason)
        elif key == APPLICATIONS:
            self._reload_catalog(reason, specs=())
        elif key == CLUSTERS:  # a cluster Secret changed or a cluster answers again
            if self.applications is not None:  # a cluster's hand-over may have changed
                self.applications.reconsider()
            for name, app in self.controller.catalog.apps().items():
                if not is_local(app.destination):  # ours are not affected
                    self.scheduler.schedule(name, self.settings.debounce)
        else:
            self.controller.refresh(key, reason)

    def standby(self, key: str) -> bool:
        """Whether a work-queue request is another replica's app: a standby pass."""
        return key not in SPECIAL_KEYS and not self.controller.owns(key)

    def _reload_catalog(self, reason: str, *, specs: tuple[AppSourceSpec, ...] | None = None
                        ) -> None:
        """Reload the app sources (``specs``; ``()``: just re-merge the cluster's)."""
        catalog = self.controller.catalog
        change = catalog.reload(specs)
        for spec in change.failed:
            self.metrics.fetch_errors.labels(f"app-source:{spec.path}").inc()
        for spec in catalog.specs:
            self.metrics.app_source_errors.labels(spec.path).set(catalog.errors(spec))
        for app in map(self._handed_back, change.gone):  # deleted on its own queue turn
            self.unpoll(app.name)
            self.metrics.forget_app(app.name)
            self.controller.forget(app)
            self.queue.submit(app.name, "app-removed")
            log.info("app_removed", app=app.name, trigger=reason)
        for name in set(change.removed) - {app.name for app in change.gone}:
            self.unpoll(name)  # an invalid app whose Application left git
            self.metrics.forget_app(name)
            self.refreshes.forget(name)
            log.info("app_removed", app=name, trigger=reason)
        for name in change.touched:
            self.poll(name)
            self.queue.submit(name, "app-added" if name in change.added else "app-changed")
        self.ready.set()

    def _handed_back(self, app: Application) -> Application:
        """A removed app; without finalizers if it was handed back, not deleted.

        Its Application lost an annotation: its objects are orphaned, never deleted.
        """
        if self.applications is not None and self.applications.handed_back(app.name):
            return dataclasses.replace(app, finalizers=())
        return app

    # -- polls ----------------------------------------------------------------------

    def poll(self, key: str) -> None:
        """Queue ``key`` every ``interval`` (plus up to ``jitter``); never if it is 0."""
        if self.settings.interval <= 0:
            return
        self.scheduler.every(key, self.settings.interval,
                             functools.partial(self.queue.submit, key, "poll"),
                             jitter=self.settings.jitter)

    def unpoll(self, key: str) -> None:
        self.scheduler.unevery(key)

    # -- events ---------------------------------------------------------------------

    def on_watch_event(self, kind: str, obj: Manifest) -> None:
        self.on_cluster_event(self.cache, obj)

    def on_cluster_event(self, cache: LiveCache, obj: Manifest) -> None:
        """An event of ``cache``'s cluster (ours or a destination) about an app's object."""
        if obj.get("kind") == "Event":  # a Warning about a RayCluster: refresh its app
            obj = _involved(cache, obj)
        elif obj.get("kind") == "Pod":  # a RayCluster's Pod: refresh the cluster's app
            obj = _owner(cache, obj)
        app = self.controller.app_for_event(obj)
        if app is not None:
            self.scheduler.schedule(app, self.settings.debounce)

    def on_application(self, name: str, change: Change) -> None:
        """An Application event: re-merge the catalog, or refresh the app at once."""
        if change is Change.DEFINITION:
            self.queue.submit(APPLICATIONS, "application-changed")
        elif change is not Change.NONE:
            self.queue.submit(name, change.value, urgent=True)

    def on_shapes_event(self, kind: str, obj: Manifest) -> None:
        """A pod-shape ConfigMap changed: refresh every app (each re-renders if affected)."""
        log.info("pod_shapes_changed", change=kind,
                 configmap=str((obj.get("metadata") or {}).get("name", "")))
        for app in self.controller.catalog.apps():
            self.scheduler.schedule(app, self.settings.debounce)

    def on_argocd_cm_event(self, kind: str, obj: Manifest) -> None:
        """argocd-cm changed: refresh every app (its digest is part of every memo key)."""
        log.info("argocd_cm_changed", change=kind)
        for app in self.controller.catalog.apps():
            self.scheduler.schedule(app, self.settings.debounce)


def _involved(cache: LiveCache, event: Manifest) -> Manifest:
    about = event.get("involvedObject") or {}
    try:
        return cache.get(str(about.get("apiVersion", "")), str(about.get("kind", "")),
                         str(about.get("namespace", "")), str(about.get("name", ""))) or {}
    except KubeError:
        return {}  # gone or unreadable: the next poll refreshes its app anyway


def _owner(cache: LiveCache, pod: Manifest) -> Manifest:
    """The RayCluster that owns ``pod`` (its controller reference), or ``{}``."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "RayCluster" and ref.get("controller"):
            try:
                return cache.get(str(ref.get("apiVersion", "")), "RayCluster",
                                 str(meta.get("namespace", "")), str(ref.get("name", ""))) or {}
            except KubeError:
                return {}
    return {}
