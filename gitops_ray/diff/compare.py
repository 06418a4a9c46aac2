"""Compare one desired object with its live counterpart: Synced or OutOfSync, and why.

The desired side is, when the caller could get one, the result of a server-side dry-run
apply of git's object (with the live values kept at ignored paths, exactly what sync
would send). That prediction carries every default the API server and the CRD schema
fill in, so defaults never show up as drift, and it carries every field other managers
own, so the comparison with live can be exact. Without a prediction (the dry run could
not run) we fall back to Argo CD's two-way rule for objects without last-applied state:
live fields git does not mention are not compared, and lists are compared by index.

Inside Ray groups, fields other writers put there and git does not set are in the
prediction (sync keeps them, :mod:`gitops_ray.diff.groupfields`); a field git sets that
another writer changed since our apply is a conflict naming that writer.

Both sides lose what the server writes (:func:`strip_server_fields`; ``status`` as
``argocd-cm``'s ``ignoreResourceStatusField`` says, by default always), Secrets compare
``stringData`` as base64 ``data`` (as Argo CD's Secret normalizer does), and the app's
ignore rules remove the same fields from both. A Secret's values are masks from the start
(:mod:`gitops_ray.secretmask`): no rule, and no normalized side, ever holds one. Ignore
rules need two sides: a missing object is shown whole (that is what sync will create,
``replicas`` included), and so is an extraneous one (what prune will delete). A
resource is OutOfSync when the normalized sides differ ("modified"), when it is in git
but not live ("missing"), or when it is live, tracked by the app, and gone from git
("extraneous"), or "deleting" when such an object already carries a
``deletionTimestamp``: prune's deletion was accepted, but finalizers (Foreground
propagation among them) still hold it, and the app is not in sync with git until it is
gone.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gitops_ray.diff.groupfields import GROUP_FIELDS_ANNOTATION, applies_to, conflicts
from gitops_ray.diff.paths import json_copy, json_equal
from gitops_ray.diff.refusals import Refusal
from gitops_ray.diff.rules import RuleSet, Scope, Skip
from gitops_ray.errors import DiffError
from gitops_ray.secretmask import LAST_APPLIED, is_secret, masked, merge_string_data
from gitops_ray.types import Manifest, ResourceKey, SyncStatus

MODIFIED, MISSING, EXTRANEOUS, DELETING = "modified", "missing", "extraneous", "deleting"
SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "generation",
                   "creationTimestamp", "selfLink", "deletionTimestamp",
                   "deletionGracePeriodSeconds")


@dataclass(frozen=True)
class ResourceDiff:
    """The comparison of one resource; the normalized sides are what the user sees."""

    key: ResourceKey
    status: SyncStatus  # Synced or OutOfSync (Unknown: its AppProject forbids it)
    reason: str  # "" | "modified" | "missing" | "extraneous" | "deleting" | why Unknown
    desired_normalized: Manifest | None
    live_normalized: Manifest | None
    warnings: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    """Fields git sets that another writer changed on live, naming it (a sync makes them
    git's again): :func:`gitops_ray.diff.groupfields.conflicts`."""
    refused: tuple[Refusal, ...] = ()
    """Fields of this change the API server or the operator will refuse
    (:mod:`gitops_ray.diff.refusals`): a sync stops before its first write."""

    @property
    def out_of_sync(self) -> bool:
        return self.status == SyncStatus.OUT_OF_SYNC


@dataclass(frozen=True)
class AppDiff:
    """All resources of one app; the app is OutOfSync if any resource is."""

    resources: list[ResourceDiff] = field(default_factory=list)
    unknown: bool = False  # not compared at all (e.g. its AppProject forbids the app)

    @functools.cached_property
    def status(self) -> SyncStatus:
        """OutOfSync if any resource is; else Unknown if any resource (or the app) is.

        Once per diff (its resources are not changed after it is made).
        """
        if self.unknown:
            return SyncStatus.UNKNOWN
        if any(r.out_of_sync for r in self.resources):
            return SyncStatus.OUT_OF_SYNC
        if any(r.status == SyncStatus.UNKNOWN for r in self.resources):
            return SyncStatus.UNKNOWN
        return SyncStatus.SYNCED

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.resources for w in r.warnings]

    @property
    def conflicts(self) -> list[str]:
        return [f"{r.key}: {c}" for r in self.resources for c in r.conflicts]

    @property
    def refusals(self) -> list[Refusal]:
        return [f for r in self.resources for f in r.refused]


def strip_server_fields(obj: Manifest) -> Manifest:
    """A copy of ``obj`` without the fields the API server writes (``obj`` is untouched).

    Only the top level, ``metadata`` and its annotations are copied; the rest is shared.
    """
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = meta = dict(meta)
        if isinstance(meta.get("annotations"), dict):
            meta["annotations"] = dict(meta["annotations"])
    _strip(out)
    return out


