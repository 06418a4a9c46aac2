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

Reading every file of every app on every commit still costs a system call or three per
file (5,000 at 5,000 RayClusters, each giving up the GIL). So the digest also says where
everything it read lives (:attr:`Inputs.scope`): the app's directory and the repository's
``.gitops-ray/``, when no symlink was followed on the way. A later commit whose changed
paths (from git) touch neither leaves the digest as it was, and it is not computed again
(:func:`touches`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gitops_ray.errors import GitOpsRayError
from gitops_ray.render.apps import Application, DirectorySource
from gitops_ray.render.manifests import manifest_files
from gitops_ray.render.pipeline import DIRECTORY, app_directory, source_type
from gitops_ray.render.shapes import ClusterShapes
from gitops_ray.render.shapes.settings import (
    CATALOG_FILE,
    CONFIG_DIR,
    PATCHES_FILE,
    SETTINGS_FILE,
    config_dirs,
)
from gitops_ray.safepath import check_no_escaping_symlinks

SHAPE_FILES = (CATALOG_FILE, PATCHES_FILE, SETTINGS_FILE)


@dataclass(frozen=True)
class Inputs:
    """The digest of what a render reads, and where in the repository all of it lives."""

    digest: str
    scope: tuple[str, ...] | None  # repository paths holding every input; None: unknown


def input_digest(app: Application, root: Path, *,
                 cluster: ClusterShapes | None = None) -> str | None:
    """A digest of everything ``render_app(app, root)`` reads, or ``None`` (see module)."""
    found = render_inputs(app, root, cluster=cluster)
    return found.digest if found is not None else None


def render_inputs(app: Application, root: Path, *,
                  cluster: ClusterShapes | None = None) -> Inputs | None:
    """:func:`input_digest` and its scope, or ``None`` (see the module docstring)."""
    try:
        base = root.resolve()
        files = read_set(app, base)
        if files is None:
            return None
        digest = hashlib.sha256(f"cluster:{cluster.version if cluster else ''}\0".encode())
        for name, path in files:
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest() if path else b"-")
        scope = _scope(app, base, files)
    except (GitOpsRayError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return None
    return Inputs(digest.hexdigest(), scope)


def _scope(app: Application, root: Path, files: list[tuple[str, Path | None]]
           ) -> tuple[str, ...] | None:
    """The app's directory and ``.gitops-ray``, if every input lies in them, unlinked.

    Directories under the app's are walked without following links
    (:func:`~gitops_ray.render.manifests.walk_files`), so a file that is not a symlink,
    in a directory that is none either, is where its name says.
    """
    app_dir = app_directory(root, app.source.path)  # resolved
    named = root / (app.source.path or ".")
    if ".." in Path(app.source.path).parts or named.absolute() != app_dir:
        return None  # a link on the way, or a path through one
    for config in (root / CONFIG_DIR, app_dir / CONFIG_DIR):
        if config.is_symlink():
            return None
    if any(path is not None and path.is_symlink() for _, path in files):
        return None
    within = app_dir.relative_to(root).as_posix()
    return ("",) if within == "." else (within, CONFIG_DIR)


def touches(changed: Iterable[str], scope: tuple[str, ...]) -> bool:
    """Whether a changed repository path lies in, on or above one of ``scope``'s paths."""
    return any(not within or path == within or path.startswith(within + "/")
               or within.startswith(path + "/") for path in changed for within in scope)


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
