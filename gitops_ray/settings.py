"""Controller settings: one model, three layers (file < environment < flags), validated once.

Why one module owns all of it: a controller that reads some knobs from flags, some from
the environment and some from a file, each with its own parsing, is how typos become
silent defaults. Here every setting has one dotted name (its path in the YAML file), one
``GITOPS_RAY_*`` variable and at most one flag, all listed in :data:`OPTIONS`; the CLI
builds its flags from that table. Unknown keys, bad durations and impossible
combinations are :class:`~gitops_ray.errors.ConfigError` at start-up, naming the key.
The same table, with the JSON Schema of each converter, generates the schema the Helm
chart validates ``values.config`` with (:mod:`gitops_ray.schema`), so a typo
fails ``helm install`` rather than the pod.

Why here, below :mod:`gitops_ray.runtime`: the one-shot commands share these options
(``--control-namespace``, durations, ``sync.parallelism``), and a ``gitops-ray sync``
should not import the long-running controller to read them (import-linter checks that
this module imports neither the runtime nor the CLI).

Secrets (the webhook secret, repository credentials) are only ever held as
:class:`Secret`, whose ``repr`` is masked, so printing the settings cannot leak them.

The file looks like this (every key optional; durations as ``90``, ``90s``, ``3m``, ``200ms``)::

    controlNamespace: gitops-ray
    interval: 2m            # poll every app (0 disables polling) ...
    jitter: 1m              # ... plus up to this much, like Argo CD (120 s + 60 s)
    appSources:             # app-of-apps directories of Argo CD Applications
      - {repo: https://github.com/org/config.git, revision: main, path: apps}
    applications: []        # inline Argo CD Application manifests
    credentials:            # matched by URL prefix (on a path boundary), longest first
      - {url: https://github.com/org/, username: x-access-token, passwordFile: /creds/token}
      - {url: git@github.com:org/, sshKeyFile: /creds/id_ed25519}
      - {url: https://gitlab.example.com/, secret: gitlab-creds}   # Secret in controlNamespace
    webhook: {secretFile: /etc/gitops-ray/webhook-secret,
              advertiseUrl: "http://10.0.0.7:9292/webhook"}  # followers forward to the leader
    listen: {metrics: ":8080", health: ":8081", webhook: ":9292", ui: ""}  # ui: metrics'
    ui: {enabled: true, actions: false}   # the web page; actions: refresh/sync/... by token
    leaderElection: {enabled: true, leaseName: gitops-ray, leaseDuration: 15s,
                     renewDeadline: 10s, retryPeriod: 2s}
    sharding: {enabled: false, shards: 16}   # several replicas split the apps (Leases)
    selfHeal: {backoff: {initial: 2s, factor: 3, cap: 5m}}
    retry: {limit: 5, backoff: {initial: 5s, factor: 2, cap: 3m}}
    log: {format: auto, level: info}
    podShapes:              # in-cluster pod shapes: ConfigMaps in controlNamespace
      instanceTypesConfigMap: gitops-ray-instance-types   # data.instance_types.yaml
      patchesConfigMap: gitops-ray-patches                # data.patches.yaml
"""

from __future__ import annotations

import difflib
import os
import re
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitops_ray import childproc, limits
from gitops_ray.errors import ConfigError, LimitExceeded
from gitops_ray.kube.leader import LeaseSettings
from gitops_ray.limits import MAX_FILE_BYTES
from gitops_ray.quantity import parse_quantity
from gitops_ray.reconcile.autosync import (
    RETRY_BACKOFF,
    RETRY_LIMIT,
    SELF_HEAL_BACKOFF,
    AutoSyncSettings,
    Backoff,
)
from gitops_ray.redact import redact
from gitops_ray.render.bounds import check_yaml
from gitops_ray.render.tools import HELM_BIN
from gitops_ray.source.auth import host_scope
from gitops_ray.types import Manifest

MAX_SHARDS = 1024  # one Lease each, renewed by its owner every retryPeriod (runtime.shards)

ENV_PREFIX = "GITOPS_RAY_"
DEFAULT_CACHE = Path.home() / ".cache" / "gitops-ray" / "repos"
LOG_FORMATS = ("auto", "json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_HOST_PATTERN = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$")
_APP_SOURCE_FIELDS = ("repo", "revision", "path")
_HOST = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$")
_CREDENTIAL_FIELDS = ("url", "username", "password", "passwordFile", "tokenFile", "sshKeyFile",
                      "knownHostsFile", "secret", "caFile", "certFile", "keyFile")


