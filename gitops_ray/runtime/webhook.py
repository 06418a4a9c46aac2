"""Git push webhooks (GitHub, GitLab): authenticate, parse, and say which apps they touch.

Why: polling every 3 minutes is the safety net, not the feedback loop. A push webhook
turns "commit, wait, wonder" into "commit, see it applied in a second or two". A
webhook only ever *triggers a refresh* (which re-resolves the revision through git), so
a payload can never make us deploy something git does not say; authentication still
matters because every accepted delivery costs git and API traffic.

* GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``, checked in
  constant time. The SHA-1 signature GitHub also sends is ignored.
* GitLab: ``X-Gitlab-Token`` must equal the secret (constant-time comparison).

Nothing is read or parsed before the headers say the delivery can be genuine
(:func:`admit`, run by the HTTP layer before the body is read): a GitHub delivery must
carry a well-formed signature header, a GitLab delivery the right token. Only then is the
body read (bounded, see :mod:`gitops_ray.runtime.server`), its HMAC checked, its JSON
nesting depth checked (:func:`nesting_depth`, so a deeply nested body is a 400, not a
``RecursionError``), and only then is it decoded.

Which apps a push touches follows Argo CD (``util/webhook``): same repository after URL
normalisation (scheme, credentials, port, ``.git`` and case ignored; scp-like SSH URLs
understood) and the app's ``targetRevision`` names the pushed branch or tag, or is
``HEAD`` and the push went to the default branch.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any
from urllib.parse import urlsplit

MAX_DEPTH = 32  # JSON nesting a push payload may have (GitHub's and GitLab's are < 10)
_SIGNATURE = re.compile(r"^sha256=[0-9a-fA-F]{64}$")
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256 object names
_NONE = re.compile(r"^0+$")  # a created branch's "before", a deleted one's "after"
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # signed: +1 / -1
_SCP = re.compile(r"^(?:[\w.\-]+@)?([\w.\-]+):(?!//)(.+)$")
_REF_PREFIXES = ("refs/heads/", "refs/tags/")
_GITHUB_URL_KEYS = ("html_url", "clone_url", "ssh_url", "git_url", "url", "svn_url")
_GITLAB_URL_KEYS = ("web_url", "git_http_url", "git_ssh_url", "http_url", "ssh_url", "url",
                    "homepage")


class WebhookRejected(Exception):
    """The delivery is refused; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Push:
    """A push event, reduced to what matching needs."""

    provider: str
    repos: frozenset[str]  # normalised repository URLs
    revision: str  # branch or tag name
    default_branch: str
    sha: str = ""
    changed: frozenset[str] = frozenset()  # files the pushed commits touched, when listed
    before: str = ""  # a branch's commit before the push ("": not a branch push)

    @property
    def moved(self) -> tuple[str, str] | None:
        """``(before, after)`` commits of a branch push that moved it (not created, deleted).

        What the revision cache may take from the push instead of asking git again
        (:meth:`gitops_ray.runtime.revisions.Revisions.pushed`).
        """
        if not (_COMMIT.match(self.before) and _COMMIT.match(self.sha)) \
                or _NONE.match(self.before) or _NONE.match(self.sha):
            return None
        return self.before, self.sha

    def matches(self, repo_url: str, target_revision: str) -> bool:
        """Whether an app on ``repo_url`` at ``target_revision`` should refresh."""
        if normalize_repo_url(repo_url) not in self.repos:
            return False
        target = strip_ref(target_revision)
        if target in ("", "HEAD"):
            return bool(self.default_branch) and self.revision == self.default_branch
        return target == self.revision


    def touches(self, path: str) -> bool:
        """Whether the push changed a file under ``path`` (an app's ``source.path``)."""
        prefix = path.strip().strip("/")
        if prefix in ("", "."):
            return bool(self.changed)
        return any(f == prefix or f.startswith(prefix + "/") for f in self.changed)

    def refresh_order(self, paths: Mapping[str, str]) -> list[tuple[str, bool]]:
        """``(app, urgent)`` for apps by ``source.path``: those the push touched first.

        Submitted in this order: an idle worker starts a normal refresh at once, so one
        submitted before the urgent ones would share the CPU with them (measured: the
        app a commit changed compared after the nine it did not).
        """
        touched = {name: self.touches(path) for name, path in paths.items()}
        return sorted(touched.items(), key=lambda item: (not item[1], item[0]))


def normalize_repo_url(url: str) -> str:
    """``host/path`` without scheme, credentials, port, trailing ``/`` or ``.git``."""
    text = url.strip()
    scp = _SCP.match(text)
    if scp and "://" not in text:
        host, path = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(text)
        host, path = (parts.hostname or ""), parts.path
    path = path.strip("/")
    path = path.removesuffix(".git")
    return f"{host}/{path}".strip("/").lower()


