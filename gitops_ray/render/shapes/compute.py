"""ComputeConfig: a twenty-line document that renders to a complete autoscaling RayCluster.

Platform teams want users to say *what* they need (a head shape, worker groups with
min/max nodes and spot or on-demand) the way Anyscale compute configs do, and get a
RayCluster that is correct for KubeRay and for their cluster without writing 200 lines::

    apiVersion: gitops-ray.io/v1alpha1
    kind: ComputeConfig
    metadata: {name: analytics}
    ray_version: "2.52.0"              # or derived from the tag of `image`
    image: rayproject/ray:2.52.0       # default rayproject/ray:<ray_version>[-gpu]
    zones: [us-west-2a]                # one zone pins the pods (gitops-ray.io/zone)
    idle_timeout_seconds: 120          # autoscalerOptions.idleTimeoutSeconds
    env: {RAY_LOG_LEVEL: info}         # every Ray container
    advanced_instance_config:          # pod-template overlay for every node
      spec: {priorityClassName: ray}
    head_node:
      instance_type: 8CPU-32GB
      resources: {CPU: 0}              # Ray logical resources (num-cpus, num-gpus, custom)
    worker_nodes:
      - name: gpu                      # groupName; default: the instance type, lower-cased
        instance_type: 8CPU-32GB-1xT4
        min_nodes: 0
        max_nodes: 10
        market_type: SPOT              # ON_DEMAND (default) or SPOT
        zones: [us-west-2b]            # overrides the cluster's zones
        advanced_instance_config: {}   # overlay for this group (after the cluster's)

The result has ``enableInTreeAutoscaling: true`` and no ``replicas`` (the autoscaler owns
them: it patches ``workerGroupSpecs[i].replicas``), ``minReplicas``/``maxReplicas`` from
``min_nodes``/``max_nodes``, a name KubeRay accepts (DNS-1035, at most 53 characters) and
unique DNS-1123 group names.
Pod templates then go through the same shaping and patches as hand-written RayClusters.
Overlays merge mappings recursively, merge lists of named items (containers, env,
volumes) by ``name`` like server-side apply, and replace other lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitops_ray.errors import RenderError
from gitops_ray.render.shapes import keys
from gitops_ray.render.shapes.catalog import Catalog, InstanceType
from gitops_ray.render.shapes.defaults import default_patches, instance_type_patches
from gitops_ray.render.shapes.patches import Patch
from gitops_ray.render.shapes.pods import Shaping, encode_ray_resources, shape_object
from gitops_ray.render.shapes.settings import ShapesConfig
from gitops_ray.types import Manifest

API_VERSION = "gitops-ray.io/v1alpha1"
KIND = "ComputeConfig"
MAX_NAME = 53
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001), ("serve", 8000),
              ("metrics", 8080))
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+")
_TAG_VERSION = re.compile(r":(\d+\.\d+\.\d+)[^/]*$")
_TOP = frozenset({"apiVersion", "kind", "metadata", "ray_version", "image", "zones",
                  "idle_timeout_seconds", "env", "advanced_instance_config", "head_node",
                  "worker_nodes"})
_HEAD = frozenset({"instance_type", "resources", "market_type", "advanced_instance_config"})
_WORKER = _HEAD | {"name", "min_nodes", "max_nodes", "zones"}


def is_compute_config(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == KIND and str(obj.get("apiVersion", "")).startswith("gitops-ray.io/")


@dataclass(frozen=True)
class _Context:
    """What every node of one ComputeConfig shares."""

    where: str
    catalog: Catalog
    ray_version: str
    image: str  # "" means rayproject/ray:<ray_version>, with -gpu for GPU shapes
    zones: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    overlay: Mapping[str, Any]


def render_compute_config(doc: Manifest, catalog: Catalog, config: ShapesConfig, *,
                          patches: Sequence[Patch] = (),
                          defaults: Sequence[Patch] | None = None) -> Manifest:
    """The shaped, patched RayCluster that ``doc`` describes.

    ``defaults`` are the default and instance-type patches (computed from ``config`` and
    ``catalog`` when ``None``); ``patches`` are the user's, applied after them.
    """
    if doc.get("apiVersion") != API_VERSION:
        raise RenderError(f"{KIND}: apiVersion must be {API_VERSION}, got "
                          f"{doc.get('apiVersion')!r}")
    ctx = _context(doc, catalog)
    if defaults is None:
        defaults = [*default_patches(config), *instance_type_patches(catalog)]
    cluster = _raycluster(doc, ctx)
    return shape_object(cluster, Shaping(catalog, config, tuple(defaults), tuple(patches)))


def _context(doc: Manifest, catalog: Catalog) -> _Context:
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "")
    where = f"{KIND} {name or '<unnamed>'}"
    _check_name(name, where)
    _check_fields(doc, _TOP, where)
    version = _ray_version(doc, where)
    return _Context(
        where=where, catalog=catalog, ray_version=version,
        image=_string(doc.get("image"), f"{where}: image"),
        zones=_zones(doc.get("zones"), f"{where}: zones"),
        env=tuple((str(k), str(v)) for k, v in _mapping(doc.get("env"), f"{where}: env").items()),
        overlay=_overlay(doc.get("advanced_instance_config"),
                         f"{where}: advanced_instance_config"))


def _check_name(name: str, where: str) -> None:
    if not _DNS1035.match(name) or len(name) > MAX_NAME:
        raise RenderError(f"{where}: metadata.name must be a DNS-1035 label of at most "
                          f"{MAX_NAME} characters (KubeRay's limit for RayCluster names)")


def _check_fields(section: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = set(section) - allowed
    if unknown:
        raise RenderError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(allowed: {', '.join(sorted(allowed))})")


def _ray_version(doc: Manifest, where: str) -> str:
    version = doc.get("ray_version")
    if version is None:
        tag = _TAG_VERSION.search(str(doc.get("image") or ""))
        if not tag:
            raise RenderError(f"{where}: set ray_version (or an image tagged with it, such as "
                              "rayproject/ray:2.52.0)")
        return tag[1]
    if not _VERSION.match(str(version)):
        raise RenderError(f"{where}: ray_version {version!r} is not a version such as 2.52.0")
    return str(version)


def _raycluster(doc: Manifest, ctx: _Context) -> Manifest:
    head = _mapping(doc.get("head_node"), f"{ctx.where}: head_node")
    if not head:
        raise RenderError(f"{ctx.where}: head_node with an instance_type is required")
    workers = doc.get("worker_nodes") or []
    if not isinstance(workers, list):
        raise RenderError(f"{ctx.where}: worker_nodes must be a list")
    spec: dict[str, Any] = {
        "rayVersion": ctx.ray_version,
        "enableInTreeAutoscaling": True,
        "headGroupSpec": _head_group(head, ctx),
        "workerGroupSpecs": _worker_groups(workers, ctx),
    }
    idle = doc.get("idle_timeout_seconds")
    if idle is not None:
        spec["autoscalerOptions"] = {"idleTimeoutSeconds": _count(
            idle, f"{ctx.where}: idle_timeout_seconds")}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": _metadata(doc.get("metadata") or {}), "spec": spec}


def _metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": meta["name"]}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    out["labels"] = {**(meta.get("labels") or {}), keys.COMPUTE_CONFIG: meta["name"]}
    if meta.get("annotations"):
        out["annotations"] = dict(meta["annotations"])
    return out


def _head_group(node: Mapping[str, Any], ctx: _Context) -> dict[str, Any]:
    where = f"{ctx.where}: head_node"
    _check_fields(node, _HEAD, where)
    shape = _shape(node, ctx, where)
    template = _template(node, shape, ctx, container="ray-head", zones=ctx.zones, where=where)
    container = template["spec"]["containers"][0]
    container.setdefault("ports", [{"name": n, "containerPort": p} for n, p in HEAD_PORTS])
    params = {"dashboard-host": "0.0.0.0", **_logical_resources(node, where)}
    return {"rayStartParams": params, "template": template}


def _worker_groups(nodes: list[Any], ctx: _Context) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(nodes):
        where = f"{ctx.where}: worker_nodes[{index}]"
        node = _mapping(raw, where)
        group = _worker_group(node, ctx, where)
        name = group["groupName"]
        if name in seen:
            raise RenderError(f"{where}: group name {name!r} is already used by "
                              f"worker_nodes[{seen[name]}]; give each worker node a unique name")
        seen[name] = index
        groups.append(group)
    return groups


def _worker_group(node: Mapping[str, Any], ctx: _Context, where: str) -> dict[str, Any]:
    _check_fields(node, _WORKER, where)
    shape = _shape(node, ctx, where)
    name = str(node.get("name") or shape.name.lower().replace("_", "-"))
    if not _DNS1123.match(name) or len(name) > 63:
        raise RenderError(f"{where}: name {name!r} must be a DNS-1123 label (lower-case letters, "
                          "digits and '-'), because KubeRay puts it into pod names")
    low = _count(node.get("min_nodes", 0), f"{where}: min_nodes")
    if "max_nodes" not in node:
        raise RenderError(f"{where}: max_nodes is required (the autoscaler's upper bound)")
    high = _count(node["max_nodes"], f"{where}: max_nodes")
    if low > high:
        raise RenderError(f"{where}: min_nodes {low} is greater than max_nodes {high}")
    zones = _zones(node["zones"], f"{where}: zones") if "zones" in node else ctx.zones
    template = _template(node, shape, ctx, container="ray-worker", zones=zones, where=where)
    return {"groupName": name, "minReplicas": low, "maxReplicas": high,
            "rayStartParams": _logical_resources(node, where), "template": template}


def _shape(node: Mapping[str, Any], ctx: _Context, where: str) -> InstanceType:
    name = node.get("instance_type")
    if not isinstance(name, str) or not name:
        raise RenderError(f"{where}: instance_type is required")
    return ctx.catalog.get(name, where=where)


def _template(node: Mapping[str, Any], shape: InstanceType, ctx: _Context, *, container: str,
              zones: tuple[str, ...], where: str) -> dict[str, Any]:
    market = str(node.get("market_type") or keys.ON_DEMAND)
    if market not in keys.MARKET_TYPES:
        raise RenderError(f"{where}: market_type {market!r} must be "
                          f"{' or '.join(keys.MARKET_TYPES)}")
    annotations = {keys.INSTANCE_TYPE: shape.name, keys.MARKET_TYPE: market}
    if len(zones) == 1:
        annotations[keys.ZONE] = zones[0]
    image = ctx.image or f"rayproject/ray:{ctx.ray_version}{'-gpu' if shape.gpu else ''}"
    ray: dict[str, Any] = {"name": container, "image": image}
    if ctx.env:
        ray["env"] = [{"name": k, "value": v} for k, v in ctx.env]
    template: dict[str, Any] = {"metadata": {"annotations": annotations},
                                "spec": {"containers": [ray]}}
    overlay = _overlay(node.get("advanced_instance_config"), f"{where}: advanced_instance_config")
    merged: dict[str, Any] = merge_overlay(merge_overlay(template, ctx.overlay), overlay)
    return merged


def _overlay(value: Any, where: str) -> dict[str, Any]:
    overlay = _mapping(value, where)
    _check_fields(overlay, frozenset({"metadata", "spec"}), where)
    return overlay


def _logical_resources(node: Mapping[str, Any], where: str) -> dict[str, str]:
    """``resources`` of a node (Ray logical resources) as ``rayStartParams``."""
    declared = _mapping(node.get("resources"), f"{where}: resources")
    params: dict[str, str] = {}
    custom: dict[str, int] = {}
    for key, value in declared.items():
        amount = _count(value, f"{where}: resources.{key}")
        if key in ("CPU", "GPU"):
            params[f"num-{str(key).lower()}s"] = str(amount)
        elif key == "memory":
            params["memory"] = str(amount)
        else:
            custom[str(key)] = amount
    if custom:
        params["resources"] = encode_ray_resources(custom)
    return params


def merge_overlay(base: Any, overlay: Any) -> Any:
    """``overlay`` merged onto ``base``: maps recursively, named lists by name (see module)."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge_overlay(base[key], value) if key in base else value
        return merged
    if _named_list(base) and overlay and _named_list(overlay):
        by_name = {item["name"]: item for item in base}
        for item in overlay:
            name = item["name"]
            by_name[name] = merge_overlay(by_name[name], item) if name in by_name else item
        return list(by_name.values())
    return overlay


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, dict) and "name" in i for i in value)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RenderError(f"{where}: must be a mapping")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not value:
        raise RenderError(f"{where}: must be a non-empty string")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RenderError(f"{where}: must be a whole number >= 0, got {value!r}")
    return value


def _zones(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(z, str) and z for z in value):
        raise RenderError(f"{where}: must be a list of zone names such as [us-west-2a]")
    return tuple(value)
