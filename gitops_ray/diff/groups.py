"""What a sync would change in each worker group of a Ray object, for people reading JSON.

A JSON Patch of a RayCluster addresses worker groups by list index
(``/spec/workerGroupSpecs/3/template/spec/containers/0/...``), which says little to the
person who wrote ``groupName: gpu``. This summary keys the changes by group name, with
readable paths relative to the group and the old and new values::

    {"gpu": {"changed": {"template.spec.containers[0].resources.limits.cpu":
                             {"from": "2", "to": "4"}},
             "added": {"rayStartParams.num-gpus": "1"}},
     "spot": {"group": "added"}}

Groups are matched by ``groupName`` (their order does not matter, and KubeRay requires the
names to be unique). ``from`` is live, ``to`` is git. The autoscaler's fields
(``replicas``, ``scaleStrategy``) never appear: they are not git's to change. The inputs
are the normalized sides of a comparison, so whatever else the app's ``ignoreDifferences``
ignores is left out too. Groups without changes, and empty sections, are not listed.

DeepDiff does the comparison; it is imported on first use because importing it takes
about half a second, which no other command should pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitops_ray.diff.ray import AUTOSCALER_FIELDS, RAY_GROUP
from gitops_ray.types import Manifest, split_api_version

CLUSTER_SPEC = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"),
                "RayService": ("spec", "rayClusterConfig"),
                "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec")}
"""Where each Ray kind keeps its RayClusterSpec (the one holding ``workerGroupSpecs``)."""
_CHANGED = ("values_changed", "type_changes")
_ADDED = ("dictionary_item_added", "iterable_item_added")
_REMOVED = ("dictionary_item_removed", "iterable_item_removed")
_PLAIN_KEY = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")

GroupChanges = dict[str, Any]


def has_worker_groups(group: str, kind: str) -> bool:
    """Whether objects of this kind carry worker groups (RayCluster, RayJob, RayService)."""
    return group == RAY_GROUP and kind in CLUSTER_SPEC


def worker_group_changes(desired: Manifest | None, live: Manifest | None
                         ) -> dict[str, GroupChanges]:
    """The changes from ``live`` to ``desired`` per worker group name (see module docstring).

    ``None`` stands for a missing side: every group of the other side is added or removed.
    """
    either = desired or live or {}
    group, _ = split_api_version(str(either.get("apiVersion", "")))
    kind = str(either.get("kind", ""))
    if not has_worker_groups(group, kind):
        return {}
    path = CLUSTER_SPEC[kind]
    want, have = _groups(desired, path), _groups(live, path)
    out: dict[str, GroupChanges] = {}
    for name in sorted(want.keys() | have.keys()):
        if name not in have:
            out[name] = {"group": "added"}
        elif name not in want:
            out[name] = {"group": "removed"}
        elif have[name] != want[name]:
            changes = _compare(have[name], want[name])
            if changes:
                out[name] = changes
    return out


def _groups(obj: Manifest | None, path: Sequence[str]) -> dict[str, dict[str, Any]]:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    groups = node.get("workerGroupSpecs") if isinstance(node, dict) else None
    if not isinstance(groups, list):
        return {}
    return {str(g.get("groupName") or f"#{i}"): g for i, g in enumerate(groups)
            if isinstance(g, dict)}


def _compare(live: dict[str, Any], desired: dict[str, Any]) -> GroupChanges:
    from deepdiff import DeepDiff

    tree = DeepDiff(live, desired, view="tree",
                    exclude_paths=[f"root['{field}']" for field in AUTOSCALER_FIELDS])
    changes: GroupChanges = {"changed": {}, "added": {}, "removed": {}}
    for report, levels in tree.items():
        for level in levels:
            where = readable_path(level.path(output_format="list"))
            if report in _CHANGED:
                changes["changed"][where] = {"from": level.t1, "to": level.t2}
            elif report in _ADDED:
                changes["added"][where] = level.t2
            elif report in _REMOVED:
                changes["removed"][where] = level.t1
    return {section: found for section, found in changes.items() if found}


def readable_path(steps: Sequence[str | int]) -> str:
    """``["template", "spec", "containers", 0, "image"]`` -> ``template.spec.containers[0].image``.

    Keys that are not plain words (``ray.io/node-type``) are quoted: ``labels["ray.io/x"]``.
    """
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step and set(step) <= _PLAIN_KEY:
            out += f".{step}" if out else step
        else:
            out += f'["{step}"]'
    return out
