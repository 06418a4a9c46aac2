"""A handed-over app's resource tree and managed resources, written into Argo CD's Redis.

Why: argocd-server reads the UI's tree and diff, ``argocd app resources``, ``argocd app
diff`` and ``argocd app manifests`` from the application controller's Redis cache, which
that controller does not fill for an app it skips (:mod:`gitops_ray.reconcile.argoviews`
says which keys and what JSON). After each comparison of a handed-over app the leader
writes the two entries there, as Argo CD's controller would:

* **Where**: ``argocd.redis`` (default ``argocd-redis.<argocd.namespace>.svc:6379``,
  Argo CD's ``common.DefaultRedisAddr`` in its namespace), with the password Argo CD's
  own components get as ``REDIS_PASSWORD``: key ``auth`` of the Secret ``argocd-redis``
  in Argo CD's namespace (no Secret: no password). The password is never logged.
* **In which format**: that of the Argo CD version argocd-server reports (``GET
  /api/version`` of ``argocd.server``, anonymous, as ``argocd version`` asks; re-read
  every :data:`VERSION_TTL_S`), or ``argocd.version`` when set. An unknown version writes
  nothing and says why (one log line, and :attr:`ArgoViews.problem`). That read sends
  nothing and carries no secret: a self-signed certificate (Argo CD's default) is
  accepted for it.
* **How**: each value JSON, gzip-compressed with the key suffix ``.gz`` when
  ``argocd.redisCompression`` is ``gzip`` (Argo CD's default, ``util/cache/redis.go``),
  with the expiry of Argo CD's ``--app-state-cache-expiration`` (1 h, :data:`EXPIRY_S`);
  then ``PUBLISH`` on the managed-resources key, which argocd-server's tree watch (the
  UI's live tree) waits on. Written only when the content changed, or when half the
  expiry has passed (so an unchanged app's entries never lapse).
* **Bounded**: connect and read timeouts, no retries, each value at most
  :data:`MAX_VALUE_BYTES` of JSON; after a failure Redis is left alone for
  :data:`BACKOFF_S`. A failure is a log line (once per distinct problem), never an error
  of the sync or of the status write that follows.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import redis
import structlog
import urllib3
from redis.backoff import NoBackoff
from redis.retry import Retry

from gitops_ray.health.fields import dig, mapping, text
from gitops_ray.jsonio import dumps, loads
from gitops_ray.kube import Kube, KubeError, NotFound
from gitops_ray.reconcile.argoviews import (
    Format,
    application_tree,
    cache_version,
    managed_resources,
)
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.redact import redact
from gitops_ray.settings import ArgoCD
from gitops_ray.types import Manifest, ResourceKey

log = structlog.get_logger(__name__)
PASSWORD_SECRET, PASSWORD_KEY = "argocd-redis", "auth"
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 2.0, 5.0
EXPIRY_S = 3600  # Argo CD's --app-state-cache-expiration default
VERSION_TTL_S, BACKOFF_S = 600.0, 30.0
MAX_VALUE_BYTES = 8 * 1024 * 1024  # of JSON, per value, before compression
MAX_VERSION_BYTES = 64 * 1024
RAY_API = "ray.io/v1"


class Cache(Protocol):
    """What is read of the destination cluster's watch cache (never a request)."""

    def cached(self, api_version: str, kind: str, namespace: str, name: str
               ) -> Manifest | None: ...


@dataclass
class _Kept:
    """One app: its last comparison and what was last written for it."""

    comparison: Comparison
    cache: Any  # the destination's LiveCache (runtime.watches)
    written: tuple[object, object] | None = None  # (comparison, rows) last published
    digest: str = ""
    at: float = 0.0

    def same(self, rows: object) -> bool:
        """Published from this very comparison and rows (identity: no deep compare)."""
        return self.written is not None and self.written[0] is self.comparison and \
            self.written[1] is rows


Versions = Callable[[], str]  # argocd-server's version text (raises OSError/ValueError)


