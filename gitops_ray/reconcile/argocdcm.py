"""System-level settings from Argo CD's ``argocd-cm``, read alike by controller and CLI.

Argo CD's admins customise how *every* app is compared and assessed in one ConfigMap,
``argocd-cm`` in Argo CD's namespace (``util/settings/settings.go``
``GetResourceOverrides``): ``resource.customizations.<type>.<group>_<kind>`` keys
(``<kind>`` alone for the core group, ``all`` for every kind), the legacy
``resource.customizations`` YAML map keyed ``<group>/<kind>``, and
``resource.compareoptions``. A split key replaces the legacy map's value of the same type
and kind. Where gitops-ray syncs Argo CD's Applications it must honour them, or it would
call Synced what Argo CD calls OutOfSync.

The parse lives here because it feeds two pure stages that do not import each other:
``diff`` gets the ignore rules, ``knownTypeFields`` and compare options
(:class:`gitops_ray.diff.system.SystemDiff`), ``health`` the Lua checks
(:class:`gitops_ray.health.lua.LuaChecks`). Decoding is bounded like every YAML input
(:func:`gitops_ray.render.bounds.check_yaml`).

A hostile or broken ``argocd-cm`` never stops the controller. A key that cannot be read
fails only what it governs: an ``ignoreDifferences``/``knownTypeFields`` key fails the
comparison of the objects of its kind (so their apps neither sync nor prune on half-read
settings), a broken ``resource.compareoptions`` fails every comparison, and a health
script that fails makes its kind Unknown. Everything else is a warning in every app's
status. Messages name the key, never a value.

``ignoreDifferences`` values are typed here, once per version of the ConfigMap
(:func:`gitops_ray.diff.system.system_diff`), so no app's rule compile reads them again.
``ignoreResourceUpdates`` (Argo CD's refresh-only filter) is typed alike but not acted on:
one that cannot be read is a warning. ``actions`` are accepted and ignored; an unknown
type is a warning (Argo CD refuses the whole ConfigMap).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from gitops_ray.diff.system import (
    Broken,
    SystemDiff,
    broken_everywhere,
    broken_scope,
    system_diff,
)
from gitops_ray.errors import ConfigError, DiffError, LimitExceeded, SystemSettingsError
from gitops_ray.health.lua import NO_CHECKS, LuaChecks, lua_checks
from gitops_ray.kube import KubeError
from gitops_ray.render.bounds import check_text_size, check_yaml
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)

ARGOCD_CM = "argocd-cm"
PREFIX = "resource.customizations"
COMPARE_OPTIONS = "resource.compareoptions"
IGNORED_TYPES = ("actions",)
RESOURCE_UPDATES = "ignoreResourceUpdates"
YAML_TYPES = ("ignoreDifferences", "knownTypeFields", RESOURCE_UPDATES)

Overrides = dict[str, dict[str, tuple[str, Any]]]
"""customization type → override key (``group/kind``) → (settings key, decoded value)."""


@dataclass(frozen=True)
class SystemSettings:
    """What one ``argocd-cm`` says about comparing and assessing every app."""

    diff: SystemDiff = field(default_factory=SystemDiff)
    health: LuaChecks = NO_CHECKS
    digest: str = ""  # changes when any key read here does; "" for no settings
    warnings: tuple[str, ...] = ()
    origin: str = ""  # "argocd-cm argocd/argocd-cm", "file x.yaml"

    @property
    def broken(self) -> tuple[Broken, ...]:
        return self.diff.broken


NO_SETTINGS = SystemSettings()


def parse_argocd_cm(configmap: Manifest | None, *, origin: str) -> SystemSettings:
    """The settings of an ``argocd-cm`` object (None: no ConfigMap, no settings)."""
    if configmap is None:
        return NO_SETTINGS
    data = configmap.get("data") or {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{origin}: 'data' is not a mapping of strings")
    relevant = {str(k): v for k, v in data.items()
                if str(k).startswith(PREFIX) or k == COMPARE_OPTIONS}
    digest = _digest(relevant) if relevant else ""
    overrides, broken, warnings = _overrides(relevant, origin)
    options = relevant.get(COMPARE_OPTIONS)
    compare: Any = None
    if options is not None:
        compare, problem = _yaml(options, f"{origin} {COMPARE_OPTIONS}")
        if problem:
            broken.append(broken_everywhere(COMPARE_OPTIONS, problem))
            compare = None
    diff = system_diff(overrides.get("ignoreDifferences", {}),
                       overrides.get("knownTypeFields", {}), compare_options=compare,
                       broken=broken, resource_updates=overrides.get(RESOURCE_UPDATES))
    health = lua_checks(overrides.get("health", {}), overrides.get("useOpenLibs", {}))
    return SystemSettings(diff, health, digest,
                          tuple(warnings) + diff.warnings + health.warnings, origin)


def load_argocd_cm_file(path: Path) -> SystemSettings:
    """The settings of a ConfigMap YAML file (``--argocd-cm``)."""
    origin = f"--argocd-cm {path}"
    try:
        check_text_size(path.stat().st_size, origin=origin)
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{origin}: cannot read: {e.strerror}") from None
    value, problem = _yaml(text, origin)
    if problem:
        raise ConfigError(f"{origin}: {problem}")
    if not isinstance(value, dict) or value.get("kind") != "ConfigMap":
        raise ConfigError(f"{origin}: expected a ConfigMap (kind: ConfigMap, data: ...)")
    return parse_argocd_cm(value, origin=origin)


def _overrides(data: Mapping[str, Any], origin: str
               ) -> tuple[Overrides, list[Broken], list[str]]:
    overrides: Overrides = {}
    broken: list[Broken] = []
    warnings: list[str] = []
    legacy = data.get(PREFIX)
    if legacy:
        _legacy(legacy, overrides, broken, warnings)
    for key in sorted(data):
        parts = key.split(".", 3)
        if len(parts) < 4 or key == PREFIX:
            continue
        _split_key(key, parts[2], parts[3], data[key], overrides=overrides, broken=broken,
                   warnings=warnings)
    return overrides, broken, warnings


def _split_key(key: str, kind_of: str, group_kind: str, value: Any, *, overrides: Overrides,
               broken: list[Broken], warnings: list[str]) -> None:
    """One ``resource.customizations.<type>.<group_kind>`` key."""
    override = _override_key(group_kind)
    if kind_of in IGNORED_TYPES:
        return
    if kind_of not in ("health", "useOpenLibs", *YAML_TYPES):
        warnings.append(f"{key}: customization type {kind_of[:50]!r} is not supported; "
                        "key ignored")
        return
    if override is None:
        problem = "expected resource.customizations.<type>.<group>_<kind> or .<kind>"
        if kind_of in YAML_TYPES and kind_of != RESOURCE_UPDATES:
            broken.append(broken_everywhere(key, problem))
        else:
            warnings.append(f"{key}: {problem}; key ignored")
        return
    if kind_of in YAML_TYPES:
        value, problem = _yaml(value, key)
        if problem and kind_of == RESOURCE_UPDATES:
            warnings.append(f"{key}: {problem}; key ignored")
            return
        if problem:
            broken.append(broken_scope(key, problem, override))
            return
    overrides.setdefault(kind_of, {})[override] = (key, value)


def _legacy(text: Any, overrides: Overrides, broken: list[Broken],
            warnings: list[str]) -> None:
    """The ``resource.customizations`` map: override key → {health.lua, ignoreDifferences, ...}."""
    value, problem = _yaml(text, PREFIX)
    if not problem and not isinstance(value, Mapping):
        problem = "expected a mapping of <group>/<kind> to customizations"
    if problem:
        broken.append(broken_everywhere(PREFIX, problem))
        return
    for key, entry in value.items():
        label = f"{PREFIX}[{str(key)[:100]}]"
        if not isinstance(entry, Mapping):
            broken.append(broken_scope(label, "expected a mapping", str(key)))
            continue
        _legacy_entry(label, str(key), entry, overrides, broken=broken, warnings=warnings)


def _legacy_entry(label: str, key: str, entry: Mapping[str, Any], overrides: Overrides, *,
                  broken: list[Broken], warnings: list[str]) -> None:
    if "health.lua" in entry:
        overrides.setdefault("health", {})[key] = (f"{label}.health.lua", entry["health.lua"])
    if "health.lua.useOpenLibs" in entry:
        overrides.setdefault("useOpenLibs", {})[key] = (
            f"{label}.health.lua.useOpenLibs", entry["health.lua.useOpenLibs"])
    if "knownTypeFields" in entry:
        overrides.setdefault("knownTypeFields", {})[key] = (
            f"{label}.knownTypeFields", entry["knownTypeFields"])
    for kind_of in ("ignoreDifferences", RESOURCE_UPDATES):  # YAML strings in the YAML,
        if kind_of not in entry:  # as in Argo CD
            continue
        value, problem = _yaml(entry[kind_of], f"{label}.{kind_of}")
        if problem and kind_of == RESOURCE_UPDATES:
            warnings.append(f"{label}.{kind_of}: {problem}; key ignored")
        elif problem:
            broken.append(broken_scope(f"{label}.{kind_of}", problem, key))
        else:
            overrides.setdefault(kind_of, {})[key] = (f"{label}.{kind_of}", value)


def _override_key(group_kind: str) -> str | None:
    """Argo's ``convertToOverrideKey``: ``group_Kind`` → ``group/Kind``, ``all`` → ``*/*``."""
    parts = group_kind.split("_")
    if len(parts) == 2:
        return f"{parts[0]}/{parts[1]}"
    if len(parts) == 1 and group_kind:
        return "*/*" if group_kind == "all" else group_kind
    return None


