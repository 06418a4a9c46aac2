"""Bounded HTTP(S) GETs for Helm repositories and OCI registries.

Why not helm: a chart source is data from the network that an Application names, so
each read must be bounded before it lands in memory or on disk, and each failure must say
which of "unreachable", "too large", "unauthorised" it was. helm reads an ``index.yaml``
of any size whole and cannot tell us. Here every GET has:

* a size bound, enforced while reading (``Content-Length`` is checked first, then the
  body is read in chunks and cut at the bound), a connect and read timeout, and a
  deadline for the whole body (:data:`BODY_TIMEOUTS` timeouts);
* TLS with the system's trust store, or the repository's CA bundle and client
  certificate from its credentials;
* credentials sent only to the host that was asked (a redirect to another host, as a
  chart archive on a release page, loses the ``Authorization`` header: helm's
  ``passCredentials: false``), never in a URL, argv or message;
* redirects followed by hand (at most :data:`MAX_REDIRECTS`), each target checked
  against the allowed hosts, so a repository cannot send us to a host the settings do
  not name.

Failures are :class:`~gitops_ray.errors.SourceError` subclasses carrying a
:class:`~gitops_ray.types.SourceReason`; their messages name the URL without userinfo.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from gitops_ray.errors import SourceError
from gitops_ray.redact import redact
from gitops_ray.source.auth import Credentials
from gitops_ray.types import SourceReason

MAX_REDIRECTS = 5
CHUNK = 64 * 1024
BODY_TIMEOUTS = 4
"""A whole body must arrive within this many timeouts (each read within one)."""


class ReasonedSourceError(SourceError):
    """A source failure with its machine-readable :attr:`reason` (message starts with it)."""

    reason = SourceReason.UNREACHABLE

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.reason.value}: {message}")


class HttpUnreachable(ReasonedSourceError):
    reason = SourceReason.UNREACHABLE


class HttpTimeout(ReasonedSourceError):
    reason = SourceReason.TIMEOUT


class HttpUnauthorized(ReasonedSourceError):
    reason = SourceReason.AUTH_FAILED


class HttpNotFound(ReasonedSourceError):
    reason = SourceReason.UNREACHABLE


class TooLarge(ReasonedSourceError):
    reason = SourceReason.TOO_LARGE


class HostNotAllowed(ReasonedSourceError):
    reason = SourceReason.HOST_NOT_ALLOWED


@dataclass(frozen=True)
class Response:
    """A whole (bounded) body and what the server said about it."""

    url: str  # after redirects
    status: int
    headers: Mapping[str, str]
    body: bytes


def host_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether ``url``'s host (``host`` or ``host:port``) is one of ``allowed`` (empty: any).

    An entry ``*.example.com`` allows every subdomain of example.com.
    """
    if not allowed:
        return True
    parts = urlsplit(url if "://" in url else "//" + url)
    host = (parts.hostname or "").lower()
    hostport = f"{host}:{parts.port}" if parts.port else host
    for entry in (a.lower() for a in allowed):
        if entry in (host, hostport) or (entry.startswith("*.") and host.endswith(entry[1:])):
            return True
    return False


