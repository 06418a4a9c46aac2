"""A git repository on disk to commit into, real git (no mocks)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml


class GitRepo:
    """A bare repository on disk plus a work tree to commit into (real git, no mocks)."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        root.mkdir(parents=True, exist_ok=True)
        self._git(root, "init", "--bare", "-b", "main", str(self.bare))
        self._git(root, "clone", "-q", str(self.bare), str(self.work))

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    @staticmethod
    def _git(cwd: Path, *args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
            cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()

    def git(self, *args: str) -> str:
        return self._git(self.work, *args)

    def write(self, files: dict[str, str | object]) -> None:
        for rel, content in files.items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                path.unlink(missing_ok=True)
            elif isinstance(content, str):
                path.write_text(content)
            else:
                path.write_text(yaml.safe_dump_all(content if isinstance(content, list)
                                                   else [content]))

    def commit(self, files: dict[str, str | object], message: str = "update",
               branch: str = "main") -> str:
        """Write (``None`` deletes), commit and push; return the new commit SHA."""
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        self.git("push", "-q", "origin", f"HEAD:{branch}")
        return self.git("rev-parse", "HEAD")
