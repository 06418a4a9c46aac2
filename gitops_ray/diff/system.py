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

The rules are typed here, once per ``argocd-cm`` version, where it is read: each
override becomes a :class:`SystemRule` (an :class:`~gitops_ray.types.IgnoreRule` scoped
by its key), its JSON pointers and jq expressions checked, so compiling an app's rules
takes typed rules only and cannot fail on a system rule. A key that cannot be used
(not YAML, not a mapping, an unknown field, a field of the wrong type, a pointer or jq
expression that does not parse) is :class:`Broken`: comparing any object in its scope
fails with :class:`~gitops_ray.errors.SystemSettingsError` (its ``reason``
``SystemSettingsInvalid``; the message names the key, never its value), so nothing is
synced or pruned on half-read settings; everything outside its scope compares as usual.
Argo CD fails every app's comparison on such a key.

``resource.customizations.ignoreResourceUpdates.<key>`` (Argo CD's refresh-only filter)
is typed alike into :attr:`SystemDiff.resource_updates`; gitops-ray does not act on it
(its watch refreshes are answered from the per-object memo), so one that cannot be read
is a warning only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitops_ray.diff import pointers
from gitops_ray.diff.jqrule import JqSyntaxError, compile_jq
from gitops_ray.diff.knowntypes import KnownTypeField, compile_known_fields
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.types import IgnoreRule, Manifest, ResourceKey, RuleError

CRD_GROUP, CRD_KIND = "apiextensions.k8s.io", "CustomResourceDefinition"
RBAC_GROUP = "rbac.authorization.k8s.io"


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
class SystemRule:
    """One override's rule, typed where ``argocd-cm`` is read; ``label`` is its key."""

    label: str
    rule: IgnoreRule


@dataclass(frozen=True)
class SystemDiff:
    """The diff part of an ``argocd-cm``, ready for :func:`compile_rules`."""

    ignore: tuple[SystemRule, ...] = ()  # ignoreDifferences, in key order
    resource_updates: tuple[SystemRule, ...] = ()  # ignoreResourceUpdates: read, not used
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
                compare_options: Any = None, broken: Sequence[Broken] = (),
                resource_updates: Mapping[str, tuple[str, Any]] | None = None) -> SystemDiff:
    """Type decoded overrides (override key → (label, value)) into a :class:`SystemDiff`."""
    rules, failed = _system_rules(ignore)
    updates, unread = _system_rules(resource_updates or {})
    fields, warnings = _known_fields(known)
    warnings += [f"{b}; key ignored (gitops-ray does not use ignoreResourceUpdates)"
                 for b in unread]
    options, problems = _compare_options(compare_options)
    if options is None:
        options = {}
        failed.append(broken_everywhere("resource.compareoptions", "expected a mapping"))
    return SystemDiff(tuple(rules), tuple(updates), fields, broken=(*broken, *failed),
                      warnings=tuple(warnings + problems), **options)


def _system_rules(overrides: Mapping[str, tuple[str, Any]]
                  ) -> tuple[list[SystemRule], list[Broken]]:
    """The typed rules of ``ignoreDifferences``-shaped overrides, and the keys that are not."""
    rules, failed = [], []
    for key, (label, value) in sorted(overrides.items()):
        try:
            rule = _override_rule(key, value, label)
        except RuleError as e:
            failed.append(broken_scope(label, str(e).removeprefix(label).lstrip(".: "), key))
            continue
        if rule is not None:
            rules.append(SystemRule(label, rule))
    return rules, failed


def _override_rule(key: str, value: Any, label: str) -> IgnoreRule | None:
    """The rule of one override, its pointers and jq expressions checked (RuleError: why not)."""
    if not isinstance(value, Mapping):  # None: no rule; another value: its error
        return IgnoreRule.of_override(value, group="", kind="", label=label)
    try:
        group, kind = split_override_key(key)
    except ValueError as e:
        raise RuleError(f"{label}: {e}") from None
    rule = IgnoreRule.of_override(dict(value), group=group, kind=kind, label=label)
    for index, text in enumerate(rule.json_pointers if rule else ()):
        try:
            pointers.parse_pointer(text)
        except pointers.PointerError:  # its message quotes the pointer: not repeated
            raise RuleError(f"{label}.jsonPointers[{index}]: not a JSON pointer (it starts "
                            "with '/', '~' only as ~0 or ~1)") from None
    for index, text in enumerate(rule.jq_path_expressions if rule else ()):
        try:
            compile_jq(text)
        except JqSyntaxError:  # libjq's message may quote the expression
            raise RuleError(f"{label}.jqPathExpressions[{index}]: not a valid jq path "
                            "expression") from None
    return rule


def _known_fields(known: Mapping[str, tuple[str, Any]]
                  ) -> tuple[dict[tuple[str, str], tuple[KnownTypeField, ...]], list[str]]:
    fields: dict[tuple[str, str], tuple[KnownTypeField, ...]] = {}
    warnings: list[str] = []
    for key, (label, value) in sorted(known.items()):
        compiled, problems = compile_known_fields(value, label=label)
        warnings += problems
        try:
            group_kind = split_override_key(key)
        except ValueError as e:
            warnings.append(f"{label}: {e}")
            continue
        fields[group_kind] = fields.get(group_kind, ()) + tuple(compiled)
    return fields, warnings


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


AGGREGATED_ROLES = SystemRule("argocd-cm ignoreAggregatedRoles",
                              IgnoreRule("{Role,ClusterRole}", RBAC_GROUP,
                                         json_pointers=("/rules",)))
"""``ignoreAggregatedRoles``: an aggregated (Cluster)Role's ``rules`` are the controller's."""