def _fields(names: tuple[str, ...], required: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": [required],
            "properties": {n: {"type": "string", **({"minLength": 1} if n == required else {})}
                           for n in names}}


LIST_ITEMS: dict[str, dict[str, Any]] = {
    "appSources": _fields(_APP_SOURCE_FIELDS, "repo"),
    "applications": {"type": "object", "required": ["kind"],
                     "properties": {"kind": {"const": "Application"}}},
    "credentials": _fields(_CREDENTIAL_FIELDS, "url"),
}
"""The list-valued settings (file only) and the JSON Schema of one item of each."""
_LIST_KEYS = tuple(LIST_ITEMS)


class Secret:
    """A secret value that never shows up in ``repr``/``str`` (so never in a log line)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# -- scalar converters ---------------------------------------------------------------------

def parse_duration(value: object) -> float:
    """Seconds from ``90``, ``1.5``, ``"90s"``, ``"3m"``, ``"200ms"`` or ``"1h"``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 90s, 3m or 200ms")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"expected a duration like 90s, 3m or 200ms, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _positive_int(value: object) -> int:
    number = int(str(value))
    if number < 1:
        raise ValueError("must be at least 1")
    return number


MAX_SYNC_PARALLELISM = 64
"""Applies in flight for one app at most: each is a thread and a pooled connection."""


def _parallelism(value: object) -> int:
    number = _positive_int(value)
    if number > MAX_SYNC_PARALLELISM:
        raise ValueError(f"must be at most {MAX_SYNC_PARALLELISM}")
    return number


def _count(value: object) -> int:
    number = int(str(value))
    if number < 0:
        raise ValueError("cannot be negative")
    return number


def _shard_count(value: object) -> int:
    number = int(str(value))
    if not 1 <= number <= MAX_SHARDS:
        raise ValueError(f"must be between 1 and {MAX_SHARDS}")
    return number


def _factor(value: object) -> float:
    number = float(str(value))
    if number < 1:
        raise ValueError("a backoff factor must be >= 1")
    return number


def _choice(*allowed: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text
    _SCHEMAS[convert] = {"enum": list(allowed)}
    return convert


def _address(value: object) -> str:
    text = str(value).strip()
    if text and not re.match(r"^[\w.\-\[\]:]*:\d{1,5}$", text):
        raise ValueError(f"expected host:port or :port (empty disables), got {text!r}")
    return text


def _url(value: object) -> str:
    text = str(value or "").strip()
    if text and not re.match(r"^https?://[^/\s]+(/\S*)?$", text):
        raise ValueError(f"expected an http(s) URL, got {text!r}")
    return text


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _audience(value: object) -> str:
    """A token audience: one word, never empty (an empty one would accept any API token)."""
    text = _str(value).strip()
    if not re.match(r"^\S{1,253}$", text):
        raise ValueError(f"expected one audience (no spaces, not empty), got {text!r}")
    return text


def _memory(value: object) -> int:
    """``auto`` (or empty): derived from the container's limit; 0: none; else a quantity."""
    text = _str(value).strip()
    if text.lower() in ("", "auto"):
        return childproc.AUTO
    amount = parse_quantity(text)
    if amount < 0:
        raise ValueError("cannot be negative")
    return int(amount)


def _hosts(value: object) -> tuple[str, ...]:
    """A comma-separated list of host names (``host`` or ``host:port``), lower-cased."""
    items = value if isinstance(value, list | tuple) else _str(value).split(",")
    hosts = tuple(dict.fromkeys(str(h).strip().lower() for h in items if str(h).strip()))
    for host in hosts:
        if not _HOST.match(host):
            raise ValueError(f"{host!r} is not a host name (host or host:port, no scheme)")
    return hosts


def _namespaces(value: object) -> tuple[str, ...]:
    """A comma-separated list of namespace names (Argo CD's ``application.namespaces``)."""
    items = value if isinstance(value, list | tuple) else _str(value).split(",")
    names = tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))
    for name in names:
        if not _DNS_LABEL.match(name):
            raise ValueError(f"{name!r} is not a valid namespace name")
    return names


def _host_patterns(value: object) -> tuple[str, ...]:
    """A comma-separated list of host names (``host``, ``host:port`` or ``*.domain``)."""
    items = value if isinstance(value, list | tuple) else _str(value).split(",")
    hosts = tuple(dict.fromkeys(str(h).strip().lower() for h in items if str(h).strip()))
    for host in hosts:
        if not _HOST_PATTERN.match(host):
            raise ValueError(f"{host!r} is not a host name (host, host:port or *.domain)")
    return hosts


