"""Errors from the API server, one class per HTTP status that callers act on.

Callers branch on the class (``Conflict`` means re-read and retry, ``NotFound`` means
absent), never on message text. Validation errors echo the offending field's value
(``data[x]: Invalid value: "<the value>": ...``), and these messages end up in logs,
Events and status records, so :func:`without_values` cuts every echoed value and keeps
the field path and the reason. Messages are also truncated, so a response body that is
not a ``Status`` cannot end up in a log line in full.
"""

from __future__ import annotations

from typing import Any

from gitops_ray import jsonio
from gitops_ray.errors import GitOpsRayError
from gitops_ray.redact import without_values

MAX_MESSAGE = 512
# apimachinery's field errors: "<Type> value: <value>"; strings are quoted with Go's %q.


class KubeError(GitOpsRayError):
    """A request to the API server failed."""

    stage = "kube"

    def __init__(self, message: str, *, status: int = 0, reason: str = "",
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message[:MAX_MESSAGE])
        self.status = status
        self.reason = reason
        self.details = details or {}
        self.retry_after: float | None = None  # the server's Retry-After, in seconds


class Unreachable(KubeError):
    """The API server could not be reached (connection refused, TLS, timeout)."""


class BadRequest(KubeError):
    """400: the request itself is malformed."""


class Unauthorized(KubeError):
    """401: credentials missing or rejected."""


class Forbidden(KubeError):
    """403: RBAC denies the request."""


class NotFound(KubeError):
    """404: the object (or its kind) does not exist."""


class Conflict(KubeError):
    """409: stale resourceVersion, an existing object, or a field-manager conflict."""


class AlreadyExists(Conflict):
    """409 with reason ``AlreadyExists``: a create lost the race to another writer.

    Callers that only need the object to exist (a namespace for ``CreateNamespace``)
    treat it as success; everyone else handles it as the :class:`Conflict` it is.
    """


class Invalid(KubeError):
    """422: the object fails validation."""


class TooManyRequests(KubeError):
    """429: the server asks us to slow down."""


class Gone(KubeError):
    """410: a watch's resourceVersion is too old; relist."""


class ServerError(KubeError):
    """5xx."""


class LeaseExpired(KubeError):
    """Not sent: this replica may no longer hold the leader Lease (see ``kube.fence``).

    A sync that gets this must stop at once, not retry or record anything: another
    replica may already be writing a newer revision.
    """


class UnknownKind(KubeError):
    """Discovery has no resource for this apiVersion and kind (CRD not installed?)."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    410: Gone, 422: Invalid, 429: TooManyRequests,
}


def error_from_response(status: int, body: bytes, context: str) -> KubeError:
    """Build the error for a non-2xx response; ``context`` says which request failed."""
    payload: dict[str, Any] = {}
    try:
        decoded = jsonio.loads(body or b"{}")
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            payload = decoded
    except ValueError:
        pass
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else KubeError)
    if cls is Conflict and payload.get("reason") == "AlreadyExists":
        cls = AlreadyExists
    message = without_values(str(payload.get("message")
                                 or body[:200].decode("utf-8", "replace")))
    return cls(f"{context}: {message}", status=status, reason=str(payload.get("reason", "")),
               details=payload.get("details") or {})
