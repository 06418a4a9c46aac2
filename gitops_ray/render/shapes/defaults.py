"""Default patch sets per cloud provider, and the patches an instance type implies.

A spot worker group must land on spot nodes and tolerate their taint; a T4 group must
land on T4 nodes. Which node labels say so differs per cloud, so these defaults encode the
conventions of EKS, Karpenter, GKE, AKS and "generic" clusters (values from the Anyscale
operator's defaults, ``charts/anyscale-operator`` in https://github.com/anyscale/helm-charts,
so node groups built for Anyscale work unchanged):

* market type: the generic capacity-type tolerations (``node.anyscale.com/capacity-type``)
  on every provider, then the provider's own rule: EKS ``eks.amazonaws.com/capacityType``,
  Karpenter ``karpenter.sh/capacity-type``, GKE ``cloud.google.com/gke-spot`` (on-demand as
  two ORed node-affinity terms: label absent, or not "true"), AKS
  ``kubernetes.azure.com/scalesetpriority`` affinity plus the spot taint toleration.
  On-demand pods on EKS/Karpenter are marked ``safe-to-evict: "false"``.
* zone (``enableZoneSelector``): ``topology.kubernetes.io/zone`` copied from the pod's zone.
* accelerators: a node selector per accelerator type (``nvidia.com/gpu.product`` with
  NVIDIA GPU-feature-discovery names on AWS, Azure and generic clusters;
  ``cloud.google.com/gke-accelerator`` on GKE), the GPU taint toleration, and on AWS a
  ``nvidia.com/gpu.count DoesNotExist`` affinity that keeps CPU pods off GPU nodes.
  Anyscale's keys ``A10`` and ``H100-MEGA`` are left out: they are not Ray accelerator
  types, so no catalog entry can name them.

Order is the Anyscale operator's: market type, zone, accelerators, then the instance
types' own node selectors and tolerations, so that a shape can override a default.
"""

from __future__ import annotations

from typing import Any

from gitops_ray.render.shapes import keys
from gitops_ray.render.shapes.catalog import Catalog, InstanceType
from gitops_ray.render.shapes.patches import POD, Patch
from gitops_ray.render.shapes.selector import Requirement, Selector
from gitops_ray.render.shapes.settings import ShapesConfig

CAPACITY_TAINT = "node.anyscale.com/capacity-type"
ACCELERATOR_TAINT = "node.anyscale.com/accelerator-type"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ZONE_LABEL = "topology.kubernetes.io/zone"
ARCH_LABEL = "kubernetes.io/arch"
_TERMS = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution" \
         "/nodeSelectorTerms/-"

_GFD_PRODUCTS = {
    "V100": "Tesla-V100-SXM2-16GB", "T4": "Tesla-T4", "L4": "NVIDIA-L4", "A10G": "NVIDIA-A10G",
    "L40S": "NVIDIA-L40S", "A100-40G": "NVIDIA-A100-SXM4-40GB",
    "A100-80G": "NVIDIA-A100-SXM4-80GB", "H100": "NVIDIA-H100-80GB-HBM3",
}
ACCELERATOR_NODE_LABELS: dict[str, tuple[str, dict[str, str]]] = {
    "aws": ("nvidia.com/gpu.product", _GFD_PRODUCTS),
    "generic": ("nvidia.com/gpu.product", _GFD_PRODUCTS),
    "azure": ("nvidia.com/gpu.product",
              {"T4": "NVIDIA-T4", "A100": "NVIDIA-A100", "H100": "NVIDIA-H100"}),
    "gcp": ("cloud.google.com/gke-accelerator", {
        "T4": "nvidia-tesla-t4", "L4": "nvidia-l4", "A100-40G": "nvidia-tesla-a100",
        "A100-80G": "nvidia-a100-80gb", "H100": "nvidia-h100-80gb",
        "RTX-PRO-6000": "nvidia-rtx-pro-6000"}),
}
"""Per provider: the node label key and accelerator type -> label value."""

Op = dict[str, Any]


def _add(path: str, value: Any) -> Op:
    return {"op": "add", "path": path, "value": value}


def _node_selector(key: str, value: str) -> Op:
    return _add(f"/spec/nodeSelector/{keys.pointer_token(key)}", value)


def _toleration(key: str, value: str) -> Op:
    return _add("/spec/tolerations/-", {"key": key, "operator": "Equal", "value": value,
                                        "effect": "NoSchedule"})


def _term(key: str, operator: str, *values: str) -> Op:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return _add(_TERMS, {"matchExpressions": [expression]})


def _safe_to_evict() -> Op:
    return _add(f"/metadata/annotations/{keys.pointer_token(SAFE_TO_EVICT)}", "false")


