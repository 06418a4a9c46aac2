"""Shape the pod templates of Ray objects: resources, ``rayStartParams``, facts, patches.

A head or worker group opts in by naming a shape on its pod template::

    template:
      metadata:
        annotations: {gitops-ray.io/instance-type: 8CPU-32GB-1xT4, gitops-ray.io/market-type: SPOT}

(any ``gitops-ray.io/`` key of :data:`keys.OPT_IN`, as annotation or label, opts in). For
an opted-in group:

1. The Ray container (the first container, as KubeRay and the Ray autoscaler assume) gets
   requests = limits = shape - ``sidecarReservation`` for every resource of the shape.
   ``rayStartParams`` gets ``num-cpus`` (the Ray container's CPUs rounded up, the rule
   the Ray autoscaler applies to limits), ``num-gpus`` and custom ``resources``
   (``accelerator_type:<T>``, ``TPU``) unless the user already set them; user values win.
   A multi-host TPU shape sets the worker group's ``numOfHosts``.
2. The facts ``instance-type``, ``market-type`` (default ``ON_DEMAND``), ``zone``,
   ``accelerator-type`` and ``ray-node-type`` are written as labels and annotations.
3. Default patches, instance-type patches, then user patches are applied.
4. The shape is checked as the upper bound of the pod: the requests of all containers
   (plus native sidecar init containers) may not exceed it, and no init container alone.

Groups that do not opt in get only the user patches (whose selectors may still use
``gitops-ray.io/ray-node-type``), so a manifest that names no shapes passes unchanged.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gitops_ray.errors import RenderError
from gitops_ray.render.shapes import keys
from gitops_ray.render.shapes.catalog import RAY_ACCELERATORS, Catalog, InstanceType
from gitops_ray.render.shapes.patches import POD, Patch, apply_patches
from gitops_ray.render.shapes.quantity import InvalidQuantity, format_quantity, parse_quantity
from gitops_ray.render.shapes.settings import ShapesConfig
from gitops_ray.types import Manifest, split_api_version

CLUSTER_SPEC_PATHS = {
    "RayCluster": ("spec",),
    "RayJob": ("spec", "rayClusterSpec"),
    "RayService": ("spec", "rayClusterConfig"),
    "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec"),
}
"""Where each Ray kind keeps its ``RayClusterSpec``."""
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Shaping:
    """Everything needed to shape pod templates; built once per render."""

    catalog: Catalog
    config: ShapesConfig
    defaults: tuple[Patch, ...] = ()  # provider defaults then instance-type patches
    patches: tuple[Patch, ...] = ()  # user patches: cluster, repo, app


@dataclass(frozen=True)
class PodGroup:
    """A head or worker group of a Ray object, as a live reference into its manifest."""

    spec: dict[str, Any]  # headGroupSpec or workerGroupSpecs[i]
    node_type: str
    where: str


def cluster_spec(obj: Manifest) -> dict[str, Any] | None:
    """The ``RayClusterSpec`` inside a ``ray.io`` object, or ``None``."""
    path = CLUSTER_SPEC_PATHS.get(str(obj.get("kind")))
    if path is None or split_api_version(str(obj.get("apiVersion", "")))[0] != "ray.io":
        return None
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def pod_groups(obj: Manifest) -> Iterator[PodGroup]:
    """Head then worker groups of ``obj`` (nothing for non-Ray objects)."""
    spec = cluster_spec(obj)
    if spec is None:
        return
    meta = obj.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    owner = f"{obj.get('kind')} {ns}{meta.get('name', '')}"
    if obj.get("kind") != "RayCluster":
        owner += f" {CLUSTER_SPEC_PATHS[str(obj['kind'])][-1]}"
    if isinstance(spec.get("headGroupSpec"), dict):
        yield PodGroup(spec["headGroupSpec"], keys.HEAD, f"{owner} head group")
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        if isinstance(group, dict):
            name = group.get("groupName") or f"#{index}"
            yield PodGroup(group, keys.WORKER, f"{owner} worker group {name!r}")


def template_value(template: Mapping[str, Any], key: str) -> str | None:
    """A ``gitops-ray.io/`` setting of a template: its annotation, else its label."""
    meta = template.get("metadata") or {}
    for source in ("annotations", "labels"):
        value = (meta.get(source) or {}).get(key)
        if value is not None:
            return str(value)
    return None


def opts_in(group: PodGroup) -> bool:
    template = group.spec.get("template") or {}
    return any(template_value(template, key) is not None for key in keys.OPT_IN)


def shape_group(group: PodGroup, shaping: Shaping) -> None:
    """Shape one group in place (see the module docstring for the steps)."""
    template = group.spec.setdefault("template", {})
    facts = {keys.RAY_NODE_TYPE: group.node_type}
    shape = None
    if opts_in(group):
        name = template_value(template, keys.INSTANCE_TYPE)
        shape = shaping.catalog.get(name, where=group.where) if name is not None else None
        facts = pod_facts(template, group, shape)
        if shape is not None:
            fill_from_shape(group, shape, shaping.config)
        write_facts(template, facts)
        apply_patches(template, shaping.defaults, kind=POD, where=group.where)
    apply_patches(template, shaping.patches, kind=POD, where=group.where, facts=facts)
    if shape is not None:
        check_budget(template, shape, shaping.config, where=group.where)


def pod_facts(template: Mapping[str, Any], group: PodGroup,
              shape: InstanceType | None) -> dict[str, str]:
    """The five ``gitops-ray.io/`` facts of an opted-in pod template, validated."""
    facts = {keys.RAY_NODE_TYPE: group.node_type}
    market = template_value(template, keys.MARKET_TYPE) or keys.ON_DEMAND
    if market not in keys.MARKET_TYPES:
        raise RenderError(f"{group.where}: {keys.MARKET_TYPE} is {market!r}; use "
                          f"{' or '.join(keys.MARKET_TYPES)}")
    facts[keys.MARKET_TYPE] = market
    if shape is not None:
        facts[keys.INSTANCE_TYPE] = shape.name
    zone = template_value(template, keys.ZONE)
    if zone is not None:
        facts[keys.ZONE] = _label_value(zone, keys.ZONE, group.where)
    accelerator = _accelerator(template, shape, group.where)
    if accelerator:
        facts[keys.ACCELERATOR_TYPE] = accelerator
    return dict(sorted(facts.items()))


def _accelerator(template: Mapping[str, Any], shape: InstanceType | None, where: str) -> str:
    declared = template_value(template, keys.ACCELERATOR_TYPE)
    if shape is not None and declared is not None and declared != shape.accelerator:
        raise RenderError(f"{where}: {keys.ACCELERATOR_TYPE} {declared!r} contradicts instance "
                          f"type {shape.name!r} (accelerator {shape.accelerator or 'none'!r})")
    if declared is not None and declared not in RAY_ACCELERATORS:
        raise RenderError(f"{where}: accelerator {declared!r} is not a Ray accelerator type")
    return shape.accelerator if shape is not None else declared or ""


def _label_value(value: str, key: str, where: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise RenderError(f"{where}: {key} {value!r} is not a valid label value")
    return value


def write_facts(template: dict[str, Any], facts: Mapping[str, str]) -> None:
    meta = template.setdefault("metadata", {})
    for section in ("labels", "annotations"):
        if not isinstance(meta.get(section), dict):
            meta[section] = {}
        meta[section].update(facts)


def ray_container(template: dict[str, Any], where: str) -> dict[str, Any]:
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers or not isinstance(containers[0], dict):
        raise RenderError(f"{where}: the pod template has no containers; the first container "
                          "must be the Ray container")
    container: dict[str, Any] = containers[0]
    return container


def fill_from_shape(group: PodGroup, shape: InstanceType, config: ShapesConfig) -> None:
    """Set the Ray container's resources and fill ``rayStartParams`` from ``shape``."""
    container = ray_container(group.spec["template"], group.where)
    resources = ray_container_resources(shape, config, group.where)
    declared = container.get("resources")
    container["resources"] = declared if isinstance(declared, dict) else {}
    for section in ("requests", "limits"):
        existing = container["resources"].get(section)
        container["resources"][section] = {
            **(existing if isinstance(existing, dict) else {}),
            **{k: format_quantity(v, scale=k != "cpu") for k, v in resources.items()}}
    fill_ray_start_params(group, shape, ray_cpus=resources["cpu"])
    if shape.tpu_hosts > 1:
        if group.node_type == keys.HEAD:
            raise RenderError(f"{group.where}: instance type {shape.name!r} is a multi-host TPU "
                              "slice; use it for worker groups only")
        group.spec.setdefault("numOfHosts", shape.tpu_hosts)


