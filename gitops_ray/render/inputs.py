"""What a render reads, as one digest: lets a new commit reuse an app's last render.

A one-line commit should re-render one app, not every app in the repo, so the render
cache compares this digest between commits. It must cover everything the render reads,
or a commit is silently never applied. That is why it lives in ``render`` and is built
from render's own decisions, not from a second copy of them:

* the source type (``source_type``): only plain directories are digested; Helm and
  Kustomize can read files anywhere in the repo (``../base``, value files), so they get
  ``None`` and are re-rendered on every new commit;
* the manifest files that ``render_directory`` would read (``manifest_files``: the same
  selection, recurse/include/exclude and symlink rules), each by the path render names it
  and the **content of the file it resolves to**, so editing ``shared/rc.yaml`` changes
  the digest of an app holding the link ``rc.yaml -> ../shared/rc.yaml``;
* the pod-shape directories that apply (``config_dirs``; their presence alone changes
  the default provider) and the files ``expand`` reads from them, resolved the same way;
* the in-cluster pod-shape ConfigMaps (:attr:`ClusterShapes.version`).

Anything unexpected (a path that does not exist, a symlink that escapes) gives ``None``:
the render then runs and reports the error itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gitops_ray.errors import GitOpsRayError
from gitops_ray.render.apps import Application, DirectorySource
from gitops_ray.render.manifests import manifest_files
from gitops_ray.render.pipeline import DIRECTORY, app_directory, source_type
from gitops_ray.render.shapes import ClusterShapes
from gitops_ray.render.shapes.settings import (
    CATALOG_FILE,
    PATCHES_FILE,
    SETTINGS_FILE,
    config_dirs,
)
from gitops_ray.safepath import check_no_escaping_symlinks

SHAPE_FILES = (CATALOG_FILE, PATCHES_FILE, SETTINGS_FILE)


def input_digest(app: Application, root: Path, *,
                 cluster: ClusterShapes | None = None) -> str | None:
    """A digest of everything ``render_app(app, root)`` reads, or ``None`` (see module)."""
    try:
        files = read_set(app, root.resolve())
        if files is None:
            return None
        digest = hashlib.sha256(f"cluster:{cluster.version if cluster else ''}\0".encode())
        for name, path in files:
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest() if path else b"-")
    except (GitOpsRayError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return None
    return digest.hexdigest()


def read_set(app: Application, root: Path) -> list[tuple[str, Path | None]] | None:
    """(name, file to read or ``None`` for a directory) of a plain-directory app, in order."""
    if app.source.chart:
        return None
    app_dir = app_directory(root, app.source.path)
    if source_type(app.source, app_dir) != DIRECTORY:
        return None
    check_no_escaping_symlinks(root, app_dir)
    options = app.source.directory or DirectorySource()
    out: list[tuple[str, Path | None]] = [
        (_name(path, root), path) for path in manifest_files(app_dir, root, options)]
    for directory in config_dirs(root, app_dir):
        out.append((_name(directory, root) + "/", None))
        out += [(_name(directory / f, root), directory / f) for f in SHAPE_FILES
                if (directory / f).is_file()]
    return out


def _name(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` as render names it (a link by its own name)."""
    return path.relative_to(root).as_posix()
