"""Prometheus metrics of the controller, named ``gitops_ray_*``.

Names follow Prometheus' rules (https://prometheus.io/docs/practices/naming/: one
application prefix, base units, ``_total`` for counters, ``_info`` for metadata) and echo
Argo CD's own metrics (https://argo-cd.readthedocs.io/en/stable/operator-manual/metrics/).

Why a registry per controller instead of prometheus-client's global one: tests run
several controllers in one process, and a global registry would refuse the second set
of metrics (or mix their values).

App status is exported the way Argo CD's ``argocd_app_info`` is: one series per app with
``sync_status`` and ``health_status`` labels and value 1. It is produced at scrape time
from :class:`AppStates` by a custom collector, so a status change never leaves a stale
series behind. Revisions stay out of labels (unbounded cardinality); they are in logs
and events.

Readiness is exported the same way: ``gitops_ray_ready{check}`` is computed at scrape
time from the same checks ``/readyz`` answers with (:mod:`gitops_ray.runtime.readiness`),
1 passing and 0 failing, so an alert can say *which* check fails.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gitops_ray import __version__
from gitops_ray.health import HealthStatus
from gitops_ray.types import SyncStatus

DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600, 1800)


@dataclass(frozen=True)
class AppState:
    """What the app gauges show for one app."""

    sync_status: str = SyncStatus.UNKNOWN
    health_status: str = HealthStatus.UNKNOWN
    last_sync: float = 0.0


class AppStates(Collector):
    """Current status of every managed app, exported as gauges at scrape time."""

    def __init__(self) -> None:
        self._states: dict[str, AppState] = {}
        self._lock = threading.Lock()

    def set(self, app: str, state: AppState) -> None:
        with self._lock:
            self._states[app] = state

    def get(self, app: str) -> AppState:
        with self._lock:
            return self._states.get(app, AppState())

    def forget(self, app: str) -> None:
        with self._lock:
            self._states.pop(app, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            states = dict(self._states)
        info = GaugeMetricFamily("gitops_ray_app_info", "Managed apps with their sync and "
                                 "health status (value 1).",
                                 labels=["app", "sync_status", "health_status"])
        last = GaugeMetricFamily("gitops_ray_app_last_sync_timestamp_seconds",
                                 "When the app was last synced by this controller.",
                                 labels=["app"])
        for app, state in sorted(states.items()):
            info.add_metric([app, state.sync_status, state.health_status], 1)
            if state.last_sync:
                last.add_metric([app], state.last_sync)
        yield info
        yield last


ReadinessSource = Callable[[], Sequence[tuple[str, bool]]]
"""The current ``(check name, passing)`` pairs."""


class ReadinessGauge(Collector):
    """``gitops_ray_ready{check}``, evaluated at scrape time."""

    def __init__(self) -> None:
        self.source: ReadinessSource = list

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("gitops_ray_ready", "Readiness checks of this replica "
                                   "(1 passing, 0 failing; /readyz is 503 while any fails).",
                                   labels=["check"])
        for check, ok in self.source():
            family.add_metric([check], 1 if ok else 0)
        yield family


class Metrics:
    """All metrics of one controller, on their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.apps = AppStates()
        self.registry.register(self.apps)
        self.readiness = ReadinessGauge()
        self.registry.register(self.readiness)
        r = self.registry
        self._app_series(r)
        self._controller_series(r)
        self.build = Gauge("gitops_ray_build_info", "Version of gitops-ray (value 1).",
                           ["version"], registry=r)
        self.build.labels(__version__).set(1)

    def _app_series(self, r: CollectorRegistry) -> None:
        """What each app's refreshes and syncs did (labelled by app, forgotten with it)."""
        self.reconciles = Counter("gitops_ray_reconcile_total", "App refreshes by result "
                                  "(success, error).", ["app", "result"], registry=r)
        self.reconcile_seconds = Histogram(
            "gitops_ray_reconcile_duration_seconds", "Time to refresh one app (compare and, "
            "when due, sync).", ["app"], buckets=DURATION_BUCKETS, registry=r)
        self.syncs = Counter("gitops_ray_sync_total", "Sync operations by phase and trigger.",
                             ["app", "phase", "trigger"], registry=r)
        self.sync_failures = Counter("gitops_ray_sync_failures_total", "Failed sync "
                                     "operations by reason (ApplyFailed, PruneFailed, ...: "
                                     "gitops_ray.sync.reasons).", ["app", "reason"],
                                     registry=r)
        self.sync_seconds = Histogram("gitops_ray_sync_duration_seconds", "Time of one sync "
                                      "operation.", ["app"], buckets=DURATION_BUCKETS,
                                      registry=r)
        self.drift_corrections = Counter("gitops_ray_drift_corrections_total", "Resources "
                                         "reverted by self-heal.", ["app", "kind"], registry=r)
        self.fetch_errors = Counter("gitops_ray_source_fetch_errors_total", "Failed git "
                                    "resolves and fetches.", ["app"], registry=r)
        self.app_source_errors = Gauge(
            "gitops_ray_app_source_errors", "Applications that cannot be used and files "
            "that cannot be read, by app source path (see the apps' status for each "
            "error, and the log for unreadable files).", ["source"], registry=r)

    def _controller_series(self, r: CollectorRegistry) -> None:
        """What this replica did: requests, webhooks, watches, leases, shards, its heap."""
        self.k8s_requests = Counter("gitops_ray_k8s_requests_total", "Kubernetes API "
                                    "requests by verb and status code (0: unreachable).",
                                    ["verb", "code"], registry=r)
        self.webhooks = Counter("gitops_ray_webhook_requests_total", "Webhook deliveries "
                                "by provider and result.", ["provider", "result"], registry=r)
        self.http_refused = Counter("gitops_ray_http_refused_total", "HTTP requests refused "
                                    "before a handler ran, by reason (busy, bad_length, "
                                    "too_large, timeout, not_admitted, ...).", ["reason"],
                                    registry=r)
        self.watch_events = Counter("gitops_ray_watch_events_total", "Watch events received, "
                                    "by kind and type.", ["kind", "type"], registry=r)
        self.relists = Counter("gitops_ray_watch_relists_total", "Full relists of a watched "
                               "kind (start, 410 Gone, errors).", ["kind"], registry=r)
        self.leader = Gauge("gitops_ray_leader", "1 while this replica holds the lease.",
                            registry=r)
        self.shards_held = Gauge("gitops_ray_shards_held", "Shard Leases this replica "
                                 "holds (sharding.enabled).", registry=r)
        self.shard_handovers = Counter("gitops_ray_shard_handovers_total", "Shards this "
                                       "replica gained or lost (released, expired, taken "
                                       "over).", ["change"], registry=r)
        self.standby_renders = Counter("gitops_ray_standby_renders_total", "Standby "
                                       "passes (render, verdicts of what git did not "
                                       "change) of apps this replica would take over "
                                       "(sharding.enabled), by result.", ["result"],
                                       registry=r)
        self.events_dropped = Counter("gitops_ray_events_dropped_total", "Kubernetes "
                                      "Events not posted because a cluster's queue of "
                                      "Events waiting to be sent was full.", registry=r)
        self.heap_frozen = Gauge("gitops_ray_heap_frozen_objects", "Objects the last "
                                 "heap settle left out of the garbage collector's "
                                 "walks (gc.freeze; see gitops_ray.heap).",
                                 registry=r)

    def observe_request(self, verb: str, resource: str, status: int, seconds: float) -> None:
        """A :data:`gitops_ray.kube.client.RequestHook`: count one API request."""
        self.k8s_requests.labels(verb, str(status)).inc()

    def forget_app(self, app: str) -> None:
        """Drop the per-app series of an app that is no longer managed."""
        self.apps.forget(app)
        for metric in (self.reconcile_seconds, self.sync_seconds):
            _remove(metric, app)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _remove(metric: Histogram, app: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(app)