def strip_ref(ref: str) -> str:
    for prefix in _REF_PREFIXES:
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def provider_of(headers: Mapping[str, str]) -> str:
    """``github`` or ``gitlab`` from the event header; ``""`` when neither."""
    if "x-github-event" in headers:
        return "github"
    if "x-gitlab-event" in headers:
        return "gitlab"
    return ""


def admit(provider: str, headers: Mapping[str, str], secret: str) -> None:
    """Raise :class:`WebhookRejected` unless the headers alone allow a genuine delivery.

    Runs before the body is read: a GitLab token is checked completely here, a GitHub
    signature must at least be present and well-formed (its HMAC needs the body).
    """
    if not secret:
        raise WebhookRejected(401, "no webhook secret is configured")
    if provider == "github":
        if not _SIGNATURE.match(headers.get("x-hub-signature-256", "")):
            raise WebhookRejected(401, "the delivery is not signed")
        return
    if provider != "gitlab":
        raise WebhookRejected(400, "not a GitHub or GitLab delivery")
    authenticate(provider, headers, b"", secret)


def authenticate(provider: str, headers: Mapping[str, str], body: bytes | memoryview,
                 secret: str) -> None:
    """Raise :class:`WebhookRejected` (401) unless the delivery carries the secret."""
    if not secret:
        raise WebhookRejected(401, "no webhook secret is configured")
    if provider == "github":
        given = headers.get("x-hub-signature-256", "")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    elif provider == "gitlab":
        given, expected = headers.get("x-gitlab-token", ""), secret
    else:
        raise WebhookRejected(400, "not a GitHub or GitLab delivery")
    if not given:
        raise WebhookRejected(401, "the delivery is not signed")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise WebhookRejected(401, "the signature does not match")


def parse_push(provider: str, headers: Mapping[str, str], body: bytes | memoryview
               ) -> Push | None:
    """The push in an authenticated delivery; ``None`` for other events (ping, issues)."""
    event = headers.get("x-github-event" if provider == "github" else "x-gitlab-event", "")
    if event not in ("push", "Push Hook", "Tag Push Hook"):
        return None
    if nesting_depth(body) > MAX_DEPTH:
        raise WebhookRejected(400, f"the payload nests deeper than {MAX_DEPTH} levels")
    try:
        payload = json.loads(bytes(body))
    except (ValueError, RecursionError) as e:
        raise WebhookRejected(400, "the payload is not JSON") from e
    if not isinstance(payload, dict) or not isinstance(payload.get("ref"), str):
        raise WebhookRejected(400, "the push payload has no ref")
    return _github_push(payload) if provider == "github" else _gitlab_push(payload)


def nesting_depth(body: bytes | memoryview) -> int:
    """How deeply arrays and objects nest in a JSON text, without decoding it.

    Strings are cut out (a bracket inside one does not count), every other byte but the
    brackets is dropped (both at C speed), and the deepest running count of open minus
    closed brackets is the depth. Linear in the size; never recursive.
    """
    steps = array("b", _STRING.sub(b"", body).translate(_DEPTH_STEPS, _NOT_BRACKETS))
    return max(accumulate(steps), default=0)


def _github_push(payload: dict[str, Any]) -> Push:
    repo = _dict(payload.get("repository"))
    return Push("github", _urls(repo, _GITHUB_URL_KEYS), strip_ref(payload["ref"]),
                str(repo.get("default_branch") or repo.get("master_branch") or ""),
                str(payload.get("after") or ""), _changed(payload), _before(payload))


def _gitlab_push(payload: dict[str, Any]) -> Push:
    project, repo = _dict(payload.get("project")), _dict(payload.get("repository"))
    urls = _urls(project, _GITLAB_URL_KEYS) | _urls(repo, _GITLAB_URL_KEYS)
    return Push("gitlab", urls, strip_ref(payload["ref"]),
                str(project.get("default_branch") or ""),
                str(payload.get("checkout_sha") or payload.get("after") or ""),
                _changed(payload), _before(payload))


def _before(payload: dict[str, Any]) -> str:
    """A branch push's previous commit (a tag's "after" may name a tag object: none)."""
    branch = str(payload.get("ref") or "").startswith("refs/heads/")
    return str(payload.get("before") or "") if branch else ""


def _changed(payload: dict[str, Any]) -> frozenset[str]:
    """Files added, modified or removed by the pushed commits (both providers list them)."""
    commits = payload.get("commits")
    files: set[str] = set()
    for commit in commits if isinstance(commits, list) else []:
        for key in ("added", "modified", "removed"):
            names = commit.get(key) if isinstance(commit, dict) else None
            files.update(f.strip("/") for f in names or [] if isinstance(f, str))
    return frozenset(files)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _urls(doc: Mapping[str, Any], keys: Iterable[str]) -> frozenset[str]:
    return frozenset(normalize_repo_url(v) for k in keys
                     if isinstance(v := doc.get(k), str) and v)