_MARKET: dict[str, dict[str, list[Op]]] = {
    "aws": {keys.ON_DEMAND: [_node_selector("eks.amazonaws.com/capacityType", "ON_DEMAND"),
                             _safe_to_evict()],
            keys.SPOT: [_node_selector("eks.amazonaws.com/capacityType", "SPOT")]},
    "karpenter": {keys.ON_DEMAND: [_node_selector("karpenter.sh/capacity-type", "on-demand"),
                                   _safe_to_evict()],
                  keys.SPOT: [_node_selector("karpenter.sh/capacity-type", "spot")]},
    "gcp": {keys.ON_DEMAND: [_term("cloud.google.com/gke-spot", "DoesNotExist"),
                             _term("cloud.google.com/gke-spot", "NotIn", "true")],
            keys.SPOT: [_node_selector("cloud.google.com/gke-spot", "true")]},
    "azure": {keys.ON_DEMAND: [_term("kubernetes.azure.com/scalesetpriority", "NotIn", "spot"),
                               _term("kubernetes.azure.com/scalesetpriority", "DoesNotExist")],
              keys.SPOT: [_term("kubernetes.azure.com/scalesetpriority", "In", "spot"),
                          _toleration("kubernetes.azure.com/scalesetpriority", "spot")]},
}


def _pod_patch(ops: list[Op], origin: str, *requirements: Requirement) -> Patch:
    return Patch(POD, tuple(ops), Selector(tuple(requirements)), f"default patches ({origin})")


def _market_is(value: str) -> Requirement:
    return Requirement(keys.MARKET_TYPE, "in", (value,))


def default_patches(config: ShapesConfig) -> list[Patch]:
    """The provider's default patch set, in application order (none for ``none``)."""
    if config.provider == "none":
        return []
    return [*_market_patches(config), *_zone_patches(config), *_accelerator_patches(config)]


def _market_patches(config: ShapesConfig) -> list[Patch]:
    patches = [
        _pod_patch([_toleration(CAPACITY_TAINT, keys.ON_DEMAND)], "generic market type"),
        _pod_patch([_toleration(CAPACITY_TAINT, keys.SPOT)], "generic market type",
                   _market_is(keys.SPOT))]
    source = "karpenter" if config.karpenter else config.provider
    for market, ops in _MARKET.get(source, {}).items():
        patches.append(_pod_patch(ops, f"{source} market type", _market_is(market)))
    return patches


def _zone_patches(config: ShapesConfig) -> list[Patch]:
    if not config.enable_zone_selector:
        return []
    copy_zone = {"op": "copy", "from": f"/metadata/annotations/{keys.pointer_token(keys.ZONE)}",
                 "path": f"/spec/nodeSelector/{keys.pointer_token(ZONE_LABEL)}"}
    return [_pod_patch([copy_zone], "zone selector", Requirement(keys.ZONE, "exists"))]


def _accelerator_patches(config: ShapesConfig) -> list[Patch]:
    label, table = ACCELERATOR_NODE_LABELS[config.provider]
    label = config.accelerator_node_selector_key or label
    origin = f"{config.provider} accelerators"
    patches = []
    if config.provider == "aws":
        patches.append(_pod_patch([_term("nvidia.com/gpu.count", "DoesNotExist")], origin,
                                  Requirement(keys.ACCELERATOR_TYPE, "!")))
    for accelerator, value in sorted({**table, **config.accelerator_node_selectors}.items()):
        patches.append(_pod_patch([_node_selector(label, value)], origin,
                                  Requirement(keys.ACCELERATOR_TYPE, "in", (accelerator,))))
    patches.append(_pod_patch([_toleration(ACCELERATOR_TAINT, "GPU")], origin,
                              Requirement(keys.ACCELERATOR_TYPE, "exists")))
    return patches


def instance_type_patches(catalog: Catalog) -> list[Patch]:
    """One patch per shape with a node selector, tolerations or CPU architecture."""
    return [patch for name in sorted(catalog.types)
            if (patch := _shape_patch(catalog.types[name], catalog.origins.get(name, "")))]


def _shape_patch(shape: InstanceType, origin: str) -> Patch | None:
    ops = [_node_selector(k, v) for k, v in shape.node_selector.items()]
    if shape.cpu_architecture:
        ops.append(_node_selector(ARCH_LABEL, shape.cpu_architecture))
    ops += [_add("/spec/tolerations/-", dict(t)) for t in shape.tolerations]
    if not ops:
        return None
    where = f"{origin}: instance type {shape.name!r}" if origin else f"instance type {shape.name!r}"
    return Patch(POD, tuple(ops), Selector((Requirement(keys.INSTANCE_TYPE, "in", (shape.name,)),)),
                 where)
