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

from gitops_ray.settings.convert import (
    DEFAULT_CACHE,
    ENV_PREFIX,
    LIST_ITEMS,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_SHARDS,
    MAX_SYNC_PARALLELISM,
    Secret,
    parse_duration,
)
from gitops_ray.settings.load import load_settings
from gitops_ray.settings.model import (
    WATCH_CONNECTIONS,
    AppSourceSpec,
    ArgoCD,
    Listen,
    PodShapes,
    RepoCredential,
    Settings,
    Sharding,
    Sources,
)
from gitops_ray.settings.options import OPTIONS, Option, option

__all__ = [
    "DEFAULT_CACHE", "ENV_PREFIX", "LIST_ITEMS", "LOG_FORMATS", "LOG_LEVELS", "MAX_SHARDS",
    "MAX_SYNC_PARALLELISM", "OPTIONS", "WATCH_CONNECTIONS", "AppSourceSpec", "ArgoCD", "Listen",
    "Option", "PodShapes", "RepoCredential", "Secret", "Settings", "Sharding", "Sources",
    "load_settings", "option", "parse_duration",
]