class ArgoViews:
    """Writes handed-over apps' trees and managed resources (see the module docstring)."""

    def __init__(self, kube: Kube, settings: ArgoCD, *, version: Versions | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube, self.settings = kube, settings
        self._version = version or ((lambda: settings.version) if settings.version
                                    else ServerVersion(settings.server_url))
        self._clock = clock
        self._lock = threading.Lock()
        self._apps: dict[str, _Kept] = {}
        self._format: tuple[Format | str, float] | None = None  # (format or why, read at)
        self._client: redis.Redis | None = None
        self._down_until = 0.0
        self.problem = ""
        """Why the last write did not happen ("" when it did), also logged once."""

    def compared(self, name: str, comparison: Comparison, cache: Any) -> None:
        """Remember the app's newest comparison (written at the next :meth:`publish`)."""
        with self._lock:
            kept = self._apps.get(name)
            if kept is None:
                self._apps[name] = _Kept(comparison, cache)
            else:
                kept.comparison, kept.cache = comparison, cache

    def forget(self, name: str) -> None:
        with self._lock:
            self._apps.pop(name, None)

    def publish(self, name: str, record: Mapping[str, Any]) -> bool:
        """Write the app's two entries if they changed; ``True`` when written. Never raises."""
        with self._lock:
            kept = self._apps.get(name)
        rows = record.get("resources") or []
        now = self._clock()
        if kept is None or not self.settings.views or (
                kept.same(rows) and now - kept.at < EXPIRY_S / 2):
            return False
        fmt = self._known_format(now)
        if isinstance(fmt, str):
            return self._not_written(name, fmt)
        try:
            values = encode(views(kept.comparison, rows, kept.cache),
                            gzipped=self.settings.redis_compression == "gzip")
        except ValueError as e:
            return self._not_written(name, str(e))
        digest = hashlib.sha256(b"".join(values)).hexdigest()
        fresh = digest == kept.digest and now - kept.at < EXPIRY_S / 2
        if not fresh and not self._write(name, fmt, values, now):
            return False
        kept.written = (kept.comparison, rows)
        if not fresh:
            kept.digest, kept.at = digest, now
        return not fresh

    # -- pieces ----------------------------------------------------------------------

    def _known_format(self, now: float) -> Format | str:
        """The format argocd-server's version asks for, re-read every VERSION_TTL_S."""
        with self._lock:
            known = self._format
        if known is not None and now - known[1] < (VERSION_TTL_S if isinstance(
                known[0], Format) else BACKOFF_S):
            return known[0]
        try:
            found: Format | str = cache_version(self._version())
        except (OSError, ValueError, urllib3.exceptions.HTTPError) as e:
            found = (f"cannot read argocd-server's version at {self.settings.server_url}"
                     f"/api/version: {redact(str(e))[:300]}")
        with self._lock:
            self._format = (found, now)
        return found

    def _write(self, name: str, fmt: Format, values: tuple[bytes, bytes], now: float) -> bool:
        if now < self._down_until:
            return False
        suffix = ".gz" if self.settings.redis_compression == "gzip" else ""
        try:
            client = self._connect()
            with client.pipeline(transaction=False) as pipe:
                pipe.set(fmt.tree_key(name) + suffix, values[0], ex=EXPIRY_S)
                pipe.set(fmt.managed_key(name) + suffix, values[1], ex=EXPIRY_S)
                pipe.publish(fmt.managed_key(name), "")
                pipe.execute()
        except (redis.RedisError, OSError, KubeError) as e:
            self._down_until = now + BACKOFF_S
            with self._lock:
                self._client = None
            return self._not_written(name, f"Argo CD's Redis at {self.settings.redis_address}: "
                                           f"{type(e).__name__}: {redact(str(e))[:300]}")
        if self.problem:
            log.info("argocd_views_written", app=name, note="writing again")
        self.problem = ""
        return True

    def _connect(self) -> redis.Redis:
        with self._lock:
            if self._client is not None:
                return self._client
        host, _, port = self.settings.redis_address.rpartition(":")
        client = redis.Redis(host=host.strip("[]") or "localhost", port=int(port),
                             password=self._password(), socket_timeout=READ_TIMEOUT_S,
                             socket_connect_timeout=CONNECT_TIMEOUT_S,
                             retry=Retry(NoBackoff(), 0),
                             health_check_interval=0)
        with self._lock:
            self._client = client
        return client

    def _password(self) -> str | None:
        """Key ``auth`` of Argo CD's ``argocd-redis`` Secret, as its components read it."""
        try:
            secret = self.kube.get("v1", "Secret", name=PASSWORD_SECRET,
                                   namespace=self.settings.namespace)
        except NotFound:
            return None
        raw = text(mapping((secret or {}).get("data")).get(PASSWORD_KEY))
        return base64.b64decode(raw).decode().strip() if raw else None

    def _not_written(self, name: str, why: str) -> bool:
        if why != self.problem:
            log.warning("argocd_views_not_written", app=name, reason=why,
                        note="argocd app resources/diff/manifests and the UI's tree "
                             "show nothing new for handed-over apps; logged once")
        self.problem = why
        return False


def views(comparison: Comparison, rows: Sequence[Mapping[str, Any]], cache: Cache
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The app's ``ApplicationTree`` and ``[]ResourceDiff`` from its comparison and cache."""
    versions = {_key(r): _api_version(r) for r in rows}
    desired = {d.key: d for d in comparison.desired}
    live: dict[ResourceKey, Manifest] = {}
    for key in {*versions, *(r.key for r in comparison.diff.resources)}:
        api = versions.get(key) or (desired[key].api_version if key in desired else "")
        obj = comparison.live.get(key) or (cache.cached(api, key.kind, key.namespace, key.name)
                                           if api else None)
        if obj is not None:
            live[key] = obj
    tree = application_tree(rows, live, made(live.values(), cache))
    manifests = {k: d.manifest() for k, d in desired.items()}
    return tree, managed_resources(comparison.diff.resources, manifests, live)


def made(owners: Any, cache: Any) -> list[Manifest]:
    """What KubeRay made of the app's Ray objects: Pods, Services, RayClusters (cached)."""
    owned = list(owners)
    out: list[Manifest] = []  # the RayClusters of RayJobs and RayServices first
    for owner in owned:
        status = mapping(owner.get("status"))
        for name in (text(status.get("rayClusterName")),
                     text(dig(status, "activeServiceStatus", "rayClusterName")),
                     text(dig(status, "pendingServiceStatus", "rayClusterName"))):
            found = cache.cached(RAY_API, "RayCluster", text(dig(owner, "metadata", "namespace")),
                                 name) if name and text(owner.get("kind")) != "RayCluster" \
                else None
            if found is not None:
                out.append(found)
    for cluster in [*(o for o in owned if text(o.get("kind")) == "RayCluster"), *out]:
        namespace, name = text(dig(cluster, "metadata", "namespace")), \
            text(dig(cluster, "metadata", "name"))
        out.extend(cache.ray.pods(namespace, name))
        out.extend(cache.services.of(namespace, name))
    return out


def encode(values: tuple[dict[str, Any], list[dict[str, Any]]], *, gzipped: bool
           ) -> tuple[bytes, bytes]:
    """Each value as Argo CD's cache stores it: JSON (+ newline, Go's encoder), maybe gzip.

    ``ValueError`` when one is larger than :data:`MAX_VALUE_BYTES`.
    """
    out = []
    for value, what in zip(values, ("resource tree", "managed resources"), strict=True):
        data = dumps(value) + b"\n"
        if len(data) > MAX_VALUE_BYTES:
            raise ValueError(f"the app's {what} is {len(data)} bytes of JSON, more than "
                             f"{MAX_VALUE_BYTES}: not written")
        out.append(gzip.compress(data, mtime=0) if gzipped else data)
    return out[0], out[1]


def _key(row: Mapping[str, Any]) -> ResourceKey:
    return ResourceKey(text(row.get("group")), text(row.get("kind")),
                       text(row.get("namespace")), text(row.get("name")))


def _api_version(row: Mapping[str, Any]) -> str:
    group, version = text(row.get("group")), text(row.get("version"))
    return f"{group}/{version}" if group else version


class ServerVersion:
    """``GET <argocd-server>/api/version`` → its ``Version`` (e.g. ``v3.6.1+abc1234``)."""

    def __init__(self, url: str) -> None:
        self.url = url + "/api/version"
        host = urlsplit(url).hostname or ""
        warnings.filterwarnings(  # this one anonymous read only (see the module docstring)
            "ignore", message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
            category=urllib3.exceptions.InsecureRequestWarning)
        self._pool = urllib3.PoolManager(cert_reqs="CERT_NONE", retries=False,
                                         timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S,
                                                                 read=READ_TIMEOUT_S))

    def __call__(self) -> str:
        response = self._pool.request("GET", self.url, preload_content=False, redirect=False)
        try:
            body = response.read(MAX_VERSION_BYTES + 1, decode_content=True)
        finally:
            response.release_conn()
        if response.status != 200 or len(body) > MAX_VERSION_BYTES:
            raise ValueError(f"HTTP {response.status}")
        version = mapping(loads(body)).get("Version")
        if not isinstance(version, str) or not version:
            raise ValueError("no Version in its answer")
        return version
