"""Keep every path a config repo names inside that repo.

An Application's ``source.path``, a Helm ``valueFiles`` entry or a symlink committed to the
repo are all user input. Followed naively they can read the controller's own files
(``../../etc``, ``/var/run/secrets``, a link to ``/``) and leak them into rendered
manifests. Both the source and the render stage call these checks, so they live here,
outside either stage.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitops_ray.errors import SourceError


def safe_path(root: Path, relative: str) -> Path:
    """``root / relative`` resolved, or :class:`SourceError` if it leaves ``root``."""
    if os.path.isabs(relative):
        raise SourceError(f"path {relative!r} is absolute; paths must be relative to the "
                          "repository root")
    base = root.resolve()
    candidate = base / relative
    resolved = candidate.resolve()
    if resolved != base and base not in resolved.parents:
        lexical = Path(os.path.normpath(candidate))
        if lexical != base and base not in lexical.parents:
            raise SourceError(f"path {relative!r} escapes the repository")
        raise SourceError(f"path {relative!r} goes through a symlink that points outside "
                          "the repository")
    return resolved


def check_no_escaping_symlinks(root: Path, directory: Path) -> None:
    """Reject any symlink below ``directory`` that resolves outside ``root``.

    Raises :class:`SourceError` naming the first such link.
    """
    base = root.resolve()
    for current, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            path = Path(current) / name
            if not path.is_symlink():
                continue
            target = path.resolve()
            if target != base and base not in target.parents:
                link = os.path.relpath(path, root)
                raise SourceError(f"symlink {link!r} points outside the repository")
