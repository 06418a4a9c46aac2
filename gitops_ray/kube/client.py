"""The one place that talks to the Kubernetes API server.

Why raw JSON instead of the generated models: the reconciler works on whole manifests
(apply, diff, prune), custom resources have no generated models, and decoding 1,000
RayClusters into pydantic objects only to turn them back into dicts is wasted time. The
official ``kubernetes`` client is still used for what it does well: loading kubeconfig or
in-cluster credentials, TLS, token refresh and connection pooling.

Every request is counted by verb and status in :attr:`Kube.stats`, so metrics and
benchmarks can prove how many calls a cycle made. A client given a
:class:`~gitops_ray.kube.fence.WriteFence` (:attr:`Kube.fence`, set by a controller that
elects a leader) checks it right before sending each mutating request, so a replica that
may have lost the Lease cannot write. A client given an :class:`~gitops_ray.kube.outbox.Outbox`
(:attr:`Kube.outbox`, the controller's) sends best-effort writes, Events, from its thread.

Every response body and watch event is decoded by :mod:`gitops_ray.jsonio` (orjson, the
hot path of a LIST of thousands of RayClusters); a body that is not JSON, or nested past
its bound, fails that request with a :class:`KubeError` naming a position, never a value.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from gitops_ray import __version__, jsonio
from gitops_ray.errors import ConfigError
from gitops_ray.kube.errors import (
    KubeError,
    NotFound,
    TooManyRequests,
    UnknownKind,
    Unreachable,
    error_from_response,
)
from gitops_ray.kube.fence import WriteFence, is_write
from gitops_ray.kube.outbox import Outbox
from gitops_ray.types import Manifest, split_api_version

APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT = 30.0
MAX_RETRIES = 3  # resends of one request (429, 5xx, lost connection), then the error
MAX_RETRY_AFTER = 10.0  # a server's Retry-After is honoured up to this many seconds
DISCOVERY_MISS_TTL = 10.0  # an unknown kind is not looked up again for this long
AGGREGATED_DISCOVERY = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                        "application/json")


@dataclass(frozen=True)
class ResourceInfo:
    """What discovery says about one kind: where it lives and whether it is namespaced."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """URL path of the collection, or of one object when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


@dataclass(frozen=True)
class Capabilities:
    """What a cluster tells a chart: ``v1.36.3`` and ``group/version[/Kind]`` strings."""

    kube_version: str
    api_versions: tuple[str, ...]


def api_version_strings(doc: Mapping[str, Any]) -> set[str]:
    """``group/version`` and ``group/version/Kind`` of an aggregated discovery document.

    That is ``apidiscovery.k8s.io/v2``, answered for ``/api`` and ``/apis``; Argo CD passes
    the same strings to ``helm template --api-versions``.
    """
    out: set[str] = set()
    for group in doc.get("items") or []:
        name = str((group.get("metadata") or {}).get("name") or "")
        for version in group.get("versions") or []:
            gv = f"{name}/{version.get('version')}" if name else str(version.get("version"))
            out.add(gv)
            out.update(f"{gv}/{r['responseKind']['kind']}" for r in version.get("resources")
                       or [] if (r.get("responseKind") or {}).get("kind"))
    return out


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: Manifest


RequestHook = Callable[[str, str, int, float], None]
"""Called after each request with (verb, resource plural, status, seconds)."""


