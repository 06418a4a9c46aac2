"""Kustomize apps, built with ``kubectl kustomize`` (kustomize v5, as Argo CD bundles).

Argo CD runs ``kustomize build <dir>``; ``kubectl kustomize`` embeds the same kustomize
and prints the same objects, and kubectl is what platform teams already have. Argo CD
applies ``spec.source.kustomize.namePrefix``/``nameSuffix``/``namespace`` by running
``kustomize edit set ...`` in its private checkout; we make the same edit to the
kustomization file in a scratch copy of the checkout (the shared checkout is never
written), which replaces any value the file already had, as ``kustomize edit`` does.

Kustomize sees only its own checkout. Before it runs, the kustomization and every one it
reaches (``resources``, ``bases``, ``components`` that are directories) are read, and
each path they name (those lists, ``generators``/``transformers``/``validators``,
``patches``, ``replacements``, generator ``files``/``envs``, ``crds``,
``configurations``, ``openapi``) is refused by name if it is a URL (``https://``,
``file://``, ``git@``...), absolute, leaves the repository, or (a resource) does not
exist there, which is when kustomize would try it as a remote git repository. The
directories reached are checked for symlinks leading out
(:func:`gitops_ray.safepath.check_no_escaping_symlinks`). ``helmCharts`` is refused
(kustomize would run helm with no sandbox of ours). And in case anything is missed,
kustomize runs with ``GIT_ALLOW_PROTOCOL`` empty (git may use no protocol at all) and
its HTTP(S) proxy set to a closed local port.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from gitops_ray import limits
from gitops_ray.errors import RenderError, SourceError
from gitops_ray.redact import redact
from gitops_ray.render.apps import Application, KustomizeSource
from gitops_ray.render.documents import Doc, parse_yaml, read_text
from gitops_ray.render.tools import inside, run_tool, scratch_copy, tool_error
from gitops_ray.safepath import check_no_escaping_symlinks

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RESOURCE_LISTS = ("resources", "bases", "components")
"""Entries that may be directories (another kustomization) or files; must exist."""
FILE_LISTS = ("generators", "transformers", "validators", "crds", "configurations",
              "patchesStrategicMerge")
"""Entries that are files (or, for some, inline YAML)."""
GENERATORS = ("configMapGenerator", "secretGenerator")
REFUSED = ("helmCharts", "helmChartInflationGenerator", "helmGlobals")
NO_NETWORK = {"GIT_ALLOW_PROTOCOL": "", "HTTP_PROXY": "http://127.0.0.1:9",
              "HTTPS_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
              "https_proxy": "http://127.0.0.1:9", "NO_PROXY": "", "no_proxy": "",
              "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
"""Environment of ``kubectl kustomize``: no git protocol, no reachable proxy."""
MAX_KUSTOMIZATIONS = 1000
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[\w.-]+@[\w.-]+:")
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
    check_reach(repo_root, app_dir)
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
    result = run_tool([kubectl_bin, "kustomize", str(root / relative)], what=what, hint=HINT,
                      env=NO_NETWORK)
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


def check_reach(repo_root: Path, app_dir: Path) -> None:
    """Refuse what would make kustomize read outside the checkout (see module docstring)."""
    seen: set[Path] = set()
    pending = [app_dir]
    while pending:
        directory = pending.pop()
        if directory in seen:
            continue
        if len(seen) >= MAX_KUSTOMIZATIONS:
            raise RenderError(f"more than {MAX_KUSTOMIZATIONS} kustomizations reached")
        seen.add(directory)
        try:  # before its kustomization is read: that file may be such a link
            check_no_escaping_symlinks(repo_root, directory)
        except SourceError as e:
            raise RenderError(str(e)) from e
        path = find_kustomization(directory)
        if path is not None:  # else kustomize says so itself
            pending += _reached(repo_root, path)


def _reached(repo_root: Path, path: Path) -> list[Path]:
    """The directories ``path`` (a kustomization file) names; refuses what leaves."""
    origin = path.relative_to(repo_root).as_posix()
    docs = parse_yaml(read_text(path, origin=origin), origin=origin)
    body = docs[0].body if docs else None
    if not isinstance(body, dict):
        return []
    for field in REFUSED:
        if field in body:
            raise RenderError(f"{origin}: {field} is not supported (kustomize would run helm "
                              "outside gitops-ray's sandbox); render the chart as a Helm app")
    directories = []
    for field, entry, must_exist in _paths(body):
        target = _local(repo_root, path.parent, entry,
                        where=f"{origin}: {field} {redact(entry)!r}",
                        must_exist=must_exist)
        if target is not None and target.is_dir():
            directories.append(target)
    return directories


def _paths(body: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(field, path, must exist) of every path a kustomization names."""
    for field in RESOURCE_LISTS:
        for entry in _strings(body.get(field)):
            yield field, entry, True
    for field in FILE_LISTS:
        for entry in _strings(body.get(field)):
            if "\n" not in entry:  # else inline YAML
                yield field, entry, False
    yield from _item_paths(body)
    openapi = body.get("openapi")
    if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
        yield "openapi.path", openapi["path"], False


def _item_paths(body: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """The paths in the items of ``patches`` and the like, and of the generators."""
    for field in ("patches", "patchesJson6902", "replacements"):
        for item in _items(body.get(field)):
            if isinstance(item.get("path"), str):
                yield f"{field}[].path", item["path"], False
    for field in GENERATORS:
        for item in _items(body.get(field)):
            for key in ("files", "envs", "env"):
                for entry in _strings(item.get(key)):
                    yield f"{field}[].{key}", entry.split("=", 1)[-1], False


def _items(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _local(repo_root: Path, directory: Path, entry: str, *, where: str,
           must_exist: bool) -> Path | None:
    """The checkout path ``entry`` (relative to ``directory``) names.

    Refuses a URL, an absolute path, one outside the repository and (``must_exist``) a
    missing one.
    """
    if entry.startswith("file:"):
        raise RenderError(f"{where}: file:// URLs are not allowed; name a path inside "
                          "the repository")
    if _URL.match(entry):
        raise RenderError(f"{where}: remote bases and resources are not fetched; vendor "
                          "them into the repository")
    if posixpath.isabs(entry) or os.path.isabs(entry):
        raise RenderError(f"{where}: absolute paths are not allowed")
    relative = posixpath.normpath(posixpath.join(
        directory.relative_to(repo_root).as_posix(), entry))
    target = inside(repo_root, relative, where)
    if must_exist and not target.exists():
        raise RenderError(f"{where}: does not exist in the repository (kustomize would try "
                          "it as a remote URL, which is not fetched)")
    return target