class Http:
    """GETs with bounds; one connection pool per TLS configuration."""

    def __init__(self, *, timeout: float = 30.0, allowed_hosts: Sequence[str] = ()) -> None:
        self.timeout = timeout
        self.allowed_hosts = tuple(allowed_hosts)
        self._pools: dict[tuple[str | None, str | None, str | None], urllib3.PoolManager] = {}
        self._guard = threading.Lock()

    def get(self, url: str, *, limit: int, credentials: Credentials | None = None,
            headers: Mapping[str, str] | None = None, what: str = "") -> Response:
        """GET ``url`` (following redirects); raises unless the answer is a 2xx."""
        response = self.request(url, limit=limit, credentials=credentials, headers=headers,
                                what=what)
        check_status(response, what or redact(url))
        return response

    def request(self, url: str, *, limit: int, credentials: Credentials | None = None,
                headers: Mapping[str, str] | None = None, what: str = "") -> Response:
        """GET ``url``; any status is returned (the OCI token dance reads a 401's headers)."""
        origin = urlsplit(url).netloc
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            self.check_host(current)
            same = urlsplit(current).netloc == origin
            given = dict(headers or {})
            sent = given if "Authorization" in given or not same else \
                {**given, **basic_auth(credentials)}
            if not same:
                sent.pop("Authorization", None)
            response = self._once(current, limit, credentials, sent, what or redact(url))
            location = response.headers.get("location")
            if response.status in (301, 302, 303, 307, 308) and location:
                current = urljoin(current, location)
                continue
            return response
        raise HttpUnreachable(f"{what or redact(url)}: more than {MAX_REDIRECTS} redirects")

    def check_host(self, url: str) -> None:
        if not host_allowed(url, self.allowed_hosts):
            raise HostNotAllowed(f"{redact(url)}: its host is not among the allowed source "
                                 "hosts (setting sources.allowedHosts)")

    def _once(self, url: str, limit: int, credentials: Credentials | None,
              headers: Mapping[str, str], what: str) -> Response:
        if urlsplit(url).scheme not in ("http", "https"):
            raise HttpUnreachable(f"{what}: only http and https URLs are fetched")
        try:
            raw = self._pool(credentials).request(
                "GET", url, headers=dict(headers), preload_content=False, redirect=False,
                retries=False, timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout))
        except NewConnectionError as e:  # a ConnectTimeoutError subclass in urllib3 2
            raise HttpUnreachable(f"cannot reach {what}: {_why(e)}") from None
        except (Urllib3Timeout, TimeoutError):
            raise HttpTimeout(f"{what} did not answer within {self.timeout:g} s") from None
        except (MaxRetryError, ProtocolError, HTTPError, OSError) as e:
            raise HttpUnreachable(f"cannot reach {what}: {_why(e)}") from None
        try:
            body = _bounded(raw, limit, what, deadline=time.monotonic() + BODY_TIMEOUTS *
                            self.timeout) if raw.status < 300 else raw.read(4096)
        except (Urllib3Timeout, TimeoutError):
            raise HttpTimeout(f"{what} did not answer within {self.timeout:g} s") from None
        except (ProtocolError, HTTPError, OSError) as e:
            raise HttpUnreachable(f"cannot read {what}: {_why(e)}") from None
        finally:
            raw.release_conn()
        return Response(url, raw.status, {k.lower(): v for k, v in raw.headers.items()}, body)

    def _pool(self, credentials: Credentials | None) -> urllib3.PoolManager:
        c = credentials or Credentials()
        key = (c.ca_file, c.cert_file, c.key_file)
        with self._guard:
            pool = self._pools.get(key)
            if pool is None:
                pool = urllib3.PoolManager(num_pools=16, maxsize=4, ca_certs=c.ca_file,
                                           cert_file=c.cert_file, key_file=c.key_file)
                self._pools[key] = pool
            return pool


def basic_auth(credentials: Credentials | None) -> dict[str, str]:
    """The ``Authorization`` header for basic auth, if there is a password."""
    if credentials is None or not credentials.password:
        return {}
    pair = f"{credentials.username}:{credentials.password}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def check_status(response: Response, what: str) -> None:
    if 200 <= response.status < 300:
        return
    if response.status in (401, 403):
        raise HttpUnauthorized(f"{what} answered {response.status}: authentication failed "
                               "(check the repository's credentials)")
    if response.status == 404:
        raise HttpNotFound(f"{what} answered 404 (not found)")
    raise HttpUnreachable(f"{what} answered HTTP {response.status}")


def _bounded(raw: urllib3.BaseHTTPResponse, limit: int, what: str, *,
             deadline: float) -> bytes:
    declared = raw.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"{what} is {int(declared):,} bytes, over the limit of {limit:,}")
    chunks, size = [], 0
    for chunk in raw.stream(CHUNK, decode_content=True):
        size += len(chunk)
        if time.monotonic() > deadline:  # a server that drips bytes, each in time
            raise HttpTimeout(f"{what} took too long to send ({size:,} bytes so far)")
        if size > limit:
            raise TooLarge(f"{what} is over the limit of {limit:,} bytes; stopped reading")
        chunks.append(chunk)
    return b"".join(chunks)


def _why(error: BaseException) -> str:
    """The innermost reason of a urllib3 error, without URLs' userinfo."""
    reason = getattr(error, "reason", None) or error
    text = str(reason)
    if "Connection refused" in text:
        return "connection refused"
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return "TLS certificate verify failed (set the repository's caFile)"
    return redact(text.split(": ", 1)[-1])[:200]
