"""Plain manifests: a directory of ``.yaml``/``.yml``/``.json`` files, as Argo CD reads it.

The rules are Argo CD's (``reposerver/repository`` ``findManifests``), so a directory that
Argo CD renders renders the same here:

* files are visited in lexical order; subdirectories only with ``directory.recurse``;
* ``exclude`` then ``include`` globs are matched on the path relative to the app directory;
  ``directory.disableExtensionFilter`` (Argo CD >= 3.6) reads any file they select, not
  only the manifest suffixes (``*.yaml.sealed``);
* YAML files hold any number of documents, JSON files exactly one object;
* a YAML file that fails to decode is an error only if it looks like a manifest (mentions
  ``apiVersion:``, ``kind:`` and ``metadata:``) or also holds real objects; otherwise it is
  skipped as a *tolerated* problem (``render.notes``: logged, shown in the app's status,
  and the sync that follows prunes nothing, since the file may have held objects); valid
  YAML that is not a manifest (CI config, Helm values) is skipped with an info line;
* **unlike Argo CD**, a file holding a mapping that looks like an object (it has
  ``metadata`` or ``spec``) but lacks ``kind`` or ``apiVersion`` is an error, not "some
  other YAML": Argo CD skips it, so a one-line typo (``kind:`` deleted or misspelt) makes
  the object vanish from the render and the next pruning sync deletes it from the cluster;
* a file over the bounds of :mod:`gitops_ray.limits` (size, aliases, depth, nodes) is
  always an error, and so is a directory whose files add up to more than
  ``MAX_RENDER_BYTES``;
* a symlinked file must resolve inside the repository; dangling links and links to
  non-files are skipped.

Deliberate differences: ``.git`` and ``.gitops-ray`` (pod-shape settings, read by
``render.shapes``) directories are never walked, and ``.jsonnet`` files are an error
rather than evaluated, so no object silently goes missing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from gitops_ray import limits
from gitops_ray.errors import LimitExceeded, RenderError
from gitops_ray.globs import glob_matches
from gitops_ray.render.apps import DirectorySource
from gitops_ray.render.bounds import check_text_size
from gitops_ray.render.documents import (
    Doc,
    is_object,
    looks_like_manifest,
    parse_json,
    parse_yaml,
    read_text,
)
from gitops_ray.render.notes import tolerate
from gitops_ray.render.shapes.settings import CONFIG_DIR

# stdlib logging, not structlog: unconfigured, it writes warnings to stderr and drops info,
# so `gitops-ray render` (an Argo CD plugin) never gets log lines in its YAML on stdout.
log = logging.getLogger(__name__)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
SKIPPED_DIRS = frozenset({".git", CONFIG_DIR})


def render_directory(app_dir: Path, repo_root: Path,
                     options: DirectorySource | None = None) -> list[Doc]:
    """The documents of every selected file under ``app_dir`` (both paths resolved)."""
    docs: list[Doc] = []
    total = 0
    for path in manifest_files(app_dir, repo_root, options or DirectorySource()):
        total += path.stat().st_size
        check_text_size(total, origin=f"{_rel(app_dir, repo_root)}/ (all manifest files)",
                        limit=limits.MAX_RENDER_BYTES)
        docs += file_documents(path, origin=path.relative_to(repo_root).as_posix())
    return docs


def manifest_files(app_dir: Path, repo_root: Path, options: DirectorySource) -> list[Path]:
    """The files Argo CD would read, in its order (see the module docstring)."""
    selected = []
    for path in walk_files(app_dir, recurse=options.recurse):
        relative = path.relative_to(app_dir).as_posix()
        if not is_selected(relative, options):
            continue
        if path.name.endswith(".jsonnet"):
            raise RenderError(f"{_rel(path, repo_root)}: Jsonnet is not supported; render it "
                              "to YAML or exclude it with spec.source.directory.exclude")
        if _readable_inside(path, repo_root):
            selected.append(path)
    return selected


def walk_files(directory: Path, *, recurse: bool) -> Iterator[Path]:
    """Files (and symlinks) under ``directory`` in lexical path order, like Go's Walk."""
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            if recurse and entry.name not in SKIPPED_DIRS:
                yield from walk_files(Path(entry.path), recurse=recurse)
        else:
            yield Path(entry.path)


def is_selected(relative: str, options: DirectorySource) -> bool:
    """Manifest suffix (unless the filter is off), not excluded, included (if set)."""
    if not options.disable_extension_filter and not relative.endswith(
            (*MANIFEST_SUFFIXES, ".jsonnet")):
        return False
    if options.exclude and glob_matches(options.exclude, relative):
        return False
    return not options.include or glob_matches(options.include, relative)


def _readable_inside(path: Path, repo_root: Path) -> bool:
    if not path.is_symlink():
        return path.is_file()
    target = path.resolve()
    if not target.is_relative_to(repo_root):
        raise RenderError(f"{_rel(path, repo_root)}: symlink points outside the repository")
    if not target.is_file():
        log.warning("skipping %s: symlink to a missing or non-regular file",
                    _rel(path, repo_root))
        return False
    return True


def file_documents(path: Path, *, origin: str) -> list[Doc]:
    """The documents of one manifest file, or ``[]`` for YAML that is not a manifest."""
    text = read_text(path, origin=origin)
    if path.name.endswith(".json"):
        return parse_json(text, origin=origin)
    try:
        docs = parse_yaml(text, origin=origin)
    except LimitExceeded:
        raise
    except RenderError as e:
        if looks_like_manifest(text):
            raise
        tolerate(f"skipped {origin}: not valid YAML and not like a Kubernetes manifest "
                 f"({e}); nothing is pruned while it is skipped")
        return []
    if _all_objects(docs) or looks_like_manifest(text) or \
            any(is_object(d.body) or looks_like_object(d.body) for d in docs):
        return docs
    log.info("skipping %s: YAML that is not a Kubernetes manifest", origin)
    return []


def looks_like_object(body: object) -> bool:
    """A mapping with ``metadata`` or ``spec``: meant as an object, whatever its type says."""
    return isinstance(body, dict) and ("metadata" in body or "spec" in body)


def _all_objects(docs: list[Doc]) -> bool:
    return all(d.body is None or is_object(d.body) for d in docs)


def _rel(path: Path, repo_root: Path) -> str:
    try:
        return path.relative_to(repo_root).as_posix()
    except ValueError:
        return str(path)
