"""Who may press the web page's buttons: Kubernetes decides, per app, per verb.

Why no login of our own: the people who may sync an app already have Kubernetes
identities (OIDC users, ServiceAccounts) and RBAC is where a platform team grants rights.
So an action carries a **bearer token**, which the API server authenticates
(``TokenReview``, authentication.k8s.io/v1) and then authorises (``SubjectAccessReview``,
authorization.k8s.io/v1) for a **custom verb on the app's record ConfigMap**: verb
``refresh``, ``sync``, ``rollback`` or ``resume`` (:class:`Verb`) on ``configmaps``,
resourceName ``gitops-ray-app.<app>`` (:func:`~gitops_ray.sync.records.record_name`), in
the control namespace. A rollback is granted apart from a sync because it also pauses
automation; ending that pause (Resume) is its own verb too, so a Role can let on-call
engineers roll back and leave resuming to the app's owners. RBAC accepts any verb string,
so a Role grants exactly that::

    rules:
      - apiGroups: [""]
        resources: [configmaps]
        resourceNames: [gitops-ray-app.prod]
        verbs: [refresh, sync, rollback, resume]

Anonymous is never enough: a token the API server does not authenticate, or one that
authenticates as ``system:anonymous`` / group ``system:unauthenticated``, is refused with
401 before any access review. The token is read from the request, sent to the API server
in the review's body, and dropped; it is never logged, stored, or echoed.

**Audience.** The review asks for one audience (setting ``ui.tokenAudience``, default
``gitops-ray``: ``spec.audiences``), and the token must be issued for it
(``status.audiences`` holds it), so what a user pastes is a bound token good for this page
only (``kubectl create token SA --audience gitops-ray --duration 1h``), never their
full-power API token: a ServiceAccount's usual token, a Pod's, or a kubeconfig's is for the
API server's audience and is refused with 401. (The API server accepts a token for the
audience of its own ``--api-audiences`` only; OIDC tokens need an authenticator configured
with this audience.)

**Brute force.** Failed reviews (401 and 403) are counted per client address
(:class:`FailedReviews`): after :data:`FAILURES_ALLOWED` in :data:`FAILURE_WINDOW` seconds,
that client's actions get 429 without a review until the oldest failure ages out. Behind a
proxy every client has the proxy's address; the limit then holds for all of them at once.

**CSRF.** No cookie or other ambient credential exists, so a cross-site page cannot make a
browser act with someone's rights: it does not have their token. The no-JavaScript form
does carry the token in its body, so it is also held to two more checks (defence in
depth, and so another site cannot post a token of its own choosing through a victim's
browser): a same-origin check (``Sec-Fetch-Site: same-origin``, or where a browser sends
no fetch metadata, an ``Origin`` equal to the ``Host`` the page was served from), and a
per-form token (:class:`FormTokens`: an HMAC over the app and the time it was issued,
keyed by a random per-process key, valid for :data:`FORM_TTL`). A client sending
``Authorization: Bearer`` (curl, scripts) is not a browser form: it needs neither.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitops_ray.kube import Kube, KubeError
from gitops_ray.sync.records import record_name

FORM_TTL = 3600.0  # seconds a rendered form's CSRF token stays valid
FAILURES_ALLOWED = 10  # failed reviews per client ...
FAILURE_WINDOW = 60.0  # ... in this many seconds; then 429 until the oldest ages out
CLIENTS_TRACKED = 4096  # clients whose failures are remembered (the oldest forgotten first)
ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"


class Verb(StrEnum):
    """The custom RBAC verbs of the actions, on ``configmaps/gitops-ray-app.<app>``."""

    REFRESH = "refresh"  # compare the app with git now
    SYNC = "sync"  # sync it now (as Argo CD's Sync button)
    ROLLBACK = "rollback"  # sync a history entry's revision, pausing automation first
    RESUME = "resume"  # end a rollback's pause of automated sync


APP_VERBS = (Verb.REFRESH, Verb.SYNC)
"""The verbs with a button of their own at the top of the app page (the others are on a
history entry, or shown while the app is paused)."""


@dataclass(frozen=True)
class Caller:
    """Who the API server says a token belongs to (the token itself is not kept)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


