"""Expand pod shapes in one app's rendered manifests: the render pipeline's last step.

Order, for every manifest in turn (its position in the list is kept):

1. A ``ComputeConfig`` becomes a RayCluster (shaped and pod-patched, see ``compute``).
2. Every other Ray object has its pod groups shaped (see ``pods``).
3. Patches whose ``kind`` is the object's kind run on the top-level object.

Patch order: provider defaults, instance-type patches, then the user's patch files: the
in-cluster ``patches`` ConfigMap (see ``cluster``: the controller and the cluster-backed
commands pass it in), the repo's ``.gitops-ray/patches.yaml``, the app's. Later patches
override earlier ones.

Catalog order: the in-cluster ``instance-types`` ConfigMap, then the repo's file, then
the app's; a later entry replaces an earlier one with the same name. So the repo wins over
the cluster: a shape change in git is reviewed, and a team can pin a shape it depends on
while the platform team edits the cluster's catalog.

The catalog and settings are read only when some manifest uses a shape, so a broken
catalog cannot break apps that do not use it, and a manifest that names no shape and
matches no patch is returned as the very same object.

Patch files are read for every app (patches also apply to plain Ray objects and to
top-level kinds), but a patch file that does not load fails only the apps it could
concern: apps that use shapes, and apps with an object of a kind the file's text names
(``Pod`` for apps with Ray pod templates). Every other app renders without it, as a
tolerated problem (``render.notes``: logged, shown in status, no prune): one team's
broken ``.gitops-ray/patches.yaml`` must not stop the repo's unrelated apps, and a file
that never names an app's kinds cannot patch it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitops_ray.errors import RenderError
from gitops_ray.render.notes import tolerate
from gitops_ray.render.shapes.catalog import Catalog, load_catalog
from gitops_ray.render.shapes.cluster import ClusterShapes
from gitops_ray.render.shapes.compute import is_compute_config, render_compute_config
from gitops_ray.render.shapes.defaults import default_patches, instance_type_patches
from gitops_ray.render.shapes.patches import Patch, apply_patches, load_patches
from gitops_ray.render.shapes.pods import Shaping, opts_in, pod_groups, shape_object
from gitops_ray.render.shapes.settings import (
    CATALOG_FILE,
    PATCHES_FILE,
    ShapesConfig,
    config_dirs,
    display_path,
    load_settings,
    read_text,
)
from gitops_ray.types import Manifest, ResourceKey


@dataclass(frozen=True)
class Shapes:
    """An app's catalog, settings and user patches, however they were obtained."""

    catalog: Catalog = field(default_factory=Catalog)
    config: ShapesConfig = field(default_factory=ShapesConfig)
    patches: tuple[Patch, ...] = ()


def expand_pod_shapes(manifests: list[Manifest], *, repo_root: Path, app_dir: Path,
                      cluster: ClusterShapes | None = None,
                      extra_catalog: Catalog | None = None,
                      extra_patches: Sequence[Patch] = ()) -> list[Manifest]:
    """Expand ComputeConfigs and instance types, apply patches (see module docstring).

    ``cluster`` holds the in-cluster ``instance-types`` and ``patches`` ConfigMaps (read
    by the controller and the cluster-backed commands); ``extra_catalog``/``extra_patches``
    are already-parsed additions at the same level. The repo's files win over both.
    """
    dirs = config_dirs(repo_root, app_dir)
    patches = (*_cluster_patches(cluster, manifests), *extra_patches,
               *_load_patch_files(dirs, repo_root, manifests))
    if not uses_shapes(manifests):
        if not patches:
            return manifests
        return expand(manifests, Shapes(patches=patches))
    catalog = (cluster.catalog() if cluster else Catalog()).merged(extra_catalog or Catalog())
    catalog = catalog.merged(_load_catalog_files(dirs, repo_root))
    return expand(manifests, Shapes(catalog, load_settings(dirs, repo_root), patches))


