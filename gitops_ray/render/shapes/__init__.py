"""Ray pod shapes: instance types, JSON-Patch overlays and compute configs.

Platform teams describe Ray clusters the way the Anyscale operator lets them: a catalog
of named pod shapes (``catalog``), selector-targeted JSON patches with per-cloud defaults
(``patches``, ``defaults``), and short ``ComputeConfig`` documents (``compute``), instead
of 200-line RayCluster manifests. The render pipeline calls :func:`expand_pod_shapes` on
every app's rendered manifests; ``expand`` documents the order of everything, ``settings``
where the configuration lives in the config repo (``.gitops-ray/``). The loaders are pure
functions of text, so the controller can feed them ConfigMaps as well (``cluster``).
"""

from __future__ import annotations

from gitops_ray.render.shapes.catalog import (
    Catalog,
    InstanceType,
    catalog_from_configmap,
    load_catalog,
)
from gitops_ray.render.shapes.cluster import ClusterShapes
from gitops_ray.render.shapes.compute import render_compute_config
from gitops_ray.render.shapes.defaults import default_patches, instance_type_patches
from gitops_ray.render.shapes.expand import (
    Shapes,
    cluster_concerns,
    expand,
    expand_pod_shapes,
    uses_shapes,
)
from gitops_ray.render.shapes.patches import (
    Patch,
    apply_ops,
    apply_patches,
    load_patches,
    patches_from_configmap,
)
from gitops_ray.render.shapes.quantity import format_quantity, parse_quantity
from gitops_ray.render.shapes.selector import Selector, SelectorError, parse_selector
from gitops_ray.render.shapes.settings import ShapesConfig, parse_settings

__all__ = [
    "Catalog", "ClusterShapes", "InstanceType", "Patch", "Selector", "SelectorError", "Shapes",
    "ShapesConfig",
    "apply_ops", "apply_patches", "catalog_from_configmap", "cluster_concerns",
    "default_patches", "expand",
    "expand_pod_shapes", "format_quantity", "instance_type_patches", "load_catalog",
    "load_patches", "parse_quantity", "parse_selector", "parse_settings",
    "patches_from_configmap", "render_compute_config", "uses_shapes",
]