def _bytes(value: object) -> int:
    """A size in bytes, or with a unit: ``512Ki``, ``32Mi``, ``1Gi``."""
    text = _str(value).strip()
    m = re.match(r"^(\d+)\s*(Ki|Mi|Gi)?$", text)
    if m is None or int(m.group(1)) <= 0:
        raise ValueError(f"expected a positive size (bytes, or with Ki/Mi/Gi), got {text!r}")
    return int(m.group(1)) * {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}.get(
        m.group(2) or "", 1)


def _configmap_name(value: object) -> str:
    text = _str(value).strip()
    if text and not _DNS_SUBDOMAIN.match(text):
        raise ValueError(f"expected a ConfigMap name (empty: none), got {text!r}")
    return text


# What each converter accepts, as JSON Schema (draft-07), for validators that run before
# the controller does, e.g. the Helm chart's values.schema.json
# (:mod:`gitops_ray.schema`). A new converter needs an entry here: the schema
# module refuses to guess.
_SCHEMAS: dict[Callable[[object], Any], dict[str, Any]] = {
    parse_duration: {"type": ["number", "string"], "minimum": 0,
                     "pattern": _DURATION.pattern},
    _bool: {"type": "boolean"},
    _positive_int: {"type": "integer", "minimum": 1},
    _count: {"type": "integer", "minimum": 0},
    _shard_count: {"type": "integer", "minimum": 1, "maximum": MAX_SHARDS},
    _parallelism: {"type": "integer", "minimum": 1, "maximum": MAX_SYNC_PARALLELISM},
    _factor: {"type": "number", "minimum": 1},
    _address: {"type": "string", "pattern": r"^([\w.\-\[\]:]*:\d{1,5})?$"},
    _url: {"type": "string", "pattern": r"^(https?://[^/\s]+(/\S*)?)?$"},
    _str: {"type": "string"},
    _audience: {"type": "string", "pattern": r"^\S{1,253}$"},
    _memory: {"type": ["integer", "string"], "minimum": 0,
              "pattern": r"^(auto|[0-9]+(\.[0-9]+)?([EPTGMk]i?|[mun])?)?$"},
    _hosts: {"type": "string", "pattern": r"^[a-z0-9,.:\s-]*$"},
    _namespaces: {"type": "string", "pattern": r"^[a-z0-9,\s-]*$"},
    _host_patterns: {"type": "string", "pattern": r"^[a-z0-9*.:,\s-]*$"},
    _bytes: {"type": ["integer", "string"], "minimum": 1, "pattern": r"^\d+\s*(Ki|Mi|Gi)?$"},
    _configmap_name: {"type": "string", "maxLength": 253,
                      "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$"},
}


@dataclass(frozen=True)
class Option:
    """One overridable setting: its file key, environment variable and flag."""

    key: str
    convert: Callable[[object], Any]
    default: Any
    help: str
    flag: str | None = ""  # "" = derived from the key; None = environment/file only

    @property
    def env(self) -> str:
        """``GITOPS_RAY_`` + the flag's name (``--metrics-addr`` -> ``METRICS_ADDR``)."""
        flag = self.flag_name
        name = flag.split("/")[0][2:] if flag else re.sub(r"(?<!^)(?=[A-Z])|\.", "_", self.key)
        return ENV_PREFIX + name.replace("-", "_").upper()

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the values this option's converter accepts."""
        if self.convert not in _SCHEMAS:
            raise KeyError(f"{self.key}: its converter has no JSON Schema in _SCHEMAS")
        return {**_SCHEMAS[self.convert], "description": self.help}

    @property
    def flag_name(self) -> str | None:
        if self.flag is None:
            return None
        return self.flag or "--" + re.sub(r"(?<!^)(?=[A-Z])", "-", self.key.split(".")[-1]
                                          ).lower()


