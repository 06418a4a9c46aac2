"""Compiled ``ignoreDifferences`` rules, applied in Argo CD's order to any object.

:func:`compile_rules` validates an Application's ``ignoreDifferences`` entries once
(syntax errors are configuration errors, reported at load with the rule's index and
expression) and adds the built-in Ray rules. :class:`RuleSet` then removes the ignored
fields from an object, in Argo CD's order: fields owned by ``managedFieldsManagers``
first (Argo does this before the ignore normalizer), then each rule in turn, its
``jsonPointers`` before its ``jqPathExpressions``, every rule seeing the result of the
previous one. A failing jq expression skips that rule for that object, with a warning.

Matching (``util/argo/normalizers``): ``group`` and ``kind`` are globs, ``name`` and
``namespace`` exact, empty means any; an omitted ``group`` is the core group only (not
"any group", argo-cd #28590). An invalid glob matches nothing, with a warning.

Both ``normalize`` and ``ignored_paths`` run the same deletions; ``ignored_paths`` also
records where each deleted value sat in the original object, so sync keeps the live
value at exactly the paths the diff ignored. Rules see a Secret with its values masked,
in both (:mod:`gitops_ray.secretmask`): a rule cannot move a value, and the paths it
picks are the same in the real object, from which sync takes what it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gitops_ray.diff import managed, pointers
from gitops_ray.diff.jqrule import (
    JqExpression,
    JqSkip,
    JqSyntaxError,
    apply_del,
    compile_jq,
    del_paths,
)
from gitops_ray.diff.knowntypes import normalize_known_types
from gitops_ray.diff.paths import Path, PathError, Tracker, delete_paths, json_copy
from gitops_ray.diff.ray import BUILTIN_RULES
from gitops_ray.diff.system import AGGREGATED_ROLES, SystemDiff, aggregated_role
from gitops_ray.errors import ConfigError, SystemSettingsError
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.secretmask import is_secret, masked
from gitops_ray.types import IGNORE_RULE_FIELDS, IgnoreRule, Manifest, ResourceKey, RuleError

RULE_FIELDS = IGNORE_RULE_FIELDS
_MAX_SHOWN_EXPR = 100
JQ_TIMEOUT = 1.0
"""Seconds each jq ignore expression may run per object, as in Argo CD (1 s)."""
NO_SYSTEM = SystemDiff()


class NormalizeResult(NamedTuple):
    """The object without its ignored fields, and why any rule was skipped."""

    obj: Manifest
    warnings: list[str]


@dataclass(frozen=True)
class Skip:
    """One rule skipped for one object (rendered as a warning)."""

    rule: str
    key: ResourceKey
    side: str
    reason: str

    def __str__(self) -> str:
        return f"{self.rule} skipped for {self.key} ({self.side}): {self.reason}"


@dataclass(frozen=True)
class Rule:
    """One compiled ``ignoreDifferences`` entry (or built-in rule)."""

    label: str
    group: Callable[[str], bool]
    kind: Callable[[str], bool]
    name: str = ""
    namespace: str = ""
    pointers: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (text, tokens)
    jq: tuple[JqExpression, ...] = ()
    managers: frozenset[str] = frozenset()
    active: Callable[[Sequence[Manifest | None]], bool] | None = None

    def matches(self, key: ResourceKey) -> bool:
        return (self.group(key.group) and self.kind(key.kind)
                and self.name in ("", key.name) and self.namespace in ("", key.namespace))


@dataclass
class Scope:
    """What a normalization run knows besides the document itself."""

    key: ResourceKey
    side: str  # "desired", "live" or "object": for warnings
    sides: Sequence[Manifest | None]  # objects whose settings activate built-in rules
    live: Manifest | None  # source of managedFields
    tracker: Tracker | None = None
    skips: list[Skip] | None = None


class RuleSet:
    """The rules of one app; thread-safe and reusable (it holds no per-object state).

    ``system`` is what an ``argocd-cm`` adds for every app besides its rules (known type
    fields, whether ``/status`` counts, keys that could not be read); ``warnings`` are
    problems found while compiling (a rule that matches nothing).
    """

    def __init__(self, rules: Sequence[Rule], *, jq_timeout: float = JQ_TIMEOUT,
                 system: SystemDiff = NO_SYSTEM, warnings: Sequence[str] = ()) -> None:
        self.rules = tuple(rules)
        self.jq_timeout = jq_timeout
        self.system = system
        self.warnings = tuple(warnings)

    def drops_status(self, key: ResourceKey) -> bool:
        """Whether ``/status`` is left out of the comparison (``ignoreResourceStatusField``)."""
        return self.system.status.drops_status(key)

    def normalize_known_types(self, doc: Manifest, key: ResourceKey) -> None:
        """Re-format the ``knownTypeFields`` of ``doc`` (a private copy) in place."""
        fields = self.system.known.get((key.group, key.kind))
        if fields:
            normalize_known_types(doc, fields)

    def check(self, key: ResourceKey) -> None:
        """Raise :class:`SystemSettingsError` if an unreadable settings key governs ``key``."""
        broken = self.system.broken_for(key)
        if broken is not None:
            raise SystemSettingsError(f"{key}: cannot compare: argocd-cm {broken}")

    def normalize(self, obj: Manifest, *, live: Manifest | None = None) -> NormalizeResult:
        """A copy of ``obj`` without the fields the matching rules ignore.

        A Secret's values are masks in it (they were before any rule ran).
        """
        key = ResourceKey.of(obj)
        obj, live = _masked_if_secret(key, obj, live)
        scope = Scope(key, "object", (obj, live), live, skips=[])
        doc = self.apply(json_copy(obj), scope)
        return NormalizeResult(doc, [str(s) for s in scope.skips or ()])

    def ignored_paths(self, obj: Manifest, *, live: Manifest | None = None) -> list[Path]:
        """The concrete paths of ``obj`` that :meth:`normalize` removes, in order.

        Found on masked copies of a Secret (so the same as the comparison's); they name
        the same places in ``obj``.
        """
        key = ResourceKey.of(obj)
        obj, live = _masked_if_secret(key, obj, live)
        scope = Scope(key, "object", (obj, live), live, tracker=Tracker())
        rules = self.matching(scope)
        if not rules:
            return []
        self.apply(json_copy(obj), scope, rules)
        assert scope.tracker is not None
        return scope.tracker.removed

    def matching(self, scope: Scope) -> list[Rule]:
        return [r for r in self.rules if r.matches(scope.key)
                and (r.active is None or r.active(scope.sides))]

    def apply(self, doc: Manifest, scope: Scope,
              rules: Sequence[Rule] | None = None) -> Manifest:
        """Remove the ignored fields from ``doc`` in place; use the returned object.

        A jq expression outside the fast path returns a new object instead.
        """
        rules = self.matching(scope) if rules is None else rules
        managers = frozenset().union(*(r.managers for r in rules))
        if managers:
            trees = managed.owned_trees(scope.live, managers)
            doc = self._delete(doc, managed.owned_paths(doc, trees), scope, "managed fields")
        for rule in rules:
            doc = self._apply_rule(rule, doc, scope)
        return doc

    def _apply_rule(self, rule: Rule, doc: Manifest, scope: Scope) -> Manifest:
        for index, (_, tokens) in enumerate(rule.pointers):
            path = pointers.resolve(doc, tokens)
            if path is not None:
                doc = self._delete(doc, [path], scope, f"{rule.label}.jsonPointers[{index}]")
        for index, expr in enumerate(rule.jq):
            try:
                doc = self._apply_jq(expr, doc, scope)
            except JqSkip as e:
                self._skip(scope, f"{rule.label}.jqPathExpressions[{index}] "
                                  f"{_shown(expr.text)}", str(e))
        return doc

    def _apply_jq(self, expr: JqExpression, doc: Manifest, scope: Scope) -> Manifest:
        if scope.tracker is None:
            result = apply_del(expr, doc, timeout=self.jq_timeout)
            assert isinstance(result, dict)
            return result
        paths = del_paths(expr, doc, timeout=self.jq_timeout)
        try:
            delete_paths(doc, paths, scope.tracker)
        except PathError as e:
            raise JqSkip(str(e)) from None
        return doc

    def _delete(self, doc: Manifest, paths: list[Path], scope: Scope, what: str) -> Manifest:
        try:
            delete_paths(doc, paths, scope.tracker)
        except PathError as e:
            self._skip(scope, what, str(e))
        return doc

    @staticmethod
    def _skip(scope: Scope, rule: str, reason: str) -> None:
        if scope.skips is not None:
            scope.skips.append(Skip(rule, scope.key, scope.side, reason))


def _masked_if_secret(key: ResourceKey, obj: Manifest,
                      live: Manifest | None) -> tuple[Manifest, Manifest | None]:
    if not is_secret(key):
        return obj, live
    doc, other = masked(obj, live)
    assert doc is not None
    return doc, other


def compile_rules(specs: Iterable[IgnoreRule | Mapping[str, Any]], *, builtin: bool = True,
                  jq_timeout: float = JQ_TIMEOUT, where: str = "",
                  system: SystemDiff = NO_SYSTEM) -> RuleSet:
    """Compile Argo ``ignoreDifferences`` entries (plus system and built-in rules).

    ``specs``: an Application's :class:`~gitops_ray.types.IgnoreRule` s (parsed when it
    was), or entries as decoded, parsed here. ``where`` names the source (e.g.
    ``"Application demo"``) in error messages. A zero ``jq_timeout`` means the default
    :data:`JQ_TIMEOUT`. Raises :class:`~gitops_ray.errors.ConfigError` for a malformed
    rule, naming its index. An invalid glob is not an error (Argo CD: no match, with a
    warning): that rule matches nothing, and the warning is in :attr:`RuleSet.warnings`.
    ``system`` rules follow the app's own, as Argo's ``NewIgnoreNormalizer`` appends them;
    an identical one is dropped. They and the built-in rules are typed already (checked
    where ``argocd-cm`` was read: :mod:`gitops_ray.diff.system`), so none of them fails here.
    """
    if jq_timeout < 0:
        raise ConfigError(f"{_prefix(where)}jq timeout must not be negative: {jq_timeout}")
    warnings: list[str] = []
    labelled = [(f"{_prefix(where)}ignoreDifferences[{i}]", spec)
                for i, spec in enumerate(specs)]
    own = [_parsed(spec, label) for label, spec in labelled]
    rules = [_compile(rule, label, warnings=warnings)
             for rule, (label, _) in zip(own, labelled, strict=True)]
    rules += [_compile(s.rule, s.label, warnings=warnings) for s in system.ignore
              if s.rule not in own]  # typed and checked where argocd-cm was read
    if system.aggregated_roles:
        rules.append(_compile(AGGREGATED_ROLES.rule, AGGREGATED_ROLES.label,
                              active=aggregated_role))
    if builtin:
        rules += [_compile(b.rule, b.label, active=b.active) for b in BUILTIN_RULES]
    return RuleSet(rules, jq_timeout=jq_timeout or JQ_TIMEOUT, system=system,
                   warnings=warnings)


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def _parsed(spec: IgnoreRule | Mapping[str, Any], label: str) -> IgnoreRule:
    """``spec`` as its type (an Application's are already)."""
    if isinstance(spec, IgnoreRule):
        return spec
    try:
        return IgnoreRule.parse(dict(spec) if isinstance(spec, Mapping) else spec, label)
    except RuleError as e:
        raise ConfigError(str(e)) from None


def _compile(rule: IgnoreRule, label: str, *,
             active: Callable[[Sequence[Manifest | None]], bool] | None = None,
             warnings: list[str] | None = None) -> Rule:
    return Rule(label=label,
                group=_glob(rule.group, "group", label, warnings),
                kind=_glob(rule.kind, "kind", label, warnings),
                name=rule.name, namespace=rule.namespace,
                pointers=tuple(_pointer(p, f"{label}.jsonPointers[{i}]")
                               for i, p in enumerate(rule.json_pointers)),
                jq=tuple(_jq(e, f"{label}.jqPathExpressions[{i}]")
                         for i, e in enumerate(rule.jq_path_expressions)),
                managers=frozenset(rule.managed_fields_managers),
                active=active)


def _glob(pattern: str, field: str, label: str,
          warnings: list[str] | None) -> Callable[[str], bool]:
    """The matcher; an invalid glob matches nothing, with a warning (Argo CD logs it)."""
    try:
        return compile_glob(pattern)
    except GlobError as e:
        reason = str(e).rpartition(": ")[2]  # not the pattern itself: only where it is
        if warnings is not None:
            warnings.append(f"{label}.{field} is not a valid glob ({reason}): "
                            "the rule matches nothing")
        return _nothing


def _nothing(_: str) -> bool:
    return False


def _pointer(text: str, label: str) -> tuple[str, tuple[str, ...]]:
    try:
        return text, pointers.parse_pointer(text)
    except pointers.PointerError as e:
        raise ConfigError(f"{label}: {e}") from None


def _jq(text: str, label: str) -> JqExpression:
    try:
        return compile_jq(text)
    except JqSyntaxError as e:
        raise ConfigError(f"{label} {_shown(text)}: invalid jq expression: {e}") from None


def _shown(text: str) -> str:
    return repr(text if len(text) <= _MAX_SHOWN_EXPR else text[:_MAX_SHOWN_EXPR] + "…")