def ray_container_resources(shape: InstanceType, config: ShapesConfig,
                            where: str) -> dict[str, Decimal]:
    """The shape minus the sidecar reservation; an error if nothing is left for Ray."""
    out = {}
    for name, amount in shape.k8s_resources().items():
        reserved = config.sidecar_reservation.get(name, Decimal(0))
        if amount <= reserved:
            raise RenderError(
                f"{where}: instance type {shape.name!r} has {name} "
                f"{format_quantity(amount, scale=name != 'cpu')}, not more than the sidecar "
                f"reservation of {format_quantity(reserved, scale=name != 'cpu')}; use a larger "
                "instance type or lower sidecarReservation in .gitops-ray/shapes.yaml")
        out[name] = amount - reserved
    return out


def fill_ray_start_params(group: PodGroup, shape: InstanceType, *, ray_cpus: Decimal) -> None:
    params = group.spec.get("rayStartParams")
    params = group.spec["rayStartParams"] = params if isinstance(params, dict) else {}
    params.setdefault("num-cpus", str(math.ceil(ray_cpus)))
    if shape.gpu:
        params.setdefault("num-gpus", str(shape.gpu))
    custom: dict[str, int] = {}
    if shape.accelerator:
        custom[f"accelerator_type:{shape.accelerator}"] = 1
    if shape.tpu:
        custom["TPU"] = shape.tpu
    if custom:
        declared = decode_ray_resources(params.get("resources"), group.where)
        params["resources"] = encode_ray_resources({**custom, **declared})


