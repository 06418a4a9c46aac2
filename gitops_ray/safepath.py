"""Keep every path a config repo names inside that repo.

An Application's ``source.path``, a Helm ``valueFiles`` entry or a symlink committed to the
repo are all user input. Followed naively they can read the controller's own files
(``../../etc``, ``/var/run/secrets``, a link to ``/``) and leak them into rendered
manifests. Both the source and the render stage call these checks, so they live here,
outside either stage. Links that stay inside the repository are fine (charts often share
files that way).
"""

from __future__ import annotations

import os
from pathlib import Path

from gitops_ray.errors import SourceError


def safe_path(root: Path, relative: str) -> Path:
    """``root / relative`` resolved, or :class:`SourceError` if it leaves ``root``.

    Rejects absolute paths, ``..`` that climbs out, and symlinks (on the way or at the end)
    that point outside; the error names the path and, for a link, the link.
    """
    if "\0" in relative:
        raise SourceError(f"path {relative!r} contains a NUL byte")
    if os.path.isabs(relative):
        raise SourceError(f"path {relative!r} is absolute; paths must be relative to the "
                          "repository root")
    base = root.resolve()
    if not _inside(base, Path(os.path.normpath(base / relative))):
        raise SourceError(f"path {relative!r} escapes the repository")
    resolved = _resolve(base / relative, relative)
    if not _inside(base, resolved):
        link = _first_escaping_link(base, relative)
        raise SourceError(f"path {relative!r} goes through a symlink that points outside "
                          f"the repository: {link!r}")
    return resolved


def check_no_escaping_symlinks(root: Path, directory: Path) -> None:
    """Reject any symlink below ``directory`` that resolves outside ``root``.

    Raises :class:`SourceError` naming the first such link (in sorted walk order), relative
    to the repository root.
    """
    base = root.resolve()
    for current, dirs, files in os.walk(directory.resolve()):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(current) / name
            if not path.is_symlink():
                continue
            link = os.path.relpath(path, base)
            if not _inside(base, _resolve(path, link)):
                raise SourceError(f"symlink {link!r} points outside the repository")


def _inside(base: Path, path: Path) -> bool:
    return path == base or base in path.parents


def _resolve(path: Path, shown: str) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError) as e:  # RuntimeError: a symlink loop (Python 3.11)
        raise SourceError(f"path {shown!r} cannot be resolved (symlink loop?): "
                          f"{type(e).__name__}") from None


def _first_escaping_link(base: Path, relative: str) -> str:
    """The first component of ``relative`` that is a symlink resolving outside ``base``."""
    current = base
    for part in Path(relative).parts:
        current = current / part
        if current.is_symlink() and not _inside(base, _resolve(current, relative)):
            return os.path.relpath(current, base)
    return relative
