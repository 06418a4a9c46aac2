"""Validate Ray objects before anything of their app is applied.

KubeRay's validating webhook is optional and its operator only logs an Event for an invalid
spec, writing no status at all (``ray-operator/controllers/ray/utils/validation.go`` in
https://github.com/ray-project/kuberay). A bad RayCluster applied from git would sit
there silently broken, so we refuse the whole app's sync with a precise message instead,
before any object of that app is written. Messages name the object, group and field,
never a field's value (they end up in Events and logs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gitops_ray.types import Manifest, ResourceKey

MAX_RAYCLUSTER_NAME = 53
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_EMBEDDED = {"RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig")}


def validate_ray_objects(objs: Iterable[Manifest]) -> list[str]:
    """Every problem found in the Ray objects of ``objs`` (empty when all are valid)."""
    problems: list[str] = []
    for obj in objs:
        group, _, _ = str(obj.get("apiVersion", "")).partition("/")
        if group != "ray.io":
            continue
        where = str(ResourceKey.of(obj))
        kind = obj.get("kind")
        if kind == "RayCluster":
            problems += _name_problems(where, obj)
            problems += cluster_spec_problems(where, obj.get("spec") or {})
        elif kind in _EMBEDDED:
            section, field = _EMBEDDED[str(kind)]
            spec = (obj.get(section) or {}).get(field)
            if spec is not None:
                problems += cluster_spec_problems(f"{where} {field}", spec)
    return problems


def _name_problems(where: str, obj: Manifest) -> list[str]:
    name = str((obj.get("metadata") or {}).get("name", ""))
    problems = []
    if len(name) > MAX_RAYCLUSTER_NAME:
        problems.append(f"{where}: name is {len(name)} characters; KubeRay allows at most "
                        f"{MAX_RAYCLUSTER_NAME}")
    if not _DNS1035.match(name):
        problems.append(f"{where}: name must be a DNS-1035 label (lower-case letters, digits "
                        "and '-', starting with a letter)")
    return problems


def cluster_spec_problems(where: str, spec: dict[str, Any]) -> list[str]:
    """Problems in one ``RayClusterSpec``: containers, unique groups, replica bounds."""
    head = spec.get("headGroupSpec") or {}
    problems = _container_problems(f"{where}: headGroupSpec", head)
    seen: set[str] = set()
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        name = str(group.get("groupName", ""))
        label = f"{where}: workerGroupSpecs[{index}] ({name or 'no groupName'})"
        if not name:
            problems.append(f"{label}: groupName is required")
        elif name in seen:
            problems.append(f"{label}: groupName {name!r} is used by more than one group")
        seen.add(name)
        problems += _container_problems(label, group)
        problems += _replica_problems(label, group)
    return problems


def _container_problems(label: str, group: dict[str, Any]) -> list[str]:
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
    return [] if containers else [f"{label}: the pod template needs at least one container"]


def _replica_problems(label: str, group: dict[str, Any]) -> list[str]:
    problems = []
    lo, hi = group.get("minReplicas", 0), group.get("maxReplicas", 2147483647)
    for field in ("replicas", "minReplicas", "maxReplicas"):
        value = group.get(field)
        if value is not None and (not isinstance(value, int) or value < 0):
            got = "a negative number" if isinstance(value, int) else _kind_of(value)
            problems.append(f"{label}: {field} must be a non-negative integer, got {got}")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        problems.append(f"{label}: minReplicas ({lo}) is greater than maxReplicas ({hi})")
    return problems


def _kind_of(value: object) -> str:
    """A value's JSON type, for messages that must not quote the value itself."""
    names = {str: "a string", float: "a fractional number", bool: "a boolean",
             dict: "an object", list: "an array"}
    return names.get(type(value), type(value).__name__)