OPTIONS: tuple[Option, ...] = (
    Option("controlNamespace", _str, "gitops-ray",
           "Namespace of the per-app records and the lease."),
    Option("kubeconfig", _str, "", "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
           "or in-cluster)."),
    Option("context", _str, "", "Kubeconfig context."),
    Option("interval", parse_duration, 120.0, "Poll interval per app; 0 disables polling."),
    Option("jitter", parse_duration, 60.0, "Random extra delay added to each poll."),
    Option("workers", _positive_int, 8, "Apps refreshed in parallel."),
    Option("sync.parallelism", _parallelism, 8,
           "Objects of one app applied at the same time (within a sync wave and kind group).",
           flag="--sync-parallelism"),
    Option("debounce", parse_duration, 0.2, "Coalesce watch events of an app this long."),
    Option("cacheDir", _str, str(DEFAULT_CACHE), "Where git mirrors are kept."),
    Option("helm", _str, HELM_BIN, "helm v3 binary."),
    Option("render.valueFileHosts", _hosts, "", "Hosts a Helm valueFiles URL may name "
           "(comma-separated host or host:port); empty: valueFiles URLs are refused."),
    Option("childMemoryLimit", _memory, "auto", "Memory each child process (helm, kubectl "
           "kustomize, git, jq) may allocate: auto (half the container's limit), 0 (none) "
           "or a quantity such as 256Mi."),
    Option("repo", _str, "", "Config repository URL (of an app-of-apps source)."),
    Option("revision", _str, "HEAD", "Revision of --repo."),
    Option("apps", _str, "", "Directory of Argo CD Applications in --repo."),
    Option("webhook.secret", _str, "", "Webhook secret (environment only).", flag=None),
    Option("webhook.secretFile", _str, "", "File holding the webhook secret.",
           flag="--webhook-secret-file"),
    Option("webhook.advertiseUrl", _url, "", "URL other replicas forward webhooks to while "
           "this one leads, e.g. http://$(POD_IP):9292/webhook.",
           flag="--webhook-advertise-url"),
    Option("listen.metrics", _address, ":8080", "Address of /metrics (empty disables).",
           flag="--metrics-addr"),
    Option("listen.health", _address, ":8081", "Address of /healthz and /readyz.",
           flag="--health-addr"),
    Option("listen.webhook", _address, ":9292", "Address of the git webhook (POST /webhook).",
           flag="--webhook-addr"),
    Option("listen.ui", _address, "", "Address of the read-only web page (/ and /apps/<name>); "
           "empty: the metrics address.", flag="--ui-addr"),
    Option("ui.enabled", _bool, True, "Serve the read-only web page.",
           flag="--ui/--no-ui"),
    Option("ui.actions", _bool, False, "Offer refresh, sync, rollback and resume on the web "
           "page, to a bearer token Kubernetes authenticates (TokenReview) and authorises "
           "for the verb on the app's record ConfigMap (SubjectAccessReview).",
           flag="--ui-actions/--no-ui-actions"),
    Option("ui.tokenAudience", _audience, "gitops-ray", "The audience an action's bearer "
           "token must be issued for (TokenReview spec.audiences), e.g. `kubectl create "
           "token SA --audience gitops-ray`; tokens for other audiences, such as a Pod's "
           "API token, are refused.", flag="--ui-token-audience"),
    Option("leaderElection.enabled", _bool, True, "Elect a leader (only it writes).",
           flag="--leader-elect/--no-leader-elect"),
    Option("leaderElection.leaseName", _str, "gitops-ray", "Lease name.",
           flag="--leader-election-lease"),
    Option("leaderElection.namespace", _str, "", "Lease namespace (default: control ns).",
           flag="--leader-election-namespace"),
    Option("leaderElection.identity", _str, "", "Holder identity (default: hostname_random).",
           flag="--leader-election-identity"),
    Option("leaderElection.leaseDuration", parse_duration, LeaseSettings.lease_duration,
           "Lease duration.",
           flag="--leader-election-lease-duration"),
    Option("leaderElection.renewDeadline", parse_duration, LeaseSettings.renew_deadline,
           "Renew deadline.",
           flag="--leader-election-renew-deadline"),
    Option("leaderElection.retryPeriod", parse_duration, LeaseSettings.retry_period,
           "Retry period.",
           flag="--leader-election-retry-period"),
    Option("sharding.enabled", _bool, False, "Split the apps between the replicas by shard "
           "Leases (docs/operations.md: Sharding); replaces the single leader Lease, uses the "
           "leaderElection.* name, namespace, identity and timings.",
           flag="--sharding/--no-sharding"),
    Option("sharding.shards", _shard_count, 16, "Number of shards (one Lease each); the "
           "same on every replica.", flag="--shards"),
    Option("selfHeal.backoff.initial", parse_duration, SELF_HEAL_BACKOFF.initial,
           "First self-heal backoff step.",
           flag="--self-heal-backoff"),
    Option("selfHeal.backoff.factor", _factor, SELF_HEAL_BACKOFF.factor,
           "Self-heal backoff factor.",
           flag="--self-heal-backoff-factor"),
    Option("selfHeal.backoff.cap", parse_duration, SELF_HEAL_BACKOFF.cap,
           "Self-heal backoff cap.",
           flag="--self-heal-backoff-cap"),
    Option("retry.limit", _count, RETRY_LIMIT, "Retries of a failed automated sync.",
           flag="--retry-limit"),
    Option("retry.backoff.initial", parse_duration, RETRY_BACKOFF.initial,
           "First retry backoff step.",
           flag="--retry-backoff"),
    Option("retry.backoff.factor", _factor, RETRY_BACKOFF.factor, "Retry backoff factor.",
           flag="--retry-backoff-factor"),
    Option("retry.backoff.cap", parse_duration, RETRY_BACKOFF.cap, "Retry backoff cap.",
           flag="--retry-backoff-cap"),
    Option("log.format", _choice(*LOG_FORMATS), "auto",
           "Log format (auto: console on a terminal, JSON otherwise).", flag="--log-format"),
    Option("log.level", _choice(*LOG_LEVELS), "info", "Log level.",
           flag="--log-level"),
    Option("shutdownTimeout", parse_duration, 30.0, "Wait this long for running syncs on "
                                                    "SIGTERM."),
    Option("podShapes.instanceTypesConfigMap", _configmap_name, "",
           "ConfigMap in the control namespace with instance types (data key "
           "instance_types.yaml) for pod shapes; the repo's .gitops-ray/ files override it. "
           "Empty: none.", flag="--instance-types-configmap"),
    Option("podShapes.patchesConfigMap", _configmap_name, "",
           "ConfigMap in the control namespace with pod-shape patches (data key "
           "patches.yaml), applied before the repo's. Empty: none.",
           flag="--patches-configmap"),
    Option("sources.allowedHosts", _host_patterns, "",
           "The only hosts git, Helm repositories and OCI registries are fetched from "
           "(comma-separated host, host:port or *.domain; empty: any). A chart archive or "
           "redirect on another host fails its app.", flag="--allowed-source-hosts"),
    Option("sources.timeout", parse_duration, 30.0, "Timeout of one HTTP request to a Helm "
           "repository or OCI registry.", flag="--source-timeout"),
    Option("sources.maxIndexSize", _bytes, limits.MAX_CHART_INDEX_BYTES,
           "Largest Helm repository index.yaml read (bytes, or 16Mi).", flag="--max-index-size"),
    Option("sources.maxChartSize", _bytes, limits.MAX_CHART_BYTES,
           "Largest chart archive fetched (bytes, or 4Mi).", flag="--max-chart-size"),
    Option("argocd.enabled", _bool, False,
           "Reconcile the Argo CD Applications in the cluster that opt in (annotations "
           "gitops-ray.io/managed and argocd.argoproj.io/skip-reconcile, both \"true\") and "
           "write Argo CD's status back to them.", flag="--argocd/--no-argocd"),
    Option("argocd.namespace", _str, "argocd",
           "Argo CD's namespace: its Applications, AppProjects and argocd-cm are read there.",
           flag="--argocd-namespace"),
    Option("argocd.applicationNamespaces", _namespaces, "",
           "More namespaces whose Applications are reconciled (comma-separated; Argo CD's "
           "\"applications in any namespace\"; their AppProject must allow them in "
           "sourceNamespaces).", flag="--argocd-application-namespaces"),
    Option("argocd.views", _bool, True,
           "Publish each handed-over app's resource tree and managed resources into Argo "
           "CD's Redis, where argocd-server reads them for the UI's tree and diff and for "
           "argocd app resources/diff/manifests (docs/argocd.md).",
           flag="--argocd-views/--no-argocd-views"),
    Option("argocd.redis", _address, "",
           "Argo CD's Redis as host:port (default: argocd-redis.<argocd.namespace>.svc:6379); "
           "its password is the key auth of the Secret argocd-redis there.",
           flag="--argocd-redis"),
    Option("argocd.redisCompression", _choice("gzip", "none"), "gzip",
           "Argo CD's Redis compression (its --redis-compress; gzip is Argo CD's default).",
           flag="--argocd-redis-compress"),
    Option("argocd.server", _url, "",
           "argocd-server's URL, whose /api/version says which cache format to write "
           "(default: https://argocd-server.<argocd.namespace>.svc).", flag="--argocd-server"),
    Option("argocd.version", _str, "",
           "Argo CD's version, for a build whose argocd-server does not report a release's "
           "(e.g. v99.99.99+unknown from source); empty: ask argocd-server.",
           flag="--argocd-version"),
)
_BY_KEY = {o.key: o for o in OPTIONS}


