"""``knownTypeFields``: compare the Kubernetes types a custom resource embeds, canonically.

A RayCluster embeds ``PodTemplateSpec``s, but the API server does not canonicalise
quantities inside a custom resource: git's ``cpu: 2000m`` stays ``2000m`` while the
operator (or another tool) may write ``"2"``, and the two look different. Argo CD's
``resource.customizations.knownTypeFields.<group>_<kind>`` names such sub-trees and their
Kubernetes type; its normaliser (``util/argo/normalizers/knowntypes_normalizer.go``)
re-marshals them through the Go type on both sides. We re-format what that changes for
comparison: every resource quantity in the sub-tree, in its canonical spelling
(:func:`gitops_ray.quantity.canonical_quantity`).

Paths are Argo's: dot-separated field names, and a list met on the way is iterated
(``spec.workerGroupSpecs.template.spec`` reaches every worker group's pod spec). A type
we do not know is a warning naming the key and the type, and the entry is skipped (Argo
logs the same and skips it). A value that is not a valid quantity is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitops_ray.quantity import canonical_quantity

Walker = Callable[[Any], Any]


def _quantity(value: Any) -> Any:
    canonical = canonical_quantity(value)
    return value if canonical is None else canonical


def _quantity_map(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: _quantity(v) for k, v in value.items()}


def _fields(**walkers: Walker) -> Walker:
    """A walker for a struct whose named fields have their own walkers."""
    def walk(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: walkers[k](v) if k in walkers else v for k, v in value.items()}
    return walk


def _each(walker: Walker) -> Walker:
    def walk(value: Any) -> Any:
        return [walker(v) for v in value] if isinstance(value, list) else value
    return walk


_resources = _fields(limits=_quantity_map, requests=_quantity_map)
_container = _fields(resources=_resources)
_volume = _fields(emptyDir=_fields(sizeLimit=_quantity))
_pod_spec = _fields(containers=_each(_container), initContainers=_each(_container),
                    ephemeralContainers=_each(_container), overhead=_quantity_map,
                    resources=_resources, volumes=_each(_volume))
_pod_template = _fields(spec=_pod_spec)

KNOWN_TYPES: dict[str, Walker] = {
    "core/Quantity": _quantity,
    "core/v1/ResourceRequirements": _resources,
    "core/v1/VolumeResourceRequirements": _resources,
    "core/v1/Container": _container,
    "core/v1/EphemeralContainer": _container,
    "core/v1/Volume": _volume,
    "core/v1/PodSpec": _pod_spec,
    "core/v1/PodTemplateSpec": _pod_template,
}
"""The types gitops-ray re-formats, and how (only quantities differ in spelling)."""


@dataclass(frozen=True)
class KnownTypeField:
    """One ``{field, type}`` entry, compiled."""

    path: tuple[str, ...]
    type: str
    walker: Walker


def compile_known_fields(entries: Any, *, label: str) -> tuple[list[KnownTypeField], list[str]]:
    """The usable entries of one ``knownTypeFields`` value, and a warning per skipped one."""
    if not isinstance(entries, list):
        return [], [f"{label}: expected a list of {{field, type}} entries"]
    fields, warnings = [], []
    for index, entry in enumerate(entries):
        where = f"{label}[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("field"), str) \
                or not isinstance(entry.get("type"), str) or not entry["field"]:
            warnings.append(f"{where}: expected a mapping with string 'field' and 'type'")
            continue
        walker = KNOWN_TYPES.get(entry["type"])
        if walker is None:
            warnings.append(f"{where}: type {entry['type'][:100]!r} is not supported "
                            f"(supported: {', '.join(sorted(KNOWN_TYPES))}); entry skipped")
            continue
        fields.append(KnownTypeField(tuple(entry["field"].split(".")), entry["type"], walker))
    return fields, warnings


def normalize_known_types(obj: dict[str, Any], fields: tuple[KnownTypeField, ...]) -> None:
    """Re-format every field of ``obj`` (a private copy) that ``fields`` name, in place."""
    for field in fields:
        _apply(obj, field.path, field.walker)


def _apply(node: dict[str, Any], path: tuple[str, ...], walker: Walker) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    value = node[head]
    if isinstance(value, list):  # Argo iterates a list met anywhere on the path
        for index, item in enumerate(value):
            if isinstance(item, dict):
                if rest:
                    _apply(item, rest, walker)
                else:
                    value[index] = walker(item)
    elif not rest:
        node[head] = walker(value)
    elif isinstance(value, dict):
        _apply(value, rest, walker)