class Denied(Exception):
    """An action refused; ``message`` is safe to show (it never quotes the token)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class FailedReviews:
    """Failed reviews per client in a sliding window (bounded: :data:`CLIENTS_TRACKED`)."""

    def __init__(self, *, allowed: int = FAILURES_ALLOWED, window: float = FAILURE_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.allowed, self.window, self._clock = allowed, window, clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, client: str) -> None:
        """:class:`Denied` (429) while ``client`` has used up its failures."""
        now = self._clock()
        with self._lock:
            times = self._failures.get(client)
            while times and now - times[0] >= self.window:
                times.popleft()
            if times is not None and len(times) >= self.allowed:
                wait = max(1, int(self.window - (now - times[0])) + 1)
                raise Denied(429, f"Too many refused attempts from this address; "
                                  f"retry in {wait} s.")

    def record(self, client: str) -> None:
        with self._lock:
            times = self._failures.pop(client, None) or deque(maxlen=self.allowed)
            times.append(self._clock())
            self._failures[client] = times  # the most recent last
            while len(self._failures) > CLIENTS_TRACKED:
                self._failures.popitem(last=False)


class Reviewer:
    """Asks the API server who a token is and whether they may use a verb on an app."""

    def __init__(self, kube: Kube, namespace: str, *, audience: str,
                 failures: FailedReviews | None = None) -> None:
        self.kube, self.namespace, self.audience = kube, namespace, audience
        self.failures = failures or FailedReviews()

    def authorize(self, token: str, app: str, verb: Verb, *, client: str = "") -> Caller:
        """The caller behind ``token`` if they may ``verb`` the app; else :class:`Denied`.

        A refused review counts against ``client`` (:class:`FailedReviews`).
        """
        self.failures.check(client)
        if not token:
            raise Denied(401, "a bearer token is required")
        try:
            caller = self.authenticate(token)
            self.check(caller, app, verb)
        except Denied as denied:
            if denied.status in (401, 403):
                self.failures.record(client)
            raise
        return caller

    def authenticate(self, token: str) -> Caller:
        try:
            status = self.kube.token_review(token, [self.audience])
        except KubeError as e:
            raise Denied(503, f"cannot review the token: {type(e).__name__}") from None
        user = status.get("user") or {}
        caller = Caller(str(user.get("username") or ""), str(user.get("uid") or ""),
                        tuple(str(g) for g in user.get("groups") or ()),
                        dict(user.get("extra") or {}))
        if not status.get("authenticated") or not caller.username or _anonymous(caller):
            raise Denied(401, f"the token was not accepted (it must be issued for the "
                              f"audience {self.audience!r})")
        if self.audience not in (status.get("audiences") or ()):
            raise Denied(401, f"the token is not for the audience {self.audience!r}")
        return caller

    def check(self, caller: Caller, app: str, verb: Verb) -> None:
        name = record_name(app)
        spec = {"user": caller.username, "uid": caller.uid, "groups": list(caller.groups),
                "extra": dict(caller.extra),
                "resourceAttributes": {"namespace": self.namespace, "verb": verb.value,
                                       "group": "", "resource": "configmaps", "name": name}}
        try:
            status = self.kube.access_review(spec)
        except KubeError as e:
            raise Denied(503, f"cannot review the access: {type(e).__name__}") from None
        if not status.get("allowed") or status.get("denied"):
            raise Denied(403, f"{caller.username} may not {verb.value} configmaps/{name} "
                              f"in namespace {self.namespace}")


def _anonymous(caller: Caller) -> bool:
    return caller.username == ANONYMOUS_USER or UNAUTHENTICATED_GROUP in caller.groups


class FormTokens:
    """Per-form CSRF tokens: ``<issued>.<hmac(app, issued)>``, no server-side state."""

    def __init__(self, *, key: bytes | None = None, ttl: float = FORM_TTL) -> None:
        self._key = key or secrets.token_bytes(32)
        self._ttl = ttl

    def issue(self, app: str, *, now: float) -> str:
        issued = str(int(now))
        return f"{issued}.{self._mac(app, issued)}"

    def valid(self, token: str, app: str, *, now: float) -> bool:
        issued, _, mac = token.partition(".")
        if not (issued.isascii() and issued.isdigit() and len(issued) <= 12):
            return False
        fresh = 0 <= now - int(issued) <= self._ttl
        return fresh and hmac.compare_digest(mac, self._mac(app, issued))

    def _mac(self, app: str, issued: str) -> str:
        message = f"{app}\0{issued}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a browser says the request comes from a page of this server (see module doc)."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin, host = headers.get("origin", ""), headers.get("host", "")
    return bool(origin and host) and origin.split("://", 1)[-1] == host


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header; ``None`` when there is none."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None
