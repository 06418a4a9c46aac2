"""Kustomize apps, built with ``kubectl kustomize`` (kustomize v5, as Argo CD bundles).

Argo CD runs ``kustomize build <dir>``; ``kubectl kustomize`` embeds the same kustomize
and prints the same objects, and kubectl is what platform teams already have. Argo CD
applies ``spec.source.kustomize.namePrefix``/``nameSuffix``/``namespace`` by running
``kustomize edit set ...`` in its private checkout; we make the same edit to the
kustomization file in a scratch copy of the checkout (the shared checkout is never
written), which replaces any value the file already had, as ``kustomize edit`` does.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gitops_ray import limits
from gitops_ray.errors import RenderError
from gitops_ray.render.apps import Application, KustomizeSource
from gitops_ray.render.documents import Doc, parse_yaml, read_text
from gitops_ray.render.tools import run_tool, scratch_copy, tool_error

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
HINT = "Kustomize apps are rendered with `kubectl kustomize`; install kubectl (>= 1.27)"


def find_kustomization(directory: Path) -> Path | None:
    """The kustomization file of ``directory``, by kustomize's own precedence."""
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def overrides(options: KustomizeSource | None) -> dict[str, str]:
    """The kustomization fields ``spec.source.kustomize`` sets (empty: build as is)."""
    if options is None:
        return {}
    fields = {"namePrefix": options.name_prefix, "nameSuffix": options.name_suffix,
              "namespace": options.namespace}
    return {k: v for k, v in fields.items() if v}


def render_kustomize(app: Application, *, repo_root: Path, app_dir: Path,
                     kubectl_bin: str) -> list[Doc]:
    """Build ``app_dir`` with ``kubectl kustomize`` and decode the output."""
    relative = app_dir.relative_to(repo_root).as_posix()
    what = f"kubectl kustomize {relative}"
    changes = overrides(app.source.kustomize)
    if not changes:
        return parse_yaml(_build(kubectl_bin, repo_root, relative, what), origin=what,
                          limit=limits.MAX_RENDER_BYTES)
    with scratch_copy(repo_root) as copy:
        _edit(copy / relative, relative, changes)
        return parse_yaml(_build(kubectl_bin, copy, relative, what), origin=what,
                          limit=limits.MAX_RENDER_BYTES)


def _build(kubectl_bin: str, root: Path, relative: str, what: str) -> str:
    """Run kustomize; paths in its errors are shown relative to the repo root."""
    result = run_tool([kubectl_bin, "kustomize", str(root / relative)], what=what, hint=HINT)
    if result.returncode != 0:
        raise tool_error(what, result, replace={f"{root}/": "", str(root): "."})
    return result.stdout


def _edit(directory: Path, relative: str, changes: dict[str, str]) -> None:
    """Set ``changes`` in the kustomization file of ``directory`` (a scratch copy)."""
    path = find_kustomization(directory)
    if path is None:
        raise RenderError(f"{relative}: spec.source.kustomize is set but the directory has no "
                          f"{' or '.join(KUSTOMIZATION_FILES)}")
    origin = f"{relative}/{path.name}"
    docs = parse_yaml(read_text(path, origin=origin), origin=origin)
    body = docs[0].body if docs else None
    if not isinstance(body, dict):
        raise RenderError(f"{origin}: expected a Kustomization mapping")
    path.write_text(yaml.safe_dump({**body, **changes}, sort_keys=False))