def cluster_concerns(cluster: ClusterShapes, manifests: Sequence[Manifest]) -> bool:
    """Whether the in-cluster ConfigMaps can change these (rendered) manifests.

    They can if a pod group names a shape (the catalog), or if the patches name a kind the
    app has (``Pod`` for Ray pod templates), the rule that decides which apps a broken
    patch file fails. The controller treats an edit of the ConfigMaps as a new source
    spec of exactly these apps (auto-sync applies it once, like a new commit).
    """
    if cluster.instance_types is not None and uses_shapes(manifests):
        return True
    return cluster.patches_configmap is not None and \
        _names_a_kind_of(cluster.patches_text(), manifests)


def uses_shapes(manifests: Iterable[Manifest]) -> bool:
    """Whether any manifest is a ComputeConfig or has a pod group that opts in."""
    return any(is_compute_config(obj) or any(opts_in(g) for g in pod_groups(obj))
               for obj in manifests)


def expand(manifests: Iterable[Manifest], shapes: Shapes) -> list[Manifest]:
    """The pure expansion step, for callers that loaded ``shapes`` themselves."""
    defaults = (*default_patches(shapes.config), *instance_type_patches(shapes.catalog))
    shaping = Shaping(shapes.catalog, shapes.config, defaults, shapes.patches)
    return [_top_level(_shaped(obj, shaping), shapes.patches) for obj in manifests]


def _shaped(obj: Manifest, shaping: Shaping) -> Manifest:
    if is_compute_config(obj):
        return render_compute_config(obj, shaping.catalog, shaping.config,
                                     patches=shaping.patches, defaults=shaping.defaults)
    return shape_object(obj, shaping)


def _top_level(obj: Manifest, patches: Sequence[Patch]) -> Manifest:
    kind = str(obj.get("kind", ""))
    matching = [p for p in patches if p.kind == kind]
    if not matching:
        return obj
    patched = copy.deepcopy(obj)
    apply_patches(patched, matching, kind=kind, where=str(ResourceKey.of(obj)))
    return patched


def _load_patch_files(dirs: list[Path], repo_root: Path,
                      manifests: Sequence[Manifest]) -> tuple[Patch, ...]:
    patches: list[Patch] = []
    for path in (d / PATCHES_FILE for d in dirs):
        if path.is_file():
            patches += _patch_file(path, repo_root, manifests)
    return tuple(patches)


def _patch_file(path: Path, repo_root: Path, manifests: Sequence[Manifest]) -> list[Patch]:
    """One patch file's patches; if it does not load, ``[]`` for apps it cannot concern."""
    text = read_text(path, repo_root)
    origin = display_path(path, repo_root)
    return _loaded(lambda: load_patches(text, origin=origin), text, origin, manifests)


def _cluster_patches(cluster: ClusterShapes | None,
                     manifests: Sequence[Manifest]) -> list[Patch]:
    """The patches ConfigMap's patches, tolerated like a patch file when broken."""
    if cluster is None or cluster.patches_configmap is None:
        return []
    return _loaded(cluster.patches, cluster.patches_text(), cluster.patches_origin(),
                   manifests)


def _loaded(load: Callable[[], list[Patch]], text: str, origin: str,
            manifests: Sequence[Manifest]) -> list[Patch]:
    try:
        return load()
    except RenderError as e:
        if uses_shapes(manifests) or _names_a_kind_of(text, manifests):
            raise
        tolerate(f"ignored {origin}, which names none of this app's kinds: {e}")
        return []


def _names_a_kind_of(text: str, manifests: Sequence[Manifest]) -> bool:
    kinds = {str(obj.get("kind", "")) for obj in manifests}
    if any(next(pod_groups(obj), None) is not None for obj in manifests):
        kinds.add("Pod")
    return any(re.search(rf"\b{re.escape(kind)}\b", text) for kind in kinds if kind)


def _load_catalog_files(dirs: list[Path], repo_root: Path) -> Catalog:
    catalog = Catalog()
    for path in (d / CATALOG_FILE for d in dirs):
        if path.is_file():
            catalog = catalog.merged(load_catalog(read_text(path, repo_root),
                                                  origin=display_path(path, repo_root)))
    return catalog