def option(key: str) -> Option:
    """The setting ``key`` (its flag, default and help are shared with the one-shot CLI)."""
    return _BY_KEY[key]


# -- the model -----------------------------------------------------------------------------

@dataclass(frozen=True)
class AppSourceSpec:
    """An app-of-apps directory: every Argo CD Application in ``path`` of ``repo``."""

    repo: str
    revision: str = "HEAD"
    path: str = "."


@dataclass(frozen=True)
class RepoCredential:
    """Credentials for repositories whose URL starts with ``url``.

    Files are read when git needs them (so a rotated token is picked up); inline
    ``password`` is for tests and environments without files.
    """

    url: str
    username: str = ""
    password: Secret = field(default_factory=lambda: Secret(""))
    password_file: str = ""
    ssh_key_file: str = ""
    known_hosts_file: str = ""
    secret: str = ""  # Secret name in controlNamespace (keys username/password/sshPrivateKey)
    ca_file: str = ""  # Helm repositories and registries over TLS: the CA bundle to trust
    cert_file: str = ""  # TLS client certificate and key (PEM files)
    key_file: str = ""


@dataclass(frozen=True)
class Listen:
    """Where the HTTP endpoints listen (empty disables; equal addresses share a server)."""

    metrics: str
    health: str
    webhook: str
    ui: str  # "" when the web page is off (its default, the metrics address, is resolved)