def _yaml(text: Any, origin: str) -> tuple[Any, str]:
    """The decoded value, or why it could not be decoded (never quoting the text)."""
    if not isinstance(text, str):
        return text, ""  # already decoded (the legacy map's nested values)
    try:
        check_yaml(text, origin=origin)
        return yaml.safe_load(text), ""
    except LimitExceeded as e:
        return None, str(e).removeprefix(f"{origin}: ")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return None, f"invalid YAML{where}: {getattr(e, 'problem', None) or 'syntax error'}"


def _digest(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def configmap_settings(get: Callable[[str, str], Manifest | None], *,
                       namespace: str) -> Callable[[], SystemSettings]:
    """A settings source reading ``argocd-cm`` of ``namespace`` with ``get`` on every call.

    ``get(namespace, name)`` is the controller's watch cache (or a plain GET). A parse is
    reused while the ConfigMap's ``resourceVersion`` stays the same, so a pass costs no
    YAML decoding. A read that fails fails the comparison (:class:`DiffError`): no app is
    synced or pruned on settings it could not read.
    """
    origin = f"ConfigMap {namespace}/{ARGOCD_CM}"
    last: list[tuple[str, SystemSettings]] = []
    lock = threading.Lock()

    def read() -> SystemSettings:
        try:
            found = get(namespace, ARGOCD_CM)
        except KubeError as e:
            raise DiffError(f"cannot read {origin}: {e}") from e
        version = str(((found or {}).get("metadata") or {}).get("resourceVersion", ""))
        with lock:
            if found is not None and last and last[0][0] == version:
                return last[0][1]
        try:
            parsed = parse_argocd_cm(found, origin=origin)
        except ConfigError as e:
            raise SystemSettingsError(str(e)) from e
        with lock:
            last[:] = [(version, parsed)]
        for problem in (*parsed.warnings, *map(str, parsed.broken)):  # once per version
            log.warning("argocd_cm_problem", configmap=origin, problem=problem)
        return parsed

    return read
