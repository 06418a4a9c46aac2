"""Ray pod shapes: instance types, JSON-Patch overlays and compute configs.

Placeholder until the pod-shapes work lands: ``expand_pod_shapes`` returns its input.
"""

from __future__ import annotations

from pathlib import Path

from gitops_ray.types import Manifest


def expand_pod_shapes(manifests: list[Manifest], *, repo_root: Path,
                      app_dir: Path) -> list[Manifest]:
    """Expand ComputeConfigs and instance-type annotations; identity for now."""
    del repo_root, app_dir
    return manifests
