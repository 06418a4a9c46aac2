"""Take over objects that kubectl or Argo CD applied before us, leaving nothing behind.

Why: server-side apply removes a field only when the applying manager owned it and no
longer applies it. An object last written by ``kubectl apply`` (client-side) or by Argo
CD is owned by *their* managers, so after we take it over a field that git drops would
stay live forever, while the diff (a dry run of our apply) shows nothing to do. client-go
solves this with ``csaupgrade.UpgradeManagedFields`` (``k8s.io/client-go/util/csaupgrade``),
which ``kubectl apply --server-side`` and Flux use: the named managers' field sets are
merged into the new manager's ``Apply`` entry and their entries dropped, so the next apply
removes what it no longer sends. :func:`migrated_managed_fields` is that transformation
(pure), :func:`take_over` sends it before our first apply of such an object.

What moves is only :data:`PREVIOUS_APPLIERS`' fields (subresource none, as csaupgrade):
the Ray autoscaler (``python-requests``), the KubeRay operator or a human's
``kubectl edit`` keep theirs, so the apply cannot remove or take what they wrote.

The patch replaces ``/metadata/managedFields`` and *replaces* ``/metadata/resourceVersion``
with the value we read, exactly as csaupgrade does: the API server then treats it as a
precondition and answers 409 when anybody wrote in between (a ``test`` op would fail as
a 422 instead); the caller re-reads and decides again, so a concurrent writer wins.

The last-applied annotation: it is dropped, by the apply itself. Its field belongs to the
client-side applier, so after the migration it is ours and our next apply (which does not
send it) removes it. That is also what Flux does (it removes the annotation on takeover):
a stale annotation would make a later ``kubectl apply`` or Argo CD three-way diff against
a configuration nobody applies any more.

**Until the migration happens** (a diff, a dry run, the comparison before a sync) the
server-side dry run cannot show what the takeover will remove: an apply request may not
carry ``managedFields``, and a dry-run patch of them is forgotten before the dry-run
apply. :func:`predicted_after_takeover` therefore removes from the dry run's prediction
what the migrated apply will remove, three-way as Argo CD does with the last-applied
configuration: a field is removed when a previous applier applied it (it is in
last-applied, or in a previous applier's own server-side ``Apply`` entry), git's
body no longer has it, it is still there, and no other manager owns it or anything
under it. Defaults the API server filled in at creation are owned by the client-side
manager too but are not in last-applied, so they are (rightly) not shown: they come
back as defaults. The prediction is therefore never more than the sync removes, so
auto-sync cannot loop on a removal it will not make. Ignored paths need nothing here:
sync copies their live values into the body (:mod:`gitops_ray.sync.merge`), and the
comparison drops them from both sides.

A limit of the API server, not ours: removing the *last* key of a map whose CRD schema
says ``type: object`` is rejected ("must be of type object: null") by servers whose
structured-merge-diff predates kubernetes-sigs/structured-merge-diff#306; ``kubectl
apply --server-side`` fails its own migration the same way. The sync then fails with that
message (the ownership is already ours; git keeping one key, or ``{}`` removed from git
by hand, resolves it).

**Status is never ours**: our entry's ``f:status`` is released (left unowned, so its
value stays) in the same patch, for objects on which an earlier version of gitops-ray
applied ``status`` (see :func:`gitops_ray.sync.dryrun.prepare`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff.managed import locate
from gitops_ray.diff.paths import Path, delete_paths
from gitops_ray.kube import Kube
from gitops_ray.types import Manifest

PREVIOUS_APPLIERS = ("kubectl-client-side-apply", "before-first-apply", "argocd-controller")
"""The managers whose fields we take over, each as ``Update`` and as ``Apply``.

* ``kubectl-client-side-apply``: ``kubectl apply`` (client-side); csaupgrade's and
  gitops-engine's default (``DefaultClientSideApplyMigrationManager`` in
  ``gitops-engine/pkg/sync/common/types.go``).
