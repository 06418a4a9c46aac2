"""One directory per commit, derived from the previous one: a one-line commit costs one file.

Why: every new commit of the config repo needs its tree on disk for the renderers (Helm and
``kubectl kustomize`` read directories). Extracting the whole commit with ``git archive``
costs time in proportion to the repository: at 5,000 RayClusters (some 100 MB of YAML)
about 2.5 s per commit, most of a commit -> applied latency. So a new tree is made from
the most recently used one: hard links to its files (``cp -al``, no data copied), then
only the paths ``git diff`` names between the two commits are removed and written from
``git archive <commit> -- <paths>``. Git reports content, mode and type changes
(symlinks included), and the archive applies the same attributes as a full extraction, so
the result is byte-for-byte what a full extraction gives.

Hard links are safe because trees are read-only by convention: renderers that write get a
scratch copy (:func:`gitops_ray.render.tools.scratch_copy`), and a changed path is
unlinked before it is written, never written through. A diff too large to pay off, a
submodule, a changed ``.gitattributes`` or any git error falls back to the full
extraction. The same list of changed paths (:func:`changes`) tells the render
cache which apps a commit cannot have touched.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

import git

from gitops_ray import childproc

KEEP_TREES = 16
LINK_COPY = ("cp", "-al", "--")  # GNU and BusyBox cp: hard links, symlinks kept as links
LINK_COPY_TIMEOUT_S = 300
KEEP_CHANGES = 64  # remembered commit pairs
MAX_CHANGED_PATHS = 500  # beyond this a full extraction is as fast and simpler
_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_GITLINK = "160000"


def existing_tree(mirror: Path, sha: str) -> Path | None:
    """``trees/<sha>`` if it was made already (then the commit is local too)."""
    target = mirror.parent / "trees" / sha
    if not target.is_dir():
        return None
    os.utime(target)  # recently used: evicted last
    return target


def tree(mirror: Path, sha: str) -> Path:
    """``trees/<sha>`` next to ``mirror``, made once (from the newest tree if there is one)."""
    found = existing_tree(mirror, sha)
    if found is not None:
        return found
    trees = mirror.parent / "trees"
    target = trees / sha
    trees.mkdir(exist_ok=True)
    base = _newest(trees)
    with tempfile.TemporaryDirectory(dir=trees) as tmp:
        made = Path(tmp) / "tree"
        if base is None or not _derive(mirror, base, sha, made, Path(tmp)):
            shutil.rmtree(made, ignore_errors=True)
            _extract(mirror, sha, [], made, Path(tmp))
        os.rename(made, target)
    _evict(trees)
    return target


def _evict(trees: Path) -> None:
    """Keep the :data:`KEEP_TREES` most recently used trees of a repository."""
    for old in _trees(trees)[KEEP_TREES:]:
        shutil.rmtree(old, ignore_errors=True)


def _trees(trees: Path) -> list[Path]:
    """Complete trees, most recently used first."""
    return sorted((p for p in trees.iterdir() if p.is_dir() and _FULL_SHA.match(p.name)),
                  key=lambda p: p.stat().st_mtime, reverse=True)


def _newest(trees: Path) -> Path | None:
    found = _trees(trees)
    return found[0] if found else None


def _derive(mirror: Path, base: Path, sha: str, made: Path, scratch: Path) -> bool:
    """Make ``made`` from ``base`` plus the changes to ``sha``; False if not worth it."""
    changed = changes(mirror, base.name, sha)
    if changed is None:
        return False
    try:
        _link_copy(base, made)
        for _, path in changed:
            _remove(made, path)
        written = [path for status, path in changed if status != "D"]
        if written:
            _extract(mirror, sha, written, made, scratch)
    except (OSError, shutil.Error, git.GitCommandError):
        return False  # e.g. the base was evicted meanwhile by another process
    return True


def _link_copy(base: Path, made: Path) -> None:
    """``made``: ``base`` with every file hard-linked, symlinks kept as links.

    ``cp -al`` makes it in one process: Python's ``copytree`` issues several system calls
    per file, each giving up and taking back the GIL, which the controller's other
    threads hold most of the time under load (0.6 s for 5,000 files, on the path of
    every commit). Where ``cp`` lacks ``-l`` (BSD), ``copytree`` does the same.
    """
    try:
        subprocess.run([*LINK_COPY, str(base), str(made)], check=True, capture_output=True,
                       timeout=LINK_COPY_TIMEOUT_S, **childproc.popen_options())
        return
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(made, ignore_errors=True)
    shutil.copytree(base, made, symlinks=True, copy_function=os.link)


def changes(mirror: Path, old: str, new: str) -> tuple[tuple[str, str], ...] | None:
    """``(status, path)`` per file that differs between commits ``old`` and ``new``.

    ``None`` when the paths alone do not say what changed in the trees: a diff over
    :data:`MAX_CHANGED_PATHS`, a submodule, a changed ``.gitattributes`` (its ``eol`` or
    ``text`` settings change how unchanged files are written), or a git error. The
    mirror's ``info/attributes`` turns ``export-ignore`` and ``export-subst`` off, so
    neither makes a file differ without git naming it.
    Remembered per pair: every app of a repository asks the same question per commit.
    """
    key = (str(mirror), old, new)
    with _changes_lock:
        if key in _changes_memo:
            _changes_memo.move_to_end(key)
            return _changes_memo[key]
    found = _changes(mirror, old, new)
    with _changes_lock:
        _changes_memo[key] = found
        while len(_changes_memo) > KEEP_CHANGES:
            _changes_memo.popitem(last=False)
    return found


_changes_memo: collections.OrderedDict[tuple[str, str, str],
                                       tuple[tuple[str, str], ...] | None] = \
    collections.OrderedDict()
_changes_lock = threading.Lock()


def _changes(mirror: Path, old: str, new: str) -> tuple[tuple[str, str], ...] | None:
    """:func:`changes`, asked of git (renames as delete + add)."""
    try:
        out = git.Git(str(mirror)).execute(
            ["git", "diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new],
            stdout_as_string=True, **childproc.popen_options())
    except git.GitCommandError:
        return None
    fields = str(out).split("\0")
    found = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.split()  # ":oldmode newmode oldsha newsha status"
        if len(parts) != 5 or _GITLINK in (parts[0].lstrip(":"), parts[1]):
            return None
        if path.rsplit("/", 1)[-1] == ".gitattributes":
            return None
        found.append((parts[4][0], path))
    if len(found) > MAX_CHANGED_PATHS:
        return None
    return tuple(found)


def _remove(root: Path, rel: str) -> None:
    """Unlink ``rel`` (never write through a shared link) and its emptied parents."""
    path = root / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    parent = path.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _extract(mirror: Path, sha: str, paths: list[str], dest: Path, scratch: Path) -> None:
    """Write ``paths`` of ``sha`` (all of it when empty) into ``dest`` via ``git archive``."""
    archive = scratch / "tree.tar"
    args = ["git", "archive", "--format=tar", sha]
    if paths:
        args += ["--", *(f":(literal){p}" for p in paths)]
    with open(archive, "wb") as handle:
        git.Git(str(mirror)).execute(args, output_stream=handle, **childproc.popen_options())
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="tar")  # keeps symlinks for safepath to judge
    except tarfile.ReadError:
        # A commit without files archives as a lone header that tarfile rejects.
        if git.Git(str(mirror)).execute(["git", "ls-tree", sha], stdout_as_string=True,
                                        **childproc.popen_options()):
            raise
    archive.unlink()
