"""The table of settings: each one's dotted key, ``GITOPS_RAY_*`` variable, flag and default.

Why one table: the controller's flags, the one-shot CLI's shared flags, the environment
variables and the chart's schema are all built from :data:`OPTIONS`, so each setting is
written once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitops_ray import limits
from gitops_ray.kube.leader import LeaseSettings
from gitops_ray.reconcile.autosync import (
    RETRY_BACKOFF,
    RETRY_LIMIT,
    SELF_HEAL_BACKOFF,
)
from gitops_ray.render.tools import HELM_BIN
from gitops_ray.settings.convert import (
    DEFAULT_CACHE,
    ENV_PREFIX,
    LOG_FORMATS,
    LOG_LEVELS,
    SCHEMAS,
    as_address,
    as_audience,
    as_bool,
    as_bytes,
    as_choice,
    as_configmap_name,
    as_count,
    as_factor,
    as_host_patterns,
    as_hosts,
    as_memory,
    as_namespaces,
    as_parallelism,
    as_positive_int,
    as_shard_count,
    as_str,
    as_url,
    parse_duration,
)


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
        if self.convert not in SCHEMAS:
            raise KeyError(f"{self.key}: its converter has no JSON Schema in SCHEMAS")
        return {**SCHEMAS[self.convert], "description": self.help}

    @property
    def flag_name(self) -> str | None:
        if self.flag is None:
            return None
        return self.flag or "--" + re.sub(r"(?<!^)(?=[A-Z])", "-", self.key.split(".")[-1]
                                          ).lower()


OPTIONS: tuple[Option, ...] = (
    Option("controlNamespace", as_str, "gitops-ray",
           "Namespace of the per-app records and the lease."),
    Option("kubeconfig", as_str, "", "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
           "or in-cluster)."),
    Option("context", as_str, "", "Kubeconfig context."),
    Option("interval", parse_duration, 120.0, "Poll interval per app; 0 disables polling."),
    Option("jitter", parse_duration, 60.0, "Random extra delay added to each poll."),
    Option("workers", as_positive_int, 8, "Apps refreshed in parallel."),
    Option("sync.parallelism", as_parallelism, 8,
           "Objects of one app applied at the same time (within a sync wave and kind group).",
           flag="--sync-parallelism"),
    Option("debounce", parse_duration, 0.2, "Coalesce watch events of an app this long."),
    Option("cacheDir", as_str, str(DEFAULT_CACHE), "Where git mirrors are kept."),
    Option("helm", as_str, HELM_BIN, "helm v3 binary."),
    Option("render.valueFileHosts", as_hosts, "", "Hosts a Helm valueFiles URL may name "
           "(comma-separated host or host:port); empty: valueFiles URLs are refused."),
    Option("childMemoryLimit", as_memory, "auto", "Memory each child process (helm, kubectl "
           "kustomize, git, jq) may allocate: auto (half the container's limit), 0 (none) "
           "or a quantity such as 256Mi."),
    Option("repo", as_str, "", "Config repository URL (of an app-of-apps source)."),
    Option("revision", as_str, "HEAD", "Revision of --repo."),
    Option("apps", as_str, "", "Directory of Argo CD Applications in --repo."),
    Option("webhook.secret", as_str, "", "Webhook secret (environment only).", flag=None),
    Option("webhook.secretFile", as_str, "", "File holding the webhook secret.",
           flag="--webhook-secret-file"),
    Option("webhook.advertiseUrl", as_url, "", "URL other replicas forward webhooks to while "
           "this one leads, e.g. http://$(POD_IP):9292/webhook.",
           flag="--webhook-advertise-url"),
    Option("listen.metrics", as_address, ":8080", "Address of /metrics (empty disables).",
           flag="--metrics-addr"),
    Option("listen.health", as_address, ":8081", "Address of /healthz and /readyz.",
           flag="--health-addr"),
    Option("listen.webhook", as_address, ":9292", "Address of the git webhook (POST /webhook).",
           flag="--webhook-addr"),
    Option("listen.ui", as_address, "", "Address of the read-only web page (/ and /apps/<name>); "
           "empty: the metrics address.", flag="--ui-addr"),
    Option("ui.enabled", as_bool, True, "Serve the read-only web page.",
           flag="--ui/--no-ui"),
    Option("ui.actions", as_bool, False, "Offer refresh, sync, rollback and resume on the web "
           "page, to a bearer token Kubernetes authenticates (TokenReview) and authorises "
           "for the verb on the app's record ConfigMap (SubjectAccessReview).",
           flag="--ui-actions/--no-ui-actions"),
    Option("ui.tokenAudience", as_audience, "gitops-ray", "The audience an action's bearer "
           "token must be issued for (TokenReview spec.audiences), e.g. `kubectl create "
           "token SA --audience gitops-ray`; tokens for other audiences, such as a Pod's "
           "API token, are refused.", flag="--ui-token-audience"),
    Option("leaderElection.enabled", as_bool, True, "Elect a leader (only it writes).",
           flag="--leader-elect/--no-leader-elect"),
    Option("leaderElection.leaseName", as_str, "gitops-ray", "Lease name.",
           flag="--leader-election-lease"),
    Option("leaderElection.namespace", as_str, "", "Lease namespace (default: control ns).",
           flag="--leader-election-namespace"),
    Option("leaderElection.identity", as_str, "", "Holder identity (default: hostname_random).",
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
    Option("sharding.enabled", as_bool, False, "Split the apps between the replicas by shard "
           "Leases (docs/operations.md: Sharding); replaces the single leader Lease, uses the "
           "leaderElection.* name, namespace, identity and timings.",
           flag="--sharding/--no-sharding"),
    Option("sharding.shards", as_shard_count, 16, "Number of shards (one Lease each); the "
           "same on every replica.", flag="--shards"),
    Option("selfHeal.backoff.initial", parse_duration, SELF_HEAL_BACKOFF.initial,
           "First self-heal backoff step.",
           flag="--self-heal-backoff"),
    Option("selfHeal.backoff.factor", as_factor, SELF_HEAL_BACKOFF.factor,
           "Self-heal backoff factor.",
           flag="--self-heal-backoff-factor"),
    Option("selfHeal.backoff.cap", parse_duration, SELF_HEAL_BACKOFF.cap,
           "Self-heal backoff cap.",
           flag="--self-heal-backoff-cap"),
    Option("retry.limit", as_count, RETRY_LIMIT, "Retries of a failed automated sync.",
           flag="--retry-limit"),
    Option("retry.backoff.initial", parse_duration, RETRY_BACKOFF.initial,
           "First retry backoff step.",
           flag="--retry-backoff"),
    Option("retry.backoff.factor", as_factor, RETRY_BACKOFF.factor, "Retry backoff factor.",
           flag="--retry-backoff-factor"),
    Option("retry.backoff.cap", parse_duration, RETRY_BACKOFF.cap, "Retry backoff cap.",
           flag="--retry-backoff-cap"),
    Option("log.format", as_choice(*LOG_FORMATS), "auto",
           "Log format (auto: console on a terminal, JSON otherwise).", flag="--log-format"),
    Option("log.level", as_choice(*LOG_LEVELS), "info", "Log level.",
           flag="--log-level"),
    Option("shutdownTimeout", parse_duration, 30.0, "Wait this long for running syncs on "
                                                    "SIGTERM."),
    Option("podShapes.instanceTypesConfigMap", as_configmap_name, "",
           "ConfigMap in the control namespace with instance types (data key "
           "instance_types.yaml) for pod shapes; the repo's .gitops-ray/ files override it. "
           "Empty: none.", flag="--instance-types-configmap"),
    Option("podShapes.patchesConfigMap", as_configmap_name, "",
           "ConfigMap in the control namespace with pod-shape patches (data key "
           "patches.yaml), applied before the repo's. Empty: none.",
           flag="--patches-configmap"),
    Option("sources.allowedHosts", as_host_patterns, "",
           "The only hosts git, Helm repositories and OCI registries are fetched from "
           "(comma-separated host, host:port or *.domain; empty: any). A chart archive or "
           "redirect on another host fails its app.", flag="--allowed-source-hosts"),
    Option("sources.timeout", parse_duration, 30.0, "Timeout of one HTTP request to a Helm "
           "repository or OCI registry.", flag="--source-timeout"),
    Option("sources.maxIndexSize", as_bytes, limits.MAX_CHART_INDEX_BYTES,
           "Largest Helm repository index.yaml read (bytes, or 16Mi).", flag="--max-index-size"),
    Option("sources.maxChartSize", as_bytes, limits.MAX_CHART_BYTES,
           "Largest chart archive fetched (bytes, or 4Mi).", flag="--max-chart-size"),
    Option("argocd.enabled", as_bool, False,
           "Reconcile the Argo CD Applications in the cluster that opt in (annotations "
           "gitops-ray.io/managed and argocd.argoproj.io/skip-reconcile, both \"true\") and "
           "write Argo CD's status back to them.", flag="--argocd/--no-argocd"),
    Option("argocd.namespace", as_str, "argocd",
           "Argo CD's namespace: its Applications, AppProjects and argocd-cm are read there.",
           flag="--argocd-namespace"),
    Option("argocd.applicationNamespaces", as_namespaces, "",
           "More namespaces whose Applications are reconciled (comma-separated; Argo CD's "
           "\"applications in any namespace\"; their AppProject must allow them in "
           "sourceNamespaces).", flag="--argocd-application-namespaces"),
    Option("argocd.views", as_bool, True,
           "Publish each handed-over app's resource tree and managed resources into Argo "
           "CD's Redis, where argocd-server reads them for the UI's tree and diff and for "
           "argocd app resources/diff/manifests (docs/argocd.md).",
           flag="--argocd-views/--no-argocd-views"),
    Option("argocd.redis", as_address, "",
           "Argo CD's Redis as host:port (default: argocd-redis.<argocd.namespace>.svc:6379); "
           "its password is the key auth of the Secret argocd-redis there.",
           flag="--argocd-redis"),
    Option("argocd.redisCompression", as_choice("gzip", "none"), "gzip",
           "Argo CD's Redis compression (its --redis-compress; gzip is Argo CD's default).",
           flag="--argocd-redis-compress"),
    Option("argocd.server", as_url, "",
           "argocd-server's URL, whose /api/version says which cache format to write "
           "(default: https://argocd-server.<argocd.namespace>.svc).", flag="--argocd-server"),
    Option("argocd.version", as_str, "",
           "Argo CD's version, for a build whose argocd-server does not report a release's "
           "(e.g. v99.99.99+unknown from source); empty: ask argocd-server.",
           flag="--argocd-version"),
)
BY_KEY = {o.key: o for o in OPTIONS}


def option(key: str) -> Option:
    """The setting ``key`` (its flag, default and help are shared with the one-shot CLI)."""
    return BY_KEY[key]


