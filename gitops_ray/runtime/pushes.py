"""The push webhook's route: a delivery admitted, its apps refreshed, and forwarded.

Why its own room: :mod:`gitops_ray.runtime.webhook` says what a delivery *is* (genuine,
a push, which repo and revision, which paths); this is what the running controller *does*
with one, which depends on who this replica is: it counts and logs (a flood of refusals at
most once per reason per :data:`REJECTION_LOG_PERIOD`), hands the pushed commit to the
revision cache, queues the app-source reload and the matched apps it owns (what the push
changed first), prepares on standby the matched apps it would take over, and forwards the
delivery, unchanged and in the background, to the replica that should act on it:

* with leader election, a follower refreshes locally *and* forwards it to the leader's
  advertised URL (the :data:`LEADER_URL_ANNOTATION` of the Lease);
* with ``sharding.enabled``, a replica forwards it once to each other member that holds a
  shard of a matched app (URL from its membership Lease);

and a forwarded delivery (:data:`FORWARDED_HEADER`) is never forwarded again, so it
does not matter which replica the Service picked. The route admits a delivery on its
headers before its body is read (:meth:`PushWebhook.admit`, see
:func:`gitops_ray.runtime.webhook.admit` and :mod:`gitops_ray.runtime.server`).
"""

from __future__ import annotations

import dataclasses
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import structlog

from gitops_ray.kube.leader import LeaderElector
from gitops_ray.logs import Throttle
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.queue import WorkQueue
from gitops_ray.runtime.server import Request, Response, Route, json_response
from gitops_ray.runtime.shards import ShardCoordinator
from gitops_ray.runtime.triggers import CATALOG
from gitops_ray.runtime.webhook import (
    Push,
    WebhookRejected,
    admit,
    authenticate,
    parse_push,
    provider_of,
)
from gitops_ray.settings import Settings

log = structlog.get_logger(__name__)
LEADER_URL_ANNOTATION = "gitops-ray.io/webhook-url"
FORWARDED_HEADER = "x-gitops-ray-forwarded"
REJECTION_LOG_PERIOD = 10.0  # at most one webhook_rejected line per reason per 10 s
_FORWARD_HEADERS = ("content-type", "x-github-event", "x-hub-signature-256", "x-gitlab-event",
                    "x-gitlab-token", "x-github-delivery")


@dataclasses.dataclass(frozen=True, eq=False)
class PushWebhook:
    """``POST /webhook``: :meth:`route` (its handler and its header check)."""

    settings: Settings
    controller: Controller
    queue: WorkQueue
    metrics: Metrics
    elector: LeaderElector | None
    shards: ShardCoordinator | None
    _rejections: Throttle = dataclasses.field(
        init=False, default_factory=lambda: Throttle(REJECTION_LOG_PERIOD))

    def route(self) -> Route:
        return Route(self.handle, admit=self.admit)

    def admit(self, headers: Mapping[str, str]) -> Response | None:
        """Refuse, before its body is read, a delivery whose headers cannot be genuine."""
        provider = provider_of(headers)
        try:
            admit(provider, headers, self.settings.webhook_secret.reveal())
        except WebhookRejected as e:
            return self._rejected(provider, e)
        return None

    def handle(self, request: Request) -> Response:
        provider = provider_of(request.headers)
        try:
            authenticate(provider, request.headers, request.body,
                         self.settings.webhook_secret.reveal())
            push = parse_push(provider, request.headers, request.body)
        except WebhookRejected as e:
            return self._rejected(provider, e)
        if push is None:
            self.metrics.webhooks.labels(provider, "ignored").inc()
            return json_response(200, {"refreshed": [], "note": "not a push event"})
        return json_response(202, self._on_push(push, request))

    def _rejected(self, provider: str, e: WebhookRejected) -> Response:
        self.metrics.webhooks.labels(provider or "unknown", "rejected").inc()
        held = self._rejections.allow(e.reason)
        if held is not None:  # a flood of refusals is counted, not logged line by line
            log.warning("webhook_rejected", provider=provider or "unknown", reason=e.reason,
                        status=e.status, similar_suppressed=held)
        return Response(e.status, f"{e.reason}\n".encode())

    def _on_push(self, push: Push, request: Request) -> dict[str, Any]:
        self.metrics.webhooks.labels(push.provider, "accepted").inc()
        catalog = self.controller.catalog
        self.controller.revisions.pushed(push)  # its commit, if it follows the one known
        specs = [s for s in catalog.specs if push.matches(s.repo, s.revision)]
        if specs:
            self.queue.submit(CATALOG, "webhook")
        matching = {n: a for n, a in catalog.apps().items()
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
        _spawn_forward(url, self._forwarded_headers(request), bytes(request.body))
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
            _spawn_forward(urls[holder], self._forwarded_headers(request), bytes(request.body))
        return ", ".join(sent)

    def _forwarded_headers(self, request: Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD_HEADERS}
        return {**headers, FORWARDED_HEADER: self.settings.lease.identity}


def _spawn_forward(url: str, headers: Mapping[str, str], body: bytes) -> None:
    def send() -> None:
        req = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                log.info("webhook_forwarded", status=resp.status)
        except (urllib.error.URLError, OSError) as e:
            log.warning("webhook_not_forwarded", error=str(e))

    threading.Thread(target=send, name="webhook-forward", daemon=True).start()