def encode_ray_resources(resources: Mapping[str, int]) -> str:
    r"""The ``rayStartParams.resources`` spelling KubeRay and the autoscaler expect.

    The value is passed through a shell (``--resources=<value>``), hence the quoted,
    backslash-escaped JSON: ``"{\"accelerator_type:T4\": 1}"``.
    """
    body = json.dumps(dict(sorted(resources.items())))
    return '"' + body.replace('"', '\\"') + '"'


def decode_ray_resources(value: object, where: str) -> dict[str, int]:
    """Read a ``rayStartParams.resources`` value, quoted or plain JSON."""
    if value is None or value == "":
        return {}
    text = str(value).strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    try:
        parsed = json.loads(text.replace("\\", ""))
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: nested too deep
        raise RenderError(f"{where}: rayStartParams.resources is not JSON: {e}") from e
    if not isinstance(parsed, dict) or not all(isinstance(v, int) for v in parsed.values()):
        raise RenderError(f"{where}: rayStartParams.resources must map names to integers")
    return {str(k): v for k, v in parsed.items()}


def check_budget(template: Mapping[str, Any], shape: InstanceType, config: ShapesConfig, *,
                 where: str) -> None:
    """Fail if the pod's requests exceed ``shape`` (the pod's upper bound)."""
    spec = template.get("spec") or {}
    running = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    running += [c for c in spec.get("initContainers") or []
                if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    init = [c for c in spec.get("initContainers") or []
            if isinstance(c, dict) and c.get("restartPolicy") != "Always"]
    for name, limit in shape.k8s_resources().items():
        used = [(str(c.get("name")), _request(c, name, where)) for c in running]
        total = sum((amount for _, amount in used), Decimal(0))
        if total > limit:
            raise RenderError(_over_budget(shape, name, limit, used=used, config=config,
                                             where=where))
        for container in init:
            if _request(container, name, where) > limit:
                raise RenderError(f"{where}: init container {container.get('name')!r} requests "
                                  f"more {name} than instance type {shape.name!r} has")


def _request(container: Mapping[str, Any], name: str, where: str) -> Decimal:
    resources = container.get("resources") or {}
    value = (resources.get("requests") or {}).get(name, (resources.get("limits") or {}).get(name))
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except InvalidQuantity as e:
        raise RenderError(f"{where}: container {container.get('name')!r} {name}: {e}") from e


def _over_budget(shape: InstanceType, name: str, limit: Decimal, *,
                 used: Sequence[tuple[str, Decimal]], config: ShapesConfig, where: str) -> str:
    scale = name != "cpu"
    parts = ", ".join(f"{c} {format_quantity(a, scale=scale)}" for c, a in used if a)
    total = sum((a for _, a in used), Decimal(0))
    reserved = config.sidecar_reservation.get(name, Decimal(0))
    return (f"{where}: containers request {name} {format_quantity(total, scale=scale)} "
            f"({parts}) but instance type {shape.name!r} allows "
            f"{format_quantity(limit, scale=scale)}; the sidecars must fit in sidecarReservation "
            f"({name} {format_quantity(reserved, scale=scale)}, .gitops-ray/shapes.yaml)")


def shape_object(obj: Manifest, shaping: Shaping) -> Manifest:
    """``obj`` with every pod group shaped; ``obj`` itself when nothing could apply."""
    groups = list(pod_groups(obj))
    pod_patches = any(p.kind == POD for p in shaping.patches)
    if not groups or (not pod_patches and not any(opts_in(g) for g in groups)):
        return obj
    shaped = copy.deepcopy(obj)
    for group in pod_groups(shaped):
        shape_group(group, shaping)
    return shaped
