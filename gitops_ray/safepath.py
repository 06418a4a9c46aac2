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


def check_no_escaping_symlinks(root: Path, *directories: Path) -> None:
    """Reject any symlink a tool could reach from ``directories`` that resolves outside ``root``.

    Everything below each directory is walked, and so is every directory a symlink there
    leads to (inside ``root``: one that leads outside is the error): helm loads a chart
    by following links, so a link to ``../shared`` makes ``shared``'s own links part of
    the chart. Each real directory is walked once, so links that loop cost nothing more.
    Raises :class:`SourceError` naming the first such link (in sorted walk order) by its
    path relative to the repository root, and the link it was reached through; never
    the target (a path, or worse, what the file holds).
    """
    base = root.resolve()
    seen: set[Path] = set()
    pending = [(_start(base, d), "") for d in directories]
    while pending:
        directory, via = pending.pop()
        if directory in seen or not directory.is_dir():
            continue
        seen.add(directory)
        pending += _walk_one(base, directory, via)


def _start(base: Path, directory: Path) -> Path:
    """``directory`` resolved; it must itself be inside ``base`` (it may be a link)."""
    shown = os.path.relpath(directory, base)
    resolved = _resolve(directory, shown)
    if not _inside(base, resolved):
        raise SourceError(f"symlink {_first_escaping_link(base, shown)!r} points outside "
                          "the repository")
    return resolved


def _walk_one(base: Path, directory: Path, via: str) -> list[tuple[Path, str]]:
    """The directories ``directory``'s links lead to (each with the link's name)."""
    found: list[tuple[Path, str]] = []
    for current, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(current) / name
            if not path.is_symlink():
                continue
            link = os.path.relpath(path, base)
            target = _resolve(path, link)
            if not _inside(base, target):
                through = f" (reached through {via!r})" if via else ""
                raise SourceError(f"symlink {link!r}{through} points outside the repository")
            if target.is_dir():
                found.append((target, via or link))
    return found


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
