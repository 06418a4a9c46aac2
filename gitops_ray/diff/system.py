"""System-level diff settings: what an ``argocd-cm`` says about comparing every app.

Argo CD keeps per-kind "resource overrides" in its ``argocd-cm`` ConfigMap
(``util/settings/settings.go``): ``resource.customizations.ignoreDifferences.<key>``,
``...knownTypeFields.<key>`` and ``resource.compareoptions``. This module turns the
already-decoded override values into what :func:`gitops_ray.diff.compile_rules` adds to
every app's own rules; decoding the ConfigMap (bounded YAML) is the caller's job
(:mod:`gitops_ray.reconcile.argocdcm`), so this stage stays pure.

Scope comes from the override key only, as in Argo CD (``getGroupKindForOverrideKey``):
``<group>/<kind>`` or ``<kind>`` (core group), ``*/*`` for ``.all``; group and kind are
globs. System rules run after the app's own rules (``NewIgnoreNormalizer`` appends them),
and a system rule identical to one of the app's is not added twice. ``managedFieldsManagers``
of a matching override count like the app's. ``knownTypeFields`` apply to the exact
group and kind of their key (Argo's map lookup).

``resource.compareoptions`` (defaults ``GetDefaultDiffOptions``):

* ``ignoreResourceStatusField``: ``all`` (default, also for an unknown value, as Argo
  does) ignores ``/status`` of every object; ``crd`` only that of
  CustomResourceDefinitions; ``none``/``off``/``false`` compares status too;
* ``ignoreAggregatedRoles``: a (Cluster)Role with an ``aggregationRule`` compares without
  its ``rules`` (gitops-engine ``normalizeRole``);
* ``ignoreDifferencesOnResourceUpdates``: accepted; Argo CD uses it to skip refreshes on
  watch events. Our refreshes on watch events are answered from the per-object memo, and
  the comparison result does not depend on it.

A key that cannot be used is :class:`Broken`: comparing any object in its scope fails
(the app's comparison fails with the key's name, so nothing is synced or pruned on
half-read settings); everything outside its scope compares as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitops_ray.diff.knowntypes import KnownTypeField, compile_known_fields
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.types import Manifest, ResourceKey

CRD_GROUP, CRD_KIND = "apiextensions.k8s.io", "CustomResourceDefinition"
RBAC_GROUP = "rbac.authorization.k8s.io"
OVERRIDE_FIELDS = ("jsonPointers", "jqPathExpressions", "managedFieldsManagers")


class IgnoreStatus(StrEnum):
    """``resource.compareoptions.ignoreResourceStatusField``."""

    ALL = "all"
    CRD = "crd"
    NONE = "none"

    @classmethod
    def parse(cls, value: object) -> tuple[IgnoreStatus, str]:
        """The setting and a warning (Argo maps an unknown value to ``all``, with a warning)."""
        text = str(value).lower() if value is not None else ""
        if text in ("", "all"):
            return cls.ALL, ""
        if text == "crd":
            return cls.CRD, ""
        if text in ("none", "off", "false"):
            return cls.NONE, ""
        return cls.ALL, ("resource.compareoptions: unknown ignoreResourceStatusField "
                         "(expected all, crd or none); status is ignored for all objects")

    def drops_status(self, key: ResourceKey) -> bool:
        if self is IgnoreStatus.ALL:
            return True
        return self is IgnoreStatus.CRD and (key.group, key.kind) == (CRD_GROUP, CRD_KIND)


@dataclass(frozen=True)
class Broken:
    """A settings key that could not be read, and the objects it governs."""

    label: str
    reason: str
    group: Callable[[str], bool]
    kind: Callable[[str], bool]

    def governs(self, key: ResourceKey) -> bool:
        return self.group(key.group) and self.kind(key.kind)

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"


def _any(_: str) -> bool:
    return True


def broken_everywhere(label: str, reason: str) -> Broken:
    """A key that governs every object (``resource.compareoptions``)."""
    return Broken(label, reason, _any, _any)


@dataclass(frozen=True)
class SystemDiff:
    """The diff part of an ``argocd-cm``, ready for :func:`compile_rules`."""

    ignore: tuple[tuple[str, dict[str, Any]], ...] = ()  # (label, ignoreDifferences entry)
    known: Mapping[tuple[str, str], tuple[KnownTypeField, ...]] = field(default_factory=dict)
    status: IgnoreStatus = IgnoreStatus.ALL
    aggregated_roles: bool = False
    on_resource_updates: bool = True
    broken: tuple[Broken, ...] = ()
    warnings: tuple[str, ...] = ()

    def broken_for(self, key: ResourceKey) -> Broken | None:
        return next((b for b in self.broken if b.governs(key)), None)


def split_override_key(key: str) -> tuple[str, str]:
    """(group, kind) of an override key: ``<group>/<kind>``, ``<kind>`` or ``*/*``."""
    parts = key.split("/")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 1 and key:
        return "", key
    raise ValueError("an override key is <group>/<kind> or <kind>")


def system_diff(ignore: Mapping[str, tuple[str, Any]],
                known: Mapping[str, tuple[str, Any]], *,
                compare_options: Any = None,
                broken: Sequence[Broken] = ()) -> SystemDiff:
    """Compile decoded overrides (override key → (label, value)) into a :class:`SystemDiff`."""
    rules, warnings, failed = [], [], list(broken)
    for key, (label, value) in sorted(ignore.items()):
        spec, problem = _ignore_spec(key, value)
        if problem:
            failed.append(broken_scope(label, problem, key))
        elif spec is not None:
            rules.append((label, spec))
    fields: dict[tuple[str, str], tuple[KnownTypeField, ...]] = {}
    for key, (label, value) in sorted(known.items()):
        compiled, problems = compile_known_fields(value, label=label)
        warnings += problems
        try:
            group_kind = split_override_key(key)
        except ValueError as e:
            warnings.append(f"{label}: {e}")
            continue
        fields[group_kind] = fields.get(group_kind, ()) + tuple(compiled)
    options, problems = _compare_options(compare_options)
    if options is None:
        options = {}
        failed.append(broken_everywhere("resource.compareoptions", "expected a mapping"))
    return SystemDiff(tuple(rules), fields, broken=tuple(failed),
                      warnings=tuple(warnings + problems), **options)


def _ignore_spec(key: str, value: Any) -> tuple[dict[str, Any] | None, str]:
    """An ``ignoreDifferences`` entry scoped by the key, or why the value is unusable."""
    if value is None:
        return None, ""
    if not isinstance(value, Mapping):
        return None, "expected a mapping of jsonPointers, jqPathExpressions, managedFieldsManagers"
    unknown = sorted(set(value) - set(OVERRIDE_FIELDS))
    if unknown:
        return None, f"unknown field(s) {', '.join(map(str, unknown))[:200]}"
    try:
        group, kind = split_override_key(key)
    except ValueError as e:
        return None, str(e)
    spec = {name: value[name] for name in OVERRIDE_FIELDS if value.get(name)}
    return ({"group": group, "kind": kind, **spec} if spec else None), ""


def broken_scope(label: str, reason: str, key: str) -> Broken:
    """A key that governs the objects its override key (``group/kind`` globs) matches."""
    try:
        group, kind = split_override_key(key)
        return Broken(label, reason, compile_glob(group), compile_glob(kind))
    except (ValueError, GlobError):
        return broken_everywhere(label, reason)


def _compare_options(value: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """The options as :class:`SystemDiff` fields (None: not a mapping), and warnings."""
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return None, []
    status, warning = IgnoreStatus.parse(value.get("ignoreResourceStatusField"))
    options = {"status": status,
               "aggregated_roles": value.get("ignoreAggregatedRoles") is True,
               "on_resource_updates": value.get("ignoreDifferencesOnResourceUpdates",
                                                True) is not False}
    return options, [warning] if warning else []


def aggregated_role(sides: Sequence[Manifest | None]) -> bool:
    """Whether a Role/ClusterRole side is aggregated (its ``rules`` are the controller's)."""
    return any(isinstance((side or {}).get("aggregationRule"), dict) for side in sides)


AGGREGATED_ROLES_SPEC = {"group": RBAC_GROUP, "kind": "{Role,ClusterRole}",
                         "jsonPointers": ["/rules"]}