def _strip(doc: Manifest, *, status: bool = True) -> None:
    """:func:`strip_server_fields` in place, on a document we own."""
    if status:
        doc.pop("status", None)
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return
    for name in SERVER_METADATA:
        meta.pop(name, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
        annotations.pop(GROUP_FIELDS_ANNOTATION, None)
    for name in ("annotations", "labels"):
        if name in meta and not meta[name]:
            del meta[name]


def compare(*, desired: Manifest | None, predicted: Manifest | None,
            live: Manifest | None, rules: RuleSet) -> ResourceDiff:
    """Compare git's object (or its dry-run prediction) with the live object."""
    target = predicted if predicted is not None else desired
    anchor = desired if desired is not None else target if target is not None else live
    if anchor is None:
        raise DiffError("compare() needs a desired or a live object, got neither")
    key = ResourceKey.of(anchor)
    rules.check(key)
    if is_secret(key):  # before any rule runs (module docstring); `predicted is live` kept
        desired, predicted, live = masked(desired, predicted, live)
        target = predicted if predicted is not None else desired
    skips: list[Skip] = []
    sides = (desired, predicted, live)
    if predicted is not None and live is not None and (predicted is live
                                                       or json_equal(predicted, live)):
        return _as_applied(key, live, sides, rules)
    both = target is not None and live is not None
    want = _normalized(target, Scope(key, "desired", sides, live, skips=skips), rules,
                       both=both)
    have = _normalized(live, Scope(key, "live", sides, live, skips=skips), rules, both=both)
    if predicted is None and want is not None and have is not None:
        have = remove_unmentioned(want, have)
    status, reason = _status(want, have)
    if reason == EXTRANEOUS and live is not None and _deleting(live):
        reason = DELETING
    clashes = conflicts(desired, predicted, live) if reason == MODIFIED and applies_to(live) \
        else []
    return ResourceDiff(key, status, reason, want, have, tuple(_warnings(skips)),
                        tuple(clashes))


def _as_applied(key: ResourceKey, live: Manifest, sides: tuple[Manifest | None, ...],
                rules: RuleSet) -> ResourceDiff:
    """The comparison when the prediction is live itself, or equal to it, normalized once.

    The prediction is our own apply's answer, live as our last apply of this content
    left it (the caller knows which), or a dry run that answered with live exactly (a
    no-op apply does, ``managedFields`` included). Both sides would be the same
    normalization of equal objects: Synced, and every rule skipped on one side is
    skipped on both.
    """
    skips: list[Skip] = []
    have = _normalized(live, Scope(key, "live", sides, live, skips=skips), rules, both=True)
    both_sides = [dataclasses.replace(s, side="desired") for s in skips] + skips
    return ResourceDiff(key, SyncStatus.SYNCED, "", have, have, tuple(_warnings(both_sides)))


def _normalized(obj: Manifest | None, scope: Scope, rules: RuleSet, *,
                both: bool) -> Manifest | None:
    """One copy of ``obj``, then everything that must not count as a difference.

    Ignore rules need both sides (see the module docstring); known type fields and
    whether ``/status`` counts are the system settings' (:mod:`gitops_ray.diff.system`).
    """
    if obj is None:
        return None
    doc: Manifest = json_copy(obj)
    if both:
        doc = rules.apply(doc, scope)
    rules.normalize_known_types(doc, scope.key)
    _strip(doc, status=rules.drops_status(scope.key))
    if is_secret(scope.key):
        merge_string_data(doc)  # masks already stand for the base64 form
    return doc


def _status(want: Manifest | None, have: Manifest | None) -> tuple[SyncStatus, str]:
    if have is None:
        return SyncStatus.OUT_OF_SYNC, MISSING
    if want is None:
        return SyncStatus.OUT_OF_SYNC, EXTRANEOUS
    if json_equal(want, have):
        return SyncStatus.SYNCED, ""
    return SyncStatus.OUT_OF_SYNC, MODIFIED


def _deleting(live: Manifest) -> bool:
    return bool((live.get("metadata") or {}).get("deletionTimestamp"))


def _warnings(skips: Iterable[Skip]) -> list[str]:
    """One warning per rule, object and reason, naming both sides when both failed."""
    sides: dict[tuple[str, ResourceKey, str], list[str]] = {}
    for skip in skips:
        sides.setdefault((skip.rule, skip.key, skip.reason), []).append(skip.side)
    return [str(Skip(rule, key, " and ".join(dict.fromkeys(s)), reason))
            for (rule, key, reason), s in sides.items()]


def remove_unmentioned(config: Any, live: Any) -> Any:
    """``live`` restricted to the map keys ``config`` has (Argo's ``RemoveMapFields``).

    Lists are walked by index; live items beyond ``config``'s length are kept so that
    they show up as a difference.
    """
    if isinstance(config, dict) and isinstance(live, dict):
        return {k: remove_unmentioned(v, live[k]) for k, v in config.items() if k in live}
    if isinstance(config, list) and isinstance(live, list):
        return [remove_unmentioned(config[i], item) if i < len(config) else item
                for i, item in enumerate(live)]
    return live
