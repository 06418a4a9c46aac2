"""The apply a sync would make, prepared and sent as a server-side dry run.

Split from the pipeline (issue 35): the comparison predicts what the sync's apply leaves
by preparing the very body the sync applies (:func:`prepare`) and
dry-running it, so the apply preparation lives here, beside the sync that applies it.
An object kubectl or Argo CD applied shows what sync's takeover will remove
(:mod:`gitops_ray.sync.takeover`).
"""

from __future__ import annotations

from collections.abc import Callable

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff import RuleSet
from gitops_ray.diff.groupfields import keep_others, with_memory
from gitops_ray.diff.paths import json_equal
from gitops_ray.diff.refusals import Refusal, server_refusals
from gitops_ray.errors import DiffError
from gitops_ray.kube import Conflict, Invalid, Kube, KubeError
from gitops_ray.sync.merge import keep_live_values
from gitops_ray.sync.request import IgnoreRules
from gitops_ray.sync.takeover import predicted_after_takeover
from gitops_ray.types import Manifest, ResourceKey

PREDICT_ATTEMPTS = 3
"""Dry runs of one object per comparison when it keeps changing under them (409)."""

Get = Callable[[str, str, str, str], "Manifest | None"]
"""(apiVersion, kind, namespace, name) -> the object read now, or None."""


class Refused(Exception):
    """A dry run the API server refused (422): what it refused, for the diff to say."""

    def __init__(self, refusals: tuple[Refusal, ...]) -> None:
        super().__init__()
        self.refusals = refusals


def predict(kube: Kube, get: Get, obj: Manifest, live: Manifest, rules: RuleSet
            ) -> tuple[Manifest | None, bool, Manifest]:
    """Server-side dry run of what sync would write; a no-op?; the live it predicted on.

    Not cached on its own: the pipeline runs it only when its per-object diff memo missed,
    which is keyed by the same live ``resourceVersion``. A no-op (the pipeline's "Proven
    by a dry run"): the API server answers with live itself, ``managedFields`` and all,
    and there is nothing for a takeover to remove. The dry run carries live's
    ``resourceVersion``: a prediction made on a newer object than the one it is compared
    with (another writer, Kueue say, wrote in between) would show that writer's change as
    drift, so a 409 reads the object again with ``get`` and predicts on that (a few times
    at most). Raises :class:`Refused` when the API server's rules refuse the change.
    """
    for _ in range(PREDICT_ATTEMPTS):
        body = prepare(obj, live, rules)
        try:
            raw = kube.apply(body, field_manager=FIELD_MANAGER, force=True, dry_run=True)
        except Conflict:
            fresh = get(*_coordinates(live))
            if fresh is None:
                break
            live = fresh
            continue
        except Invalid as e:  # a rule of the CRD (CEL) or the type refuses the change
            raise Refused(server_refusals(ResourceKey.of(obj), e.details, str(e))) from e
        except KubeError as e:
            raise DiffError(f"{ResourceKey.of(obj)}: server-side dry run failed: {e}") from e
        predicted = predicted_after_takeover(raw, body=body, live=live)
        return predicted, predicted is raw and json_equal(raw, live), live
    raise DiffError(f"{ResourceKey.of(obj)}: server-side dry run failed: the object "
                    f"kept changing ({PREDICT_ATTEMPTS} attempts)")


def _coordinates(obj: Manifest) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return (str(obj["apiVersion"]), str(obj["kind"]), str(meta.get("namespace") or ""),
            str(meta["name"]))


def prepare(obj: Manifest, live: Manifest | None, rules: IgnoreRules) -> Manifest:
    """The body to write for ``obj`` given ``live``.

    That is git's object with the live values at ignored paths and the fields other
    writers put in its Ray groups (:mod:`gitops_ray.diff.groupfields`), carrying live's
    ``resourceVersion`` as the write precondition, and never a ``status``: on a kind
    without the status subresource (Argo CD's Application is one) applying it would make
    us an owner of another writer's status, whose next apply then conflicts; and what an
    ignore rule on ``/status`` copies from live is exactly that writer's status. (Argo
    CD's ``RespectIgnoreDifferences`` drops ``status`` the same way.)
    """
    if live is None:
        return with_memory(_without_status(obj), obj)
    body = keep_live_values(obj, live, live_paths=rules.ignored_paths(live, live=live),
                            desired_paths=rules.ignored_paths(obj, live=live))
    body = with_memory(keep_others(body, live), obj)
    body.pop("status", None)
    body.setdefault("metadata", {})["resourceVersion"] = live["metadata"]["resourceVersion"]
    return body


def _without_status(obj: Manifest) -> Manifest:
    return {k: v for k, v in obj.items() if k != "status"} if "status" in obj else obj
