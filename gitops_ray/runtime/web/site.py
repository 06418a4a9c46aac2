"""The web page's HTTP routes: ``/`` (the app list), ``/apps/<name>``, and its actions.

Why it reads only memory: a page is built from what the controller keeps anyway (the
catalog, the records and live objects in the watch cache, the RayClusters' Pods, the last
comparison, :mod:`gitops_ray.runtime.compared`), through :meth:`LiveCache.cached`, which
never sends a request. So a page view costs the API server nothing, whoever reloads it
how often; the only exceptions are bounded: the RayClusters a RayJob or RayService made
(not labelled as the app's, so not in the cache; at most :data:`MAX_MADE_CLUSTERS` GETs)
and, for an action, its two reviews (a rollback also reads the record and writes the
pause). The list is paginated (:data:`~.pages.PAGE_SIZE` apps a page, records decoded for
that page only), so 5,000 apps cost a sort of names.

Every answer is a rendered page: an unknown app or path is a 404 page, a refused action a
401/403 page, and a handler bug a 500 page naming nothing (one log line with the
exception's class, as :mod:`gitops_ray.runtime.server` does). Pages carry a strict
Content-Security-Policy (no scripts at all, inline styles only, forms to this origin).

Actions (``ui.actions``, off by default) are ``POST /apps/<name>/<verb>`` for each
:class:`~gitops_ray.runtime.web.auth.Verb`, allowed as :mod:`gitops_ray.runtime.web.auth`
describes. They go through the controller's own paths: a refresh is queued like a
webhook's (with the revision resolved again), a sync is executed as Argo CD's Sync button
is (:meth:`Controller.request_operation`), a rollback (field ``id``: a history entry's
deployment id, in the form or the query) as ``gitops-ray rollback`` is, through that same
path (:meth:`Controller.request_rollback`), and a resume as ``gitops-ray resume``
(:meth:`Controller.resume`). Only the leader writes, so a follower answers 503.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

import structlog

from gitops_ray.errors import ConfigError, GitOpsRayError
from gitops_ray.health.fields import dig, mapping, text
from gitops_ray.kube import KubeError
from gitops_ray.reconcile.argostatus import ManualOperation
from gitops_ray.runtime.catalog import Catalog
from gitops_ray.runtime.compared import diff_text
from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.server import Request, Response, Route, Routes
from gitops_ray.runtime.watches import LiveCache
from gitops_ray.runtime.web.auth import (
    APP_VERBS,
    Caller,
    Denied,
    FormTokens,
    Reviewer,
    Verb,
    bearer,
    same_origin,
)
from gitops_ray.runtime.web.pages import (
    AppPage,
    DiffBlock,
    Diffs,
    app_href,
    app_page,
    app_row,
    live_keys,
    page_of,
    resource_slice,
)
from gitops_ray.runtime.web.render import render
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.sync.records import RecordStore, record_name
from gitops_ray.types import Manifest, ResourceKey

log = structlog.get_logger(__name__)
MAX_FORM_BODY = 16 * 1024  # a form with a token (ServiceAccount tokens are ~1-2 KiB)
MAX_MADE_CLUSTERS = 20  # RayClusters of RayJobs/RayServices fetched for one page
FORM_TYPE = "application/x-www-form-urlencoded"
RAY_API = "ray.io/v1"
HTML = "text/html; charset=utf-8"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store", "X-Frame-Options": "DENY",
}
NOTICES = {Verb.REFRESH.value: "Refresh requested.",
           Verb.SYNC.value: "Sync requested; it shows in the history when it finishes.",
           Verb.ROLLBACK.value: "Rollback requested; it shows in the history when it "
                                "finishes. Automated sync (if any) is paused until resumed.",
           Verb.RESUME.value: "Automated sync resumed: git's revision is synced again."}
Submit = Callable[[str, str], None]
"""(app, reason) -> queue an urgent refresh of the app."""


@dataclass(frozen=True)
class Actions:
    """What the actions need; ``None`` on the site when ``ui.actions`` is off."""

    reviewer: Reviewer
    forms: FormTokens
    submit: Submit


class WebSite:
    """The page's handlers over the controller's memory (see the module docstring)."""

    def __init__(self, *, controller: Controller, cache: LiveCache, namespace: str,
                 actions: Actions | None = None, clock: Callable[[], float] = time.time
                 ) -> None:
        self.controller, self.cache, self.namespace = controller, cache, namespace
        self.catalog: Catalog = controller.catalog
        self.records = RecordStore(controller.store.kube, namespace, lookup=cache.cached)
        self.actions = actions
        self._clock = clock

    def routes(self) -> Routes:
        table: dict[tuple[str, str], Any] = {("GET", "/"): self._guarded(self.app_list),
                                             ("GET", "/apps/*"): self._guarded(self.app)}
        if self.actions is not None:
            table[("POST", "/apps/*")] = Route(self._guarded(self.act), admit=self.admit,
                                               max_body=MAX_FORM_BODY)
        return table

    # -- pages -----------------------------------------------------------------------

    def app_list(self, request: Request) -> Response:
        query = _query(request)
        if query is None:
            return _error(400, "Bad request", "Too many query fields.")
        number = _int((query.get("page") or ["1"])[0])
        invalid = self.catalog.invalid()
        page = page_of([*self.catalog.apps(), *invalid], number=number,
                       query=(query.get("q") or [""])[0])
        now = self._clock()
        rows = [app_row(n, self._status(n), now=now, error=invalid.get(n, ""))
                for n in page.items]
        return _html(200, render("list.html", page=page, rows=rows))

    def app(self, request: Request) -> Response:
        name, rest = _app_path(request.path)
        if name is None or rest or not self._known(name):
            return _not_found("No such app.")
        query = _query(request)
        if query is None:
            return _error(400, "Bad request", "Too many query fields.")
        notice = (query.get("done") or [""])[0]
        page = self.build(name, number=_int((query.get("page") or ["1"])[0]))
        return _html(200, render("app.html", app=page, actions=self._action_forms(name),
                                 notice={"css": "muted", "text": NOTICES[notice]}
                                 if notice in NOTICES else None))

    def build(self, name: str, *, number: int = 1) -> AppPage:
        """The app page's data, from memory (see the module docstring)."""
        status = decode_status(self._status(name))
        resources = resource_slice(status, number=number)
        keys = live_keys(resources.rows)
        live = self._live(keys)
        compared = self.controller.compared.get(name)
        shown = {k for k, _ in keys}
        desired = {k: d.manifest() for k, d in compared.desired().items()
                   if k in shown} if compared else {}
        return app_page(name, status, resources=resources, live=live, desired=desired,
                        candidates=self._candidates(live.values()),
                        diffs=self._diffs(name), now=self._clock(),
                        error=self.catalog.error(name) or "")

    def _status(self, name: str) -> dict[str, Any]:
        try:
            return self.records.load(name).status
        except (KubeError, ValueError):
            return {}

    def _live(self, keys: Sequence[tuple[ResourceKey, str]]) -> dict[ResourceKey, Manifest]:
        out = {}
        for key, api_version in keys:
            obj = self.cache.cached(api_version, key.kind, key.namespace, key.name)
            if obj is not None:
                out[key] = obj
        return out

    def _candidates(self, live: Any) -> list[Manifest]:
        """The Pods and Services of the app's RayClusters, and those of RayJob/RayService."""
        clusters = [o for o in live if text(o.get("kind")) == "RayCluster"]
        made = self._made_clusters([o for o in live if text(o.get("kind")) != "RayCluster"])
        out: list[Manifest] = list(made)
        for cluster in [*clusters, *made]:
            namespace = text(dig(cluster, "metadata", "namespace"))
            name = text(dig(cluster, "metadata", "name"))
            out.extend(self.cache.ray.pods(namespace, name))
            out.extend(self.cache.services.of(namespace, name))
        return out

    def _made_clusters(self, owners: list[Manifest]) -> list[Manifest]:
        names = [(text(dig(o, "metadata", "namespace")), n) for o in owners
                 for n in _made_cluster_names(o)][:MAX_MADE_CLUSTERS]
        out = []
        for namespace, name in names:
            try:
                obj = self.cache.get(RAY_API, "RayCluster", namespace, name)
            except KubeError:
                obj = None
            if obj is not None:
                out.append(obj)
        return out

    def _diffs(self, name: str) -> Diffs:
        compared = self.controller.compared.get(name)
        if compared is None:
            return Diffs()
        blocks = tuple(DiffBlock(str(d.key), d.reason, diff_text(d)) for d in compared.diffs)
        return Diffs(blocks, compared.out_of_sync, compared.dropped, known=True)

    def _known(self, name: str) -> bool:
        return self.catalog.get(name) is not None or self.catalog.error(name) is not None

    def _action_forms(self, name: str) -> dict[str, Any] | None:
        if self.actions is None or self.catalog.get(name) is None:
            return None
        return {"base": app_href(name), "verbs": [v.value for v in APP_VERBS],
                "csrf": self.actions.forms.issue(name, now=self._clock()),
                "record": record_name(name), "namespace": self.namespace}

    # -- actions ---------------------------------------------------------------------

    def admit(self, headers: Mapping[str, str]) -> Response | None:
        """Refuse, before the body is read, a form that is not this site's own."""
        if bearer(headers) is not None:
            return None
        if headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
            return _error(415, "Unsupported form", "Send the page's form, or a bearer token "
                                                    "in the Authorization header.")
        if not same_origin(headers):
            return _error(403, "Forbidden", "A form from another site is refused.")
        return None

    def act(self, request: Request) -> Response:
        name, rest = _app_path(request.path)
        if name is None or rest not in [v.value for v in Verb] or not self._known(name):
            return _not_found("No such app or action.")
        verb, header_token = Verb(rest), bearer(request.headers)
        try:
            fields = _fields(request)
            token = header_token if header_token is not None else self._form_token(
                name, fields)
            caller = self.actions_or_fail().reviewer.authorize(token, name, verb,
                                                               client=request.client)
            self._perform(name, verb, caller, fields)
        except Denied as denied:
            log.info("ui_action_refused", app=name, verb=verb.value, status=denied.status)
            return _error(denied.status, _TITLES.get(denied.status, "Refused"), denied.message,
                          back=app_href(name))
        if header_token is not None:
            return Response(202, f"{verb.value} requested\n".encode())
        return Response(303, b"", headers={
            "Location": f"{app_href(name)}?done={verb.value}", **SECURITY_HEADERS})

    def actions_or_fail(self) -> Actions:
        if self.actions is None:
            raise Denied(404, "Actions are off.")
        return self.actions

    def _form_token(self, name: str, fields: Mapping[str, list[str]]) -> str:
        """The form's bearer token, once its CSRF token is checked."""
        csrf = (fields.get("csrf") or [""])[0]
        if not self.actions_or_fail().forms.valid(csrf, name, now=self._clock()):
            raise Denied(403, "The form has expired or is not this site's; reload the page.")
        token = (fields.get("token") or [""])[0].strip()
        return token.removeprefix("Bearer ").strip()

    def _perform(self, name: str, verb: Verb, caller: Caller,
                 fields: Mapping[str, list[str]]) -> None:
        if not self.controller.leading:
            raise Denied(503, "This replica does not lead; only the leader syncs. Retry.")
        entry_id = _entry_id(fields) if verb is Verb.ROLLBACK else None
        try:
            done = self._request(name, verb, caller, entry_id)
        except ConfigError as e:  # no such history entry: the message names the known ids
            raise Denied(400, str(e)) from None
        except GitOpsRayError as e:
            raise Denied(503, f"The record could not be read or written "
                              f"({type(e).__name__}). Retry.") from None
        if not done:
            raise Denied(503, "This replica does not lead any more. Retry.")
        self.actions_or_fail().submit(name, f"ui-{verb.value}")
        log.info("ui_action", app=name, verb=verb.value, user=caller.username,
                 **({"rollback_to": entry_id} if entry_id is not None else {}))

    def _request(self, name: str, verb: Verb, caller: Caller, entry_id: int | None) -> bool:
        """Hand the action to the controller; ``False`` when it no longer leads."""
        user = caller.username
        if verb is Verb.SYNC:
            op = ManualOperation(raw={"sync": {}, "initiatedBy": {"username": user}},
                                 initiated_by={"username": user})
            return self.controller.request_operation(name, op)
        if verb is Verb.ROLLBACK and entry_id is not None:
            return self.controller.request_rollback(name, entry_id, user=user)
        if verb is Verb.RESUME:
            self.controller.resume(name)
            return self.controller.leading
        self.controller.request_refresh(name)
        return True

    # -- failures --------------------------------------------------------------------

    def _guarded(self, handle: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``handle``, with any bug answered by a 500 page naming nothing."""
        def guarded(request: Request) -> Response:
            try:
                return handle(request)
            except Exception as e:
                log.error("ui_page_failed", path=request.path[:200], error=type(e).__name__)
                return _error(500, "Internal error", "The page could not be built; the "
                                                     "controller's log says why.")
        return guarded


_TITLES = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
           429: "Too many attempts", 503: "Unavailable"}


def _app_path(path: str) -> tuple[str | None, str]:
    """``/apps/<name>[/<rest>]`` -> (name, rest); name ``None`` when unreadable."""
    parts = path.removeprefix("/apps/").split("/")
    if len(parts) > 2 or not parts[0]:
        return None, ""
    try:
        return unquote(parts[0], errors="strict"), "/".join(parts[1:])
    except UnicodeDecodeError:
        return None, ""


def _query(request: Request) -> dict[str, list[str]] | None:
    """A page's query fields (``None``: more than a page takes, or not readable)."""
    try:
        return parse_qs(request.query, max_num_fields=4)
    except ValueError:
        return None


def _fields(request: Request) -> dict[str, list[str]]:
    """The query's fields, and a form body's over them (a bearer client may send none)."""
    try:
        fields = parse_qs(request.query, max_num_fields=4)
        fields.pop("token", None)  # a token in a URL ends up in logs and history: body only
        if request.headers.get("content-type", "").split(";")[0].strip() == FORM_TYPE:
            fields.update(parse_qs(bytes(request.body).decode(), max_num_fields=8))
    except (UnicodeDecodeError, ValueError):
        raise Denied(400, "The form could not be read.") from None
    return fields


def _entry_id(fields: Mapping[str, list[str]]) -> int:
    """The history entry a rollback asks for (field ``id``: a deployment id)."""
    value = (fields.get("id") or [""])[0].strip()
    if not (value.isascii() and value.isdigit() and len(value) < 10):
        raise Denied(400, "Which deployment? Send the history entry's id (a number).")
    return int(value)


def _made_cluster_names(owner: Manifest) -> list[str]:
    """The RayClusters a RayJob or RayService says it made (status fields)."""
    status = mapping(owner.get("status"))
    names = [text(status.get("rayClusterName")),
             text(dig(status, "activeServiceStatus", "rayClusterName")),
             text(dig(status, "pendingServiceStatus", "rayClusterName"))]
    return [n for n in names if n]


def _int(value: str) -> int:
    return int(value) if value.isascii() and value.isdigit() and len(value) < 9 else 1


def _html(status: int, body: bytes) -> Response:
    return Response(status, body, HTML, SECURITY_HEADERS)


def _error(status: int, title: str, message: str, *, back: str = "/") -> Response:
    return _html(status, render("error.html", status=status, title=title, message=message,
                                back=back))


def _not_found(message: str) -> Response:
    return _error(404, "Not found", message)

