"""The in-cluster pod-shape ConfigMaps, as one value render can take and cache on.

Platform teams publish instance types and patches once per cluster (the Helm chart's
``instanceTypes`` and ``patches`` values become ``<fullname>-instance-types`` and
``<fullname>-patches`` ConfigMaps), the way the Anyscale operator reads its own. Render
must not talk to the API server, so the controller and the CLI read the ConfigMaps and
hand them over as a :class:`ClusterShapes`:

* only what render uses is kept (name, namespace, ``data``), so :attr:`version`, a digest
  of it, changes exactly when a re-render could produce something else; it is part of
  the render cache's key (see ``render.inputs``);
* the texts are parsed when an app needs them (``expand``), so a broken ConfigMap fails
  the apps it concerns, not every app, as a broken ``.gitops-ray/`` file does.

Precedence (documented in ``expand``): the ConfigMaps come first and the repo's files
after them, so the repo wins: a team can pin or override a cluster shape in review.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops_ray.render.shapes.catalog import Catalog, catalog_from_configmap
from gitops_ray.render.shapes.patches import Patch, patches_from_configmap


def _trimmed(configmap: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if configmap is None:
        return None
    meta = configmap.get("metadata") or {}
    return {"metadata": {"name": str(meta.get("name", "")),
                         "namespace": str(meta.get("namespace", ""))},
            "data": {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}}


@dataclass(frozen=True)
class ClusterShapes:
    """The ``instance-types`` and ``patches`` ConfigMaps (``None``: absent or not asked)."""

    instance_types: Mapping[str, Any] | None = None
    patches_configmap: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, instance_types: Mapping[str, Any] | None,
           patches: Mapping[str, Any] | None) -> ClusterShapes:
        """Keep only what render reads of the two ConfigMaps (either may be ``None``)."""
        return cls(_trimmed(instance_types), _trimmed(patches))

    @property
    def version(self) -> str:
        """Changes whenever what render reads changes ("" when there is nothing)."""
        if self.instance_types is None and self.patches_configmap is None:
            return ""
        text = json.dumps([self.instance_types, self.patches_configmap], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def catalog(self) -> Catalog:
        """The ConfigMap's instance types (:class:`RenderError` if it is invalid)."""
        if self.instance_types is None:
            return Catalog()
        return catalog_from_configmap(self.instance_types)

    def patches_text(self) -> str:
        """The patches ConfigMap's text, for deciding which apps a broken one concerns."""
        data = (self.patches_configmap or {}).get("data") or {}
        return str(data.get("patches.yaml", ""))

    def patches_origin(self) -> str:
        """``ConfigMap <namespace>/<name>`` of the patches, as errors name it."""
        meta = (self.patches_configmap or {}).get("metadata") or {}
        return f"ConfigMap {meta.get('namespace', '')}/{meta.get('name', '')}"

    def patches(self) -> list[Patch]:
        """The ConfigMap's patches (:class:`RenderError` if they are invalid)."""
        if self.patches_configmap is None:
            return []
        return patches_from_configmap(self.patches_configmap)