@dataclass(frozen=True)
class PodShapes:
    """The in-cluster pod-shape ConfigMaps, by name in the control namespace ("": none)."""

    instance_types: str = ""
    patches: str = ""


@dataclass(frozen=True)
class Sharding:
    """``sharding.*``: split the apps between replicas (:mod:`gitops_ray.runtime.shards`)."""

    enabled: bool = False
    shards: int = 16


@dataclass(frozen=True)
class Sources:
    """``sources.*``: which hosts sources come from, and how much of a chart is read."""

    allowed_hosts: tuple[str, ...] = ()
    timeout: float = 30.0
    max_index_bytes: int = limits.MAX_CHART_INDEX_BYTES
    max_chart_bytes: int = limits.MAX_CHART_BYTES


@dataclass(frozen=True)
class ArgoCD:
    """Argo CD integration (``argocd.*``): which in-cluster Applications are ours."""

    enabled: bool = False
    namespace: str = "argocd"
    application_namespaces: tuple[str, ...] = ()
    views: bool = False  # the resource tree and managed resources into Argo CD's Redis
    redis: str = ""  # host:port; "" = argocd-redis in Argo CD's namespace
    redis_compression: str = "gzip"
    server: str = ""  # argocd-server's URL; "" = argocd-server in Argo CD's namespace
    version: str = ""  # "" = argocd-server's /api/version

    @property
    def redis_address(self) -> str:
        return self.redis or f"argocd-redis.{self.namespace}.svc:6379"

    @property
    def server_url(self) -> str:
        return (self.server or f"https://argocd-server.{self.namespace}.svc").rstrip("/")

    @property
    def watched(self) -> tuple[str, ...]:
        """Every namespace whose Applications are watched, Argo CD's own first."""
        return tuple(dict.fromkeys((self.namespace, *self.application_namespaces)))


@dataclass(frozen=True)
class Settings:
    """Everything ``gitops-ray run`` needs, validated.

    No defaults here: :func:`load_settings` fills every field, with the defaults of
    :data:`OPTIONS`, so each default is written once.
    """

    control_namespace: str
    kubeconfig: str
    context: str
    interval: float
    jitter: float
    workers: int
    sync_parallelism: int
    debounce: float
    cache_dir: Path
    helm_bin: str
    value_file_hosts: tuple[str, ...]
    child_memory_limit: int
    app_sources: tuple[AppSourceSpec, ...]
    applications: tuple[Manifest, ...]
    credentials: tuple[RepoCredential, ...]
    webhook_secret: Secret
    webhook_advertise_url: str
    listen: Listen
    ui_actions: bool
    ui_token_audience: str
    leader_election: bool
    lease: LeaseSettings
    autosync: AutoSyncSettings
    log_format: str
    log_level: str
    shutdown_timeout: float
    pod_shapes: PodShapes
    argocd: ArgoCD
    sharding: Sharding
    sources: Sources = Sources()

    @property
    def connections(self) -> int:
        """Connections kept open per cluster: one per request that may be in flight.

        Every apply at once (``workers`` x ``sync.parallelism``), plus room for the
        watches and the rest.
        """
        return self.workers * self.sync_parallelism + WATCH_CONNECTIONS