* ``before-first-apply``: the API server's name for the owner of every field of an object
  written before managed fields existed (``k8s.io/apimachinery/pkg/util/managedfields``,
  ``internal/skipnonapplied.go``), the other name Flux's migration moves.
* ``argocd-controller``: Argo CD's ``common.ArgoCDSSAManager`` (``common/common.go`` in
  argo-cd v3.2.11), which its sync passes to both kinds of apply
  (``controller/sync.go`` ``WithServerSideApplyManager``; gitops-engine
  ``resource_ops.go`` sets it as ``--field-manager`` of the client-side apply too): an
  ``Update`` entry after Argo CD's default apply, an ``Apply`` entry after
  ``ServerSideApply=true``.
"""

OPERATIONS = ("Update", "Apply")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Entry = dict[str, Any]
Fields = dict[str, Any]


# -- field sets (fieldsV1 tries) ---------------------------------------------------------

def union_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> Fields:
    """The union of two ``fieldsV1`` sets (``fieldpath.Set.Union``).

    A node is ``{}`` when it is a member with no children, and carries ``"."`` when it is
    a member with children; so a member in one set and a parent in the other becomes a
    parent with ``"."``.
    """
    out: Fields = {}
    for key in sorted(set(a) | set(b)):
        if key == ".":
            out["."] = {}
            continue
        left, right = a.get(key), b.get(key)
        if left is None or right is None:
            out[key] = copy.deepcopy(left if right is None else right)
            continue
        member = _member(left) or _member(right)
        merged = union_fields({k: v for k, v in left.items() if k != "."},
                              {k: v for k, v in right.items() if k != "."})
        out[key] = {".": {}, **merged} if merged and member else merged
    return out


def _member(node: Mapping[str, Any]) -> bool:
    return not node or "." in node


# -- the migration (pure) ----------------------------------------------------------------

def _is(entry: Entry, manager: str, operation: str) -> bool:
    return (entry.get("manager") == manager and entry.get("operation") == operation
            and not entry.get("subresource"))


def _first(entries: list[Entry], test: Callable[[Entry], bool]) -> int | None:
    return next((i for i, e in enumerate(entries) if test(e)), None)


def _upgraded(entries: list[Entry], manager: str, operation: str) -> list[Entry]:
    """One (manager, operation) as csaupgrade's ``upgradedManagedFields`` does it."""
    target = _first(entries, lambda e: _is(e, FIELD_MANAGER, "Apply"))
    if target is None:
        target = _first(entries, lambda e: _is(e, manager, operation))
        if target is None:
            return entries
        entries[target] = {**entries[target], "manager": FIELD_MANAGER, "operation": "Apply"}
    ours = entries[target]
    source = _first(entries, lambda e: _is(e, manager, operation)
                    and e.get("apiVersion") == ours.get("apiVersion"))
    if source is not None:
        fields = union_fields(ours.get("fieldsV1") or {}, entries[source].get("fieldsV1") or {})
        entries[target] = {**ours, "fieldsV1": fields}
    return [e for e in entries if not _is(e, manager, operation)]


