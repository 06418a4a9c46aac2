"""The HTTP routes of ``gitops-ray run``: which handler answers what, on which address.

Why its own room: the four listeners (``listen.ui``, ``listen.health``,
``listen.metrics``, ``listen.webhook``; an empty one is disabled, two that share an
address share a server) and the small handlers behind the probes and the metrics are
the controller's outside surface. Listing them in one table here shows every path a
client can reach; the HTTP machinery and its bounds are :mod:`gitops_ray.runtime.server`,
the web page :mod:`gitops_ray.runtime.web.site`, the webhook
:mod:`gitops_ray.runtime.pushes`.

``/healthz`` answers 200 while the scheduler runs (or the controller is stopping), and
``/readyz`` from :mod:`gitops_ray.runtime.readiness` (the failing checks and their
reasons in the 503 body).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from gitops_ray.kube import Kube
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.queue import WorkQueue
from gitops_ray.runtime.readiness import CheckResult, failing
from gitops_ray.runtime.scheduling import Scheduler
from gitops_ray.runtime.server import Request, Response, Route, Routes, json_response
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.runtime.web.auth import FormTokens, Reviewer
from gitops_ray.runtime.web.site import Actions, WebSite
from gitops_ray.settings import Settings


@dataclasses.dataclass(frozen=True, eq=False)
class Probes:
    """``/healthz``, ``/readyz`` and ``/metrics``."""

    scheduler: Scheduler
    stopping: threading.Event
    readiness: Callable[[], list[CheckResult]]
    metrics: Metrics

    def healthz(self, request: Request) -> Response:
        alive = self.scheduler.running or self.stopping.is_set()
        return Response() if alive else Response(500, b"scheduler stopped\n")

    def readyz(self, request: Request) -> Response:
        failed = failing(self.readiness())
        return json_response(503 if failed else 200, {"ready": not failed, "failing": failed})

    def exposition(self, request: Request) -> Response:
        return Response(200, self.metrics.exposition(), CONTENT_TYPE_LATEST)


def route_table(settings: Settings, *, site: WebSite, probes: Probes, webhook: Route
                ) -> list[tuple[str, Routes]]:
    """Every route, by listen address (merged by :func:`~.server.group_routes`)."""
    listen = settings.listen
    return [
        (listen.ui, site.routes()),
        (listen.health, {("GET", "/healthz"): probes.healthz,
                         ("GET", "/readyz"): probes.readyz}),
        (listen.metrics, {("GET", "/metrics"): probes.exposition}),
        (listen.webhook, {("POST", "/webhook"): webhook,
                          ("POST", "/api/webhook"): webhook}),
    ]


def web_site(settings: Settings, *, kube: Kube, controller: Controller, cache: LiveCache,
             queue: WorkQueue) -> WebSite:
    """The read-only page; with ``ui.actions``, its buttons (see runtime.web.auth)."""
    namespace = settings.control_namespace
    reviewer = Reviewer(kube, namespace, audience=settings.ui_token_audience)
    actions = Actions(reviewer, FormTokens(),
                      lambda app, reason: queue.submit(app, reason, urgent=True)
                      ) if settings.ui_actions else None
    return WebSite(controller=controller, cache=cache, namespace=namespace, actions=actions)