WATCH_CONNECTIONS = 16
"""Connections a cluster's client keeps beyond the applies: watches, leases, records."""


# -- loading -------------------------------------------------------------------------------

def load_settings(path: Path | str | None = None, *, env: Mapping[str, str] | None = None,
                  flags: Mapping[str, Any] | None = None) -> Settings:
    """Read ``path`` (optional), then ``GITOPS_RAY_*`` from ``env``, then ``flags``.

    ``flags`` maps dotted keys (see :data:`OPTIONS`) to values; ``None`` means not given.
    """
    where = str(path) if path else "settings"
    raw = _read_file(Path(path)) if path else {}
    lists = {k: raw.pop(k) for k in _LIST_KEYS if k in raw}
    values = _flatten(raw, where)
    values.update(_from_env(os.environ if env is None else env))
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    scalars = {key: _convert(key, values.get(key, _BY_KEY[key].default), where)
               for key in _BY_KEY}
    return _build(scalars, lists, where)


def _read_file(path: Path) -> dict[str, Any]:
    """The settings file, measured before it is built (as config-repo files are)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        text = raw.decode()
        check_yaml(text, origin=f"settings file {path}")
        doc = yaml.safe_load(text)
    except OSError as e:
        raise ConfigError(f"cannot read settings file {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text") from e
    except LimitExceeded as e:
        raise ConfigError(str(e)) from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    return doc


def _flatten(raw: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted not in _BY_KEY:
            out.update(_flatten(value, where, dotted + "."))
        elif dotted in _BY_KEY:
            out[dotted] = value
        else:
            raise ConfigError(f"{where}: unknown setting {dotted!r}{_suggest(dotted)}")
    return out


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, [*_BY_KEY, *_LIST_KEYS], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    return {o.key: env[o.env] for o in OPTIONS if env.get(o.env, "") != ""}


def _convert(key: str, value: object, where: str) -> Any:
    option = _BY_KEY[key]
    try:
        return option.convert(value)
    except (TypeError, ValueError) as e:
        names = " / ".join(n for n in (option.flag_name, option.env) if n)
        raise ConfigError(f"{where}: {key} ({names}): {e}") from e


def _build(s: dict[str, Any], lists: dict[str, Any], where: str) -> Settings:
    namespace = _namespace(s["controlNamespace"], "controlNamespace", where)
    return Settings(
        control_namespace=namespace, kubeconfig=s["kubeconfig"], context=s["context"],
        interval=s["interval"], jitter=s["jitter"], workers=s["workers"],
        sync_parallelism=s["sync.parallelism"],
        debounce=s["debounce"], cache_dir=Path(s["cacheDir"]).expanduser(),
        helm_bin=s["helm"], value_file_hosts=s["render.valueFileHosts"],
        child_memory_limit=s["childMemoryLimit"],
        app_sources=_app_sources(s, lists.get("appSources"), where),
        applications=_applications(lists.get("applications"), where),
        credentials=_credentials(lists.get("credentials"), where),
        webhook_secret=_webhook_secret(s, where),
        webhook_advertise_url=s["webhook.advertiseUrl"],
        listen=Listen(s["listen.metrics"], s["listen.health"], s["listen.webhook"],
                      (s["listen.ui"] or s["listen.metrics"]) if s["ui.enabled"] else ""),
        ui_actions=s["ui.actions"], ui_token_audience=s["ui.tokenAudience"],
        leader_election=s["leaderElection.enabled"], lease=_lease(s, namespace, where),
        autosync=_autosync(s), log_format=s["log.format"], log_level=s["log.level"],
        shutdown_timeout=s["shutdownTimeout"],
        pod_shapes=PodShapes(s["podShapes.instanceTypesConfigMap"],
                             s["podShapes.patchesConfigMap"]),
        argocd=ArgoCD(s["argocd.enabled"],
                      _namespace(s["argocd.namespace"], "argocd.namespace", where),
                      s["argocd.applicationNamespaces"], s["argocd.views"],
                      s["argocd.redis"], s["argocd.redisCompression"], s["argocd.server"],
                      s["argocd.version"].strip()),
        sharding=Sharding(s["sharding.enabled"], s["sharding.shards"]),
        sources=Sources(s["sources.allowedHosts"], s["sources.timeout"],
                        s["sources.maxIndexSize"], s["sources.maxChartSize"]))


def _namespace(value: str, key: str, where: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ConfigError(f"{where}: {key}: {value!r} is not a valid namespace name")
    return value


def _app_sources(s: dict[str, Any], items: object, where: str) -> tuple[AppSourceSpec, ...]:
    out = [_app_source(item, f"{where}: appSources[{i}]")
           for i, item in enumerate(_list(items, "appSources", where))]
    if s["repo"]:
        out.append(AppSourceSpec(s["repo"], s["revision"] or "HEAD", s["apps"] or "."))
    elif s["apps"]:
        raise ConfigError(f"{where}: apps is set but repo is not: say which repository "
                          "holds the Applications (--repo URL)")
    return tuple(out)


def _app_source(item: object, where: str) -> AppSourceSpec:
    fields = _mapping(item, where, set(_APP_SOURCE_FIELDS))
    if not fields.get("repo"):
        raise ConfigError(f"{where}: repo is required")
    return AppSourceSpec(str(fields["repo"]), str(fields.get("revision") or "HEAD"),
                         str(fields.get("path") or "."))


def _applications(items: object, where: str) -> tuple[Manifest, ...]:
    apps = _list(items, "applications", where)
    for i, app in enumerate(apps):
        if not isinstance(app, dict) or app.get("kind") != "Application":
            raise ConfigError(f"{where}: applications[{i}] must be an Argo CD Application "
                              "manifest (kind: Application)")
    return tuple(apps)


def _credentials(items: object, where: str) -> tuple[RepoCredential, ...]:
    out = [_credential(_mapping(item, f"{where}: credentials[{i}]", set(_CREDENTIAL_FIELDS)),
                       f"{where}: credentials[{i}]")
           for i, item in enumerate(_list(items, "credentials", where))]
    return tuple(sorted(out, key=lambda c: -len(c.url)))


def _credential(fields: dict[str, Any], at: str) -> RepoCredential:
    if not fields.get("url"):
        raise ConfigError(f"{at}: url (a repository URL prefix) is required")
    if not host_scope(str(fields["url"])):
        raise ConfigError(f"{at}: url {redact(str(fields['url']))!r} is not a repository URL "
                          "prefix (https://host/path, ssh://host/path or git@host:path)")
    password_file = str(fields.get("passwordFile") or fields.get("tokenFile") or "")
    tls = tuple(str(fields.get(k) or "") for k in ("caFile", "certFile", "keyFile"))
    for path in (password_file, fields.get("sshKeyFile"), fields.get("knownHostsFile"), *tls):
        _read_secret(path, at)  # fail at start-up, not at the first fetch
    if not (fields.get("password") or password_file or fields.get("sshKeyFile")
            or fields.get("secret") or any(tls)):
        raise ConfigError(f"{at}: give passwordFile, tokenFile, sshKeyFile, secret or caFile")
    if bool(tls[1]) != bool(tls[2]):
        raise ConfigError(f"{at}: certFile and keyFile go together")
    return RepoCredential(
        str(fields["url"]), str(fields.get("username") or ""),
        Secret(str(fields.get("password") or "")), password_file,
        str(fields.get("sshKeyFile") or ""), str(fields.get("knownHostsFile") or ""),
        str(fields.get("secret") or ""), *tls)


def _webhook_secret(s: dict[str, Any], where: str) -> Secret:
    if s["webhook.secret"]:
        return Secret(s["webhook.secret"])
    return Secret(_read_secret(s["webhook.secretFile"], f"{where}: webhook.secretFile"))


def _read_secret(path: object, where: str) -> str:
    if not path:
        return ""
    try:
        return Path(str(path)).expanduser().read_text().strip()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read {path}: {e.strerror}") from e


def _lease(s: dict[str, Any], namespace: str, where: str) -> LeaseSettings:
    lease_ns = s["leaderElection.namespace"] or namespace
    _namespace(lease_ns, "leaderElection.namespace", where)
    identity = s["leaderElection.identity"] or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    try:
        return LeaseSettings(s["leaderElection.leaseName"], lease_ns, identity,
                             s["leaderElection.leaseDuration"],
                             s["leaderElection.renewDeadline"],
                             s["leaderElection.retryPeriod"])
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from e


def _autosync(s: dict[str, Any]) -> AutoSyncSettings:
    def backoff(prefix: str) -> Backoff:
        return Backoff(s[f"{prefix}.initial"], s[f"{prefix}.factor"], s[f"{prefix}.cap"])
    return AutoSyncSettings(self_heal=backoff("selfHeal.backoff"),
                            retry=backoff("retry.backoff"), retry_limit=s["retry.limit"])


def _list(items: object, key: str, where: str) -> list[Any]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{where}: {key} must be a list")
    return items


def _mapping(item: object, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: "
                          f"{', '.join(sorted(allowed))})")
    return item
