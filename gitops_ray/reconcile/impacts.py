"""Each changed Ray object of a comparison, handed to :mod:`gitops_ray.health.impact`.

Why this exists: the prediction is pure, but it needs what a diff does not keep: the
whole live object (its ``status`` names a RayService's clusters and a RayJob's phase;
ignore rules may have taken the autoscaler's ``replicas`` off both normalized sides) and
the live Pods of the RayClusters involved. The pipeline reads them here, only for the
OutOfSync Ray objects of a pass (few), from its live source and its Pod source (the watch
cache in the controller, bounded LISTs in the CLI).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gitops_ray.diff import ResourceDiff
from gitops_ray.diff.ray import RAY_GROUP
from gitops_ray.health.impact import RAY_KINDS, Impact, clusters_of, predict
from gitops_ray.types import Manifest, ResourceKey

MAX_PREDICTED = 50
"""Changed Ray objects predicted per comparison (each may cost a read of its Pods)."""


@dataclass(frozen=True)
class ImpactReads:
    """``live(key, apiVersion)``: the whole live object; ``pods(namespace, cluster)``."""

    live: Callable[[ResourceKey, str], Manifest | None]
    pods: Callable[[str, str], Sequence[Manifest]]


def impacts_of(diffs: Iterable[ResourceDiff], reads: ImpactReads) -> tuple[Impact, ...]:
    """What the operator will do with each OutOfSync Ray object that git still has."""
    out: list[Impact] = []
    for diff in diffs:
        if len(out) >= MAX_PREDICTED:
            break
        if not _predictable(diff):
            continue
        impact = _one(diff, reads)
        if impact is not None:
            out.append(impact)
    return tuple(out)


def _predictable(diff: ResourceDiff) -> bool:
    return (diff.out_of_sync and diff.desired_normalized is not None
            and diff.key.group == RAY_GROUP and diff.key.kind in RAY_KINDS)


def _one(diff: ResourceDiff, reads: ImpactReads) -> Impact | None:
    desired = diff.desired_normalized or {}
    full = None if diff.live_normalized is None else \
        reads.live(diff.key, str(desired.get("apiVersion", "")))
    live = None if diff.live_normalized is None else \
        {**diff.live_normalized, "status": (full or {}).get("status")}
    pods = {name: reads.pods(diff.key.namespace, name) for name in clusters_of(live)}
    return predict(desired, live, pods, full=full)