def migrated_managed_fields(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` with :data:`PREVIOUS_APPLIERS`' fields moved to our ``Apply`` entry.

    As ``csaupgrade.UpgradeManagedFields``: merged into our entry (or, when we have none,
    the most recent previous entry becomes ours), one entry of the same ``apiVersion``
    merged, every other entry of that manager dropped. Also releases ``f:status`` from
    our entry (see the module docstring).
    """
    out = [copy.deepcopy(dict(e)) for e in entries]
    for manager in PREVIOUS_APPLIERS:
        for operation in OPERATIONS:
            out = _upgraded(out, manager, operation)
    return [_without_status(e) if _is(e, FIELD_MANAGER, "Apply") else e for e in out]


def _without_status(entry: Entry) -> Entry:
    fields = entry.get("fieldsV1")
    if not isinstance(fields, dict) or "f:status" not in fields:
        return entry
    return {**entry, "fieldsV1": {k: v for k, v in fields.items() if k != "f:status"}}


def _entries(obj: Manifest) -> list[Entry]:
    return [e for e in (obj.get("metadata") or {}).get("managedFields") or []
            if isinstance(e, dict)]


def needs_takeover(live: Manifest | None) -> bool:
    """Whether ``live`` names a previous applier, or we own its ``status``."""
    if live is None:
        return False
    entries = _entries(live)
    return migrated_managed_fields(entries) != entries


def takeover_patch(live: Manifest) -> list[dict[str, Any]] | None:
    """The JSON patch that migrates ``live``'s ownership, or ``None``: nothing to do."""
    entries = _entries(live)
    migrated = migrated_managed_fields(entries)
    if migrated == entries:
        return None
    return [{"op": "replace", "path": "/metadata/managedFields", "value": migrated},
            {"op": "replace", "path": "/metadata/resourceVersion",
             "value": live["metadata"]["resourceVersion"]}]


def take_over(kube: Kube, live: Manifest) -> Manifest:
    """Migrate ``live``'s field ownership to us; the object as it is afterwards.

    Raises :class:`~gitops_ray.kube.Conflict` when somebody wrote since ``live`` was read:
    the caller re-reads and decides again.
    """
    patch = takeover_patch(live)
    if patch is None:
        return live
    meta = live["metadata"]
    return kube.patch(str(live["apiVersion"]), str(live["kind"]), name=str(meta["name"]),
                      namespace=meta.get("namespace"), patch=patch)


# -- what the takeover will remove (pure) ------------------------------------------------

def predicted_after_takeover(predicted: Manifest, *, body: Manifest,
                             live: Manifest) -> Manifest:
    """``predicted`` (a dry run of ``body``) without what the migrated apply removes.

    See the module docstring: fields a previous applier applied, gone from ``body``,
    owned by nobody else.
    """
    entries = _entries(live)
    previous = [e for e in entries
                if e.get("manager") in PREVIOUS_APPLIERS and not e.get("subresource")]
    if not previous:
        return predicted
    others = [e for e in entries if e not in previous and not _is(e, FIELD_MANAGER, "Apply")]
    applied = _union(e for e in previous if e.get("operation") == "Apply")
    paths = list(_removed(_union(previous), _Sides(
        body=body, out=predicted, others=_union(others), applied=applied,
        last=_last_applied(live))))
    if not paths:
        return predicted
    result: Manifest = delete_paths(copy.deepcopy(predicted), paths)
    return result


def _union(entries: Iterable[Entry]) -> Fields:
    out: Fields = {}
    for entry in entries:
        fields = entry.get("fieldsV1")
        if isinstance(fields, dict):
            out = union_fields(out, fields)
    return out


def _last_applied(live: Manifest) -> Any:
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


class _Sides:
    """The nodes the walk descends in step: one per document or field set."""

    def __init__(self, *, body: Any, out: Any, others: Any, applied: Any, last: Any,
                 path: Path = ()) -> None:
        self.body, self.out, self.others = body, out, others
        self.applied, self.last, self.path = applied, last, path

    def child(self, element: str) -> _Sides | None:
        """The sides under ``element``, or ``None`` when the prediction lacks it."""
        found = locate(element, self.out)
        if found is None:
            return None
        key, out = found
        return _Sides(body=_value(locate(element, self.body)), out=out,
                      others=_sub(self.others, element), applied=_sub(self.applied, element),
                      last=_value(locate(element, self.last)), path=(*self.path, key))


def _value(found: tuple[str | int, Any] | None) -> Any:
    return None if found is None else found[1]


def _sub(fields: Any, element: str) -> Any:
    return fields.get(element) if isinstance(fields, dict) else None


def _removed(tree: Mapping[str, Any], sides: _Sides) -> Iterator[Path]:
    """Concrete paths in the prediction of the fields the apply will remove."""
    for element, children in tree.items():
        if element == "." or not isinstance(children, dict):
            continue
        under = sides.child(element)
        if under is None:
            continue
        gone = under.body is None and under.others is None
        if gone and (under.last is not None or under.applied is not None):
            yield under.path
        elif set(children) - {"."}:
            yield from _removed(children, under)