class Kube:
    """A thin, typed, thread-safe client over raw JSON."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self._api = api_client
        self._api.user_agent = f"gitops-ray/{__version__}"
        self._discovery: dict[str, dict[str, ResourceInfo]] = {}
        self._lock = threading.Lock()
        self.stats: Counter[tuple[str, int]] = Counter()
        self.retries = 0  # requests sent again (429, 5xx, lost connections)
        self._misses: dict[tuple[str, str], float] = {}
        self.hooks: list[RequestHook] = []
        self.fence: WriteFence | None = None  # None: every write is allowed (CLI, tests)
        self.outbox: Outbox | None = None  # None: best-effort writes are sent inline

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """Connect with a kubeconfig (``$KUBECONFIG``, ``~/.kube/config``) or in-cluster."""
        cfg = k8s_client.Configuration()
        try:
            if kubeconfig or context or not _in_cluster():
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, context=context, client_configuration=cfg)
            else:
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=cfg)
        except (ConfigException, OSError) as e:
            raise ConfigError(f"cannot load Kubernetes credentials: {e}") from e
        cfg.connection_pool_maxsize = 32
        return cls(k8s_client.ApiClient(cfg))

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def keep_connections(self, count: int) -> None:
        """Keep up to ``count`` connections open to reuse: as many as may be in flight.

        Past its size, urllib3's pool opens a connection per extra request and closes it
        afterwards (a TLS handshake each, and a "pool is full" warning): the controller
        runs ``workers`` refreshes with up to ``sync.parallelism`` applies each, besides
        its watches. Call before the first request (pools made earlier are dropped).
        """
        manager = self._api.rest_client.pool_manager
        manager.connection_pool_kw["maxsize"] = count
        manager.clear()

    @property
    def kept_connections(self) -> int:
        """How many connections per server this client keeps open to reuse."""
        return int(self._api.rest_client.pool_manager.connection_pool_kw.get("maxsize", 1))

    # -- transport -------------------------------------------------------------------

    def call(self, method: str, path: str, *, query: dict[str, Any] | None = None,
             body: Any = None, content_type: str | None = None,
             timeout: float | None = DEFAULT_TIMEOUT, verb: str = "",
             resource: str = "", accept: str = "application/json", fenced: bool = True
             ) -> Any:
        """Send one request and return the decoded JSON body (``None`` when empty).

        ``fenced=False``: a POST that changes nothing on the server (a review), so a
        follower may send it too.

        Retried (see :func:`retry_delay`) when the server asks us to come back (429, or a
        5xx with ``Retry-After``), and for requests that are safe to repeat (reads and
        server-side apply) on any 5xx or a lost connection.
        """
        attempt = 0
        while True:
            try:
                resp = self._send(method, path, query=query, body=body,
                                  content_type=content_type, timeout=timeout,
                                  verb=verb or method.lower(), resource=resource,
                                  accept=accept, fenced=fenced)
                data = resp.read()
            except KubeError as e:
                attempt += 1
                delay = retry_delay(e, attempt, idempotent=_idempotent(method, content_type))
                if delay is None:
                    raise
                self.retries += 1
                time.sleep(delay)
                continue
            return _decoded(data, f"{method} {path}")

    def _send(self, method: str, path: str, *, query: dict[str, Any] | None, body: Any,
              content_type: str | None, timeout: float | None, verb: str,
              resource: str, accept: str = "application/json", fenced: bool = True) -> Any:
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        _, url, headers, _, _ = self._api.param_serialize(
            method, path, query_params=params, header_params=headers,
            auth_settings=["BearerToken"])
        if fenced and self.fence is not None and is_write(method, query, body):
            self.fence.check(f"{method} {path}")  # as late as possible before sending
        start = _now()
        try:
            resp = self._api.rest_client.request(  # type: ignore[no-untyped-call]
                method, url, headers=headers, body=body, _request_timeout=timeout)
        except (urllib3.exceptions.HTTPError, k8s_client.ApiException, OSError) as e:
            self._record(verb, resource, 0, start)
            raise Unreachable(f"{method} {path}: API server unreachable: {e}") from e
        self._record(verb, resource, resp.status, start)
        if resp.status >= 300:
            error = error_from_response(resp.status, resp.read(), f"{method} {path}")
            error.retry_after = _seconds(resp.getheader("Retry-After"))
            raise error
        return resp

    def _record(self, verb: str, resource: str, status: int, start: float) -> None:
        with self._lock:
            self.stats[(verb, status)] += 1
        for hook in self.hooks:
            hook(verb, resource, status, _now() - start)

    # -- discovery -------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Look a kind up by discovery; refreshes once on a miss (a CRD may be new).

        A miss is remembered for :data:`DISCOVERY_MISS_TTL` seconds, so asking again and
        again for a kind whose CRD is not installed costs no request each time.
        """
        found = self._group_version(api_version, False).get(kind)
        if found:
            return found
        missed = self._misses.get((api_version, kind))
        if missed is None or _now() - missed >= DISCOVERY_MISS_TTL:
            found = self._group_version(api_version, True).get(kind)
            if found:
                self._misses.pop((api_version, kind), None)
                return found
            self._misses[(api_version, kind)] = _now()
        raise UnknownKind(f"the server has no resource for {api_version} {kind}; "
                          "is its CustomResourceDefinition installed?")

    def _group_version(self, api_version: str, refresh: bool) -> dict[str, ResourceInfo]:
        cached = self._discovery.get(api_version)
        if cached is not None and not refresh:
            return cached
        group, version = split_api_version(api_version)
        path = f"/apis/{api_version}" if group else f"/api/{version}"
        try:
            doc = self.call("GET", path, verb="discovery")
        except NotFound:
            doc = {"resources": []}
        kinds = {r["kind"]: ResourceInfo(group, version, r["kind"], r["name"], r["namespaced"])
                 for r in doc.get("resources", []) if "/" not in r["name"]}
        self._discovery[api_version] = kinds
        return kinds

    def capabilities(self) -> Capabilities:
        """The server's version and every API it serves (three requests).

        That is what Helm's ``.Capabilities`` sees when Argo CD renders a chart
        (``--kube-version``, ``--api-versions``).
        """
        info = self.call("GET", "/version", verb="discovery", resource="version") or {}
        version = str(info.get("gitVersion") or "").split("+", 1)[0]
        names: set[str] = set()
        for path in ("/api", "/apis"):
            doc = self.call("GET", path, verb="discovery", accept=AGGREGATED_DISCOVERY) or {}
            if doc.get("kind") == "APIGroupDiscoveryList":
                names.update(api_version_strings(doc))
            else:  # a server without aggregated discovery: one request per group/version
                names.update(self._legacy_api_versions(doc))
        return Capabilities(version, tuple(sorted(names)))

    def _legacy_api_versions(self, doc: Mapping[str, Any]) -> set[str]:
        versions = [str(v) for v in doc.get("versions") or []]  # /api: ["v1"]
        versions += [str(v.get("groupVersion")) for g in doc.get("groups") or []
                     for v in g.get("versions") or []]
        out = set(versions)
        for gv in versions:
            out.update(f"{gv}/{kind}" for kind in self._group_version(gv, False))
        return out

    def info_of(self, obj: Manifest) -> ResourceInfo:
        return self.resource(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))

    # -- reads -----------------------------------------------------------------------

    def get(self, api_version: str, kind: str, *, name: str,
            namespace: str | None = None) -> Manifest | None:
        """The live object, or ``None`` when it does not exist."""
        info = self.resource(api_version, kind)
        try:
            obj: Manifest = self.call("GET", info.path(namespace, name), verb="get",
                                      resource=info.plural)
        except NotFound:
            return None
        return obj

    def list(self, api_version: str, kind: str, namespace: str | None = None, *,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> tuple[list[Manifest], str]:
        """All objects of a kind, and the list's resourceVersion for a watch."""
        items: list[Manifest] = []
        version = ""
        for page, page_version in self.list_pages(api_version, kind, namespace,
                                                  label_selector=label_selector,
                                                  field_selector=field_selector):
            items.extend(page)
            version = page_version
        return items, version

    def list_pages(self, api_version: str, kind: str, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None,
                   limit: int = 500) -> Iterator[tuple[Sequence[Manifest], str]]:
        """The objects of a kind page by page, each with the list's resourceVersion.

        Every page of one list is served from the same snapshot, so the version is that
        of the whole list. A caller that keeps objects in another form (the watch cache
        packs them) never holds more than one page decoded.
        """
        info = self.resource(api_version, kind)
        query: dict[str, Any] = {"labelSelector": label_selector,
                                 "fieldSelector": field_selector, "limit": limit}
        while True:
            doc = self.call("GET", info.path(namespace), query=query, verb="list",
                            resource=info.plural)
            items = doc.get("items", [])
            for item in items:
                item.setdefault("apiVersion", info.api_version)
                item.setdefault("kind", kind)
            meta = doc.get("metadata", {})
            yield items, str(meta.get("resourceVersion", ""))
            if not meta.get("continue"):
                return
            query["continue"] = meta["continue"]

    def watch(self, api_version: str, kind: str, namespace: str | None = None, *,
              resource_version: str = "", label_selector: str | None = None,
              field_selector: str | None = None, timeout_seconds: int = 300
              ) -> Iterator[WatchEvent]:
        """Stream watch events until the server closes the stream.

        Raises :class:`Gone` when ``resource_version`` is too old (relist then).
        """
        info = self.resource(api_version, kind)
        query = {"watch": "true", "resourceVersion": resource_version or None,
                 "allowWatchBookmarks": "true", "labelSelector": label_selector,
                 "fieldSelector": field_selector, "timeoutSeconds": timeout_seconds}
        resp = self._send("GET", info.path(namespace), query=query, body=None,
                          content_type=None, timeout=timeout_seconds + 10, verb="watch",
                          resource=info.plural)
        try:
            for line in _lines(resp.response):
                event = jsonio.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise error_from_response(int(obj.get("code", 500)),
                                              jsonio.dumps(obj), f"watch {info.plural}")
                yield WatchEvent(str(event.get("type")), obj)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            self._record("watch", info.plural, 0, _now())  # readiness hears of it at once
            raise Unreachable(f"watch {info.plural}: stream broken: {e}") from e
        except ValueError as e:
            raise Unreachable(f"watch {info.plural}: stream broken: {e}") from e
        finally:
            resp.response.release_conn()

    # -- writes ----------------------------------------------------------------------

    def apply(self, obj: Manifest, *, field_manager: str, force: bool = False,
              dry_run: bool = False) -> Manifest:
        """Server-side apply ``obj`` as ``field_manager``.

        If ``obj`` carries ``metadata.resourceVersion`` the server treats it as a
        precondition, which is how callers get optimistic concurrency.
        """
        info = self.info_of(obj)
        meta = obj.get("metadata", {})
        path = info.path(meta.get("namespace"), meta["name"])
        query = {"fieldManager": field_manager, "force": "true" if force else None,
                 "dryRun": "All" if dry_run else None}
        result: Manifest = self.call(
            "PATCH", path, query=query, body=_encoded(obj, f"PATCH {path}"),
            content_type=APPLY_PATCH, verb="apply", resource=info.plural)
        return result

    def create(self, obj: Manifest, *, field_manager: str, dry_run: bool = False) -> Manifest:
        info = self.info_of(obj)
        query = {"fieldManager": field_manager, "dryRun": "All" if dry_run else None}
        result: Manifest = self.call(
            "POST", info.path(obj.get("metadata", {}).get("namespace")), query=query,
            body=obj, verb="create", resource=info.plural)
        return result

    def replace(self, obj: Manifest, *, field_manager: str, dry_run: bool = False,
                subresource: str | None = None) -> Manifest:
        """PUT the object (``resourceVersion`` in ``obj`` is the precondition)."""
        info = self.info_of(obj)
        meta = obj.get("metadata", {})
        query = {"fieldManager": field_manager, "dryRun": "All" if dry_run else None}
        result: Manifest = self.call(
            "PUT", info.path(meta.get("namespace"), meta["name"], subresource), query=query,
            body=obj, verb="update", resource=info.plural)
        return result

    def patch(self, api_version: str, kind: str, *, name: str, namespace: str | None,
              patch: Any, content_type: str = JSON_PATCH, field_manager: str | None = None,
              subresource: str | None = None, dry_run: bool = False) -> Manifest:
        """JSON Patch (default) or merge patch one object."""
        info = self.resource(api_version, kind)
        query = {"fieldManager": field_manager, "dryRun": "All" if dry_run else None}
        result: Manifest = self.call(
            "PATCH", info.path(namespace, name, subresource), query=query, body=patch,
            content_type=content_type, verb="patch", resource=info.plural)
        return result

    def delete(self, api_version: str, kind: str, *, name: str, namespace: str | None = None,
               propagation_policy: str | None = None, uid: str | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> bool:
        """Delete one object; ``False`` when it was already gone.

        ``uid`` and ``resource_version`` become preconditions, so we never delete an object
        that was replaced or changed since we decided to.
        """
        info = self.resource(api_version, kind)
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if preconditions:
            body["preconditions"] = preconditions
        if dry_run:
            body["dryRun"] = ["All"]
        try:
            self.call("DELETE", info.path(namespace, name), body=body, verb="delete",
                      resource=info.plural)
        except NotFound:
            return False
        return True

    # -- reviews (who is asking, and may they) -----------------------------------------

    def token_review(self, token: str, audiences: Sequence[str] = ()) -> Manifest:
        """The ``status`` of a TokenReview of ``token`` (``authenticated``, ``user``, ...).

        For ``audiences`` if given (the API server's own when empty); ``status.audiences``
        then says which of them the token is for. The token goes in the request body only;
        it is never logged or kept.
        """
        spec: Manifest = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        result = self.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body,
                           verb="create", resource="tokenreviews", fenced=False)
        return dict((result or {}).get("status") or {})

    def access_review(self, spec: Manifest) -> Manifest:
        """The ``status`` of a SubjectAccessReview of ``spec`` (``allowed``, ``reason``)."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec}
        result = self.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                           body=body, verb="create", resource="subjectaccessreviews",
                           fenced=False)
        return dict((result or {}).get("status") or {})


def _decoded(data: bytes, context: str) -> Any:
    """A response body decoded (``None`` when empty); :class:`KubeError` if it is not JSON.

    The error names the position, never the body (:mod:`gitops_ray.jsonio`).
    """
    if not data:
        return None
    try:
        return jsonio.loads(data)
    except jsonio.DecodeError as e:
        raise KubeError(f"{context}: the response is not JSON: {e}") from None


def _encoded(obj: Manifest, context: str) -> bytes:
    """``obj`` as the JSON bytes of an apply body (:func:`gitops_ray.jsonio.dumps_yaml_safe`).

    The kube client passes bytes through as they are; given a dict, it encodes it with
    ``json.dumps``, ~5x orjson's CPU for a RayCluster (server-side apply is one request
    per object applied). What YAML would misread is escaped: the API server reads an
    apply body as YAML. What JSON cannot hold (NaN, an integer past 64 bits)
    fails this request with a :class:`KubeError` naming the type, never a value.
    """
    try:
        return jsonio.dumps_yaml_safe(obj)
    except jsonio.EncodeError as e:
        raise KubeError(f"{context}: {e}") from None


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated events of a watch stream, in time linear in its size.

    A large object arrives in many chunks: each chunk is scanned once and appended once,
    never re-split from the start of the line.
    """
    pending = bytearray()
    for chunk in response.stream(65536, decode_content=True):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending += chunk[start:end]
            if pending.strip():
                yield bytes(pending)
            pending.clear()
            start = end + 1
        pending += chunk[start:]
    if pending.strip():
        yield bytes(pending)


def retry_delay(error: KubeError, attempt: int, *, idempotent: bool) -> float | None:
    """Seconds to wait before sending a failed request again, or ``None``: give up.

    429 means the server did not process the request, so any request may be resent;
    a 5xx or a lost connection only for requests that are safe to repeat. The server's
    ``Retry-After`` is honoured (capped); otherwise the wait doubles from 0.2 s.
    """
    if attempt > MAX_RETRIES:
        return None
    asked = error.retry_after
    if isinstance(error, TooManyRequests) or (asked is not None and error.status >= 500):
        pass
    elif not (idempotent and (error.status >= 500 or isinstance(error, Unreachable))):
        return None
    backoff = 0.2 * 2 ** (attempt - 1)
    return min(MAX_RETRY_AFTER, asked if asked is not None else backoff)


def _idempotent(method: str, content_type: str | None) -> bool:
    return method in ("GET", "HEAD") or (method == "PATCH" and content_type == APPLY_PATCH)


def _seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the API server sends whole seconds)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _now() -> float:
    return time.monotonic()


__all__ = ["Kube", "KubeError", "ResourceInfo", "WatchEvent"]
