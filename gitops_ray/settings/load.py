"""Reading the settings: file < environment < flags, each value converted once.

Errors are :class:`~gitops_ray.errors.ConfigError` naming the key and where it came from.
"""

from __future__ import annotations

import difflib
import os
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.errors import ConfigError, LimitExceeded
from gitops_ray.kube.leader import LeaseSettings
from gitops_ray.limits import MAX_FILE_BYTES
from gitops_ray.reconcile.autosync import (
    AutoSyncSettings,
    Backoff,
)
from gitops_ray.redact import redact
from gitops_ray.render.bounds import check_yaml
from gitops_ray.settings.convert import (
    APP_SOURCE_FIELDS,
    CREDENTIAL_FIELDS,
    DNS_LABEL,
    LIST_KEYS,
    Secret,
)
from gitops_ray.settings.model import (
    AppSourceSpec,
    ArgoCD,
    Listen,
    PodShapes,
    RepoCredential,
    Settings,
    Sharding,
    Sources,
)
from gitops_ray.settings.options import BY_KEY, OPTIONS
from gitops_ray.source.auth import host_scope
from gitops_ray.types import Manifest


def load_settings(path: Path | str | None = None, *, env: Mapping[str, str] | None = None,
                  flags: Mapping[str, Any] | None = None) -> Settings:
    """Read ``path`` (optional), then ``GITOPS_RAY_*`` from ``env``, then ``flags``.

    ``flags`` maps dotted keys (see :data:`OPTIONS`) to values; ``None`` means not given.
    """
    where = str(path) if path else "settings"
    raw = _read_file(Path(path)) if path else {}
    lists = {k: raw.pop(k) for k in LIST_KEYS if k in raw}
    values = _flatten(raw, where)
    values.update(_from_env(os.environ if env is None else env))
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    scalars = {key: _convert(key, values.get(key, BY_KEY[key].default), where)
               for key in BY_KEY}
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
        if isinstance(value, Mapping) and dotted not in BY_KEY:
            out.update(_flatten(value, where, dotted + "."))
        elif dotted in BY_KEY:
            out[dotted] = value
        else:
            raise ConfigError(f"{where}: unknown setting {dotted!r}{_suggest(dotted)}")
    return out


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, [*BY_KEY, *LIST_KEYS], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    return {o.key: env[o.env] for o in OPTIONS if env.get(o.env, "") != ""}


def _convert(key: str, value: object, where: str) -> Any:
    option = BY_KEY[key]
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
    if not DNS_LABEL.match(value):
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
    fields = _mapping(item, where, set(APP_SOURCE_FIELDS))
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
    out = [_credential(_mapping(item, f"{where}: credentials[{i}]", set(CREDENTIAL_FIELDS)),
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
