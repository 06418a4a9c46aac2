"""Where pod-shape configuration lives in a config repo, and how it is read.

Layout (decided here, documented in ``examples/shapes``)::

    <repo>/.gitops-ray/instance-types.yaml   the catalog (Anyscale instance_types.yaml format)
    <repo>/.gitops-ray/patches.yaml          patch list (Anyscale patches.yaml format)
    <repo>/.gitops-ray/shapes.yaml           provider and options, see ShapesConfig
    <app>/.gitops-ray/...                    the same files, overriding for one app

It lives in the config repo, next to the RayClusters it shapes, so a shape change is a
reviewed commit that every app renders identically in CI, in ``gitops-ray render`` and in
the Argo CD plugin. Overrides: an app's instance types replace same-named repo ones, its
patches run after the repo's, and its ``shapes.yaml`` keys replace the repo's keys.

``provider`` defaults to ``generic`` when the repo or app has a ``.gitops-ray/`` directory
and to ``none`` (no default patches at all) when it has none, so repos that never heard of
pod shapes render exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.bounds import check_text_size, check_yaml
from gitops_ray.render.shapes.quantity import resource_amount

CONFIG_DIR = ".gitops-ray"
CATALOG_FILE = "instance-types.yaml"
PATCHES_FILE = "patches.yaml"
SETTINGS_FILE = "shapes.yaml"
PROVIDERS = ("none", "generic", "aws", "gcp", "azure")
_FIELDS = {
    "provider": "provider", "karpenter": "karpenter",
    "enableZoneSelector": "enable_zone_selector", "sidecarReservation": "sidecar_reservation",
    "acceleratorNodeSelectorKey": "accelerator_node_selector_key",
    "acceleratorNodeSelectors": "accelerator_node_selectors",
}


@dataclass(frozen=True)
class ShapesConfig:
    """``shapes.yaml``: which default patches apply and how much room sidecars get.

    * ``provider``: ``aws``, ``gcp``, ``azure``, ``generic`` or ``none``; selects the default
      market-type and accelerator patches (the Anyscale operator's defaults).
    * ``karpenter``: market-type patches use ``karpenter.sh/capacity-type`` instead of the
      provider's node labels.
    * ``enableZoneSelector``: pods pinned to one zone get a ``topology.kubernetes.io/zone``
      node selector (off by default: many cluster autoscalers ignore it).
    * ``sidecarReservation``: Kubernetes resources (``{cpu: 500m, memory: 1Gi}``) kept out of
      the Ray container for the other containers of the pod, including ones injected later
      (the KubeRay autoscaler on the head, mesh proxies, log shippers).
    * ``acceleratorNodeSelectorKey``/``acceleratorNodeSelectors``: override the GPU node
      label key, and add or override accelerator-type -> label value entries.
    """

    provider: str = "none"
    karpenter: bool = False
    enable_zone_selector: bool = False
    sidecar_reservation: Mapping[str, Decimal] = field(default_factory=dict)
    accelerator_node_selector_key: str = ""
    accelerator_node_selectors: Mapping[str, str] = field(default_factory=dict)


def parse_settings(text: str, *, origin: str, base: ShapesConfig = ShapesConfig()
                   ) -> ShapesConfig:
    """``base`` with the keys set in the ``shapes.yaml`` document ``text`` replaced."""
    try:
        check_yaml(text, origin=origin)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RenderError(f"{origin}: invalid YAML: {e}") from e
    if doc is None:
        return base
    if not isinstance(doc, dict):
        raise RenderError(f"{origin}: expected a mapping of settings")
    unknown = set(doc) - set(_FIELDS)
    if unknown:
        raise RenderError(f"{origin}: unknown setting(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(allowed: {', '.join(_FIELDS)})")
    values = {_FIELDS[k]: _setting(k, v, f"{origin}: {k}") for k, v in doc.items()}
    return replace(base, **values)


def _setting(key: str, value: Any, where: str) -> Any:
    if key == "provider":
        if value not in PROVIDERS:
            raise RenderError(f"{where}: unknown provider {value!r} (use {', '.join(PROVIDERS)})")
        return value
    if key in ("karpenter", "enableZoneSelector"):
        if not isinstance(value, bool):
            raise RenderError(f"{where}: must be true or false")
        return value
    if key == "acceleratorNodeSelectorKey":
        if not isinstance(value, str):
            raise RenderError(f"{where}: must be a node label key")
        return value
    if not isinstance(value, dict):
        raise RenderError(f"{where}: must be a mapping")
    if key == "acceleratorNodeSelectors":
        return {str(k): str(v) for k, v in value.items()}
    return {str(k): resource_amount(v, f"{where}.{k}") for k, v in value.items()}


def config_dirs(repo_root: Path, app_dir: Path) -> list[Path]:
    """The ``.gitops-ray`` directories that apply to an app, repo first, app last."""
    dirs = [repo_root / CONFIG_DIR]
    if app_dir.resolve() != repo_root.resolve():
        dirs.append(app_dir / CONFIG_DIR)
    return [d for d in dirs if d.is_dir()]


def display_path(path: Path, repo_root: Path) -> str:
    """``path`` relative to the repo, for error messages that a user can act on."""
    try:
        return str(path.resolve().relative_to(repo_root.resolve()))
    except ValueError:
        return str(path)


def load_settings(dirs: list[Path], repo_root: Path) -> ShapesConfig:
    """The merged ``shapes.yaml`` of ``dirs`` (see module docstring for the defaults)."""
    config = ShapesConfig(provider="generic" if dirs else "none")
    for directory in dirs:
        path = directory / SETTINGS_FILE
        if path.is_file():
            config = parse_settings(read_text(path, repo_root),
                                    origin=display_path(path, repo_root), base=config)
    return config


def read_text(path: Path, repo_root: Path) -> str:
    """The file's text; refuses symlinks that lead outside the repository."""
    if not path.resolve().is_relative_to(repo_root.resolve()):
        raise RenderError(f"{display_path(path, repo_root)}: resolves outside the repository")
    try:
        check_text_size(path.stat().st_size, origin=display_path(path, repo_root))
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RenderError(f"{display_path(path, repo_root)}: cannot read: {e}") from e
