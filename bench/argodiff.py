"""Build and run ``bench/argodiff``, the Go binary that times Argo CD's own diff.

Why a Go binary: the comparison is only fair against the real thing, gitops-engine's
``pkg/diff`` with argo-cd's ``NewIgnoreNormalizer``, and those are Go libraries. The
binary is compiled from the Go module proxy on first use into the gitops-ray cache
(``~/.cache/gitops-ray/bench/argodiff-<hash>/``, override the root with
``GITOPS_RAY_CACHE``), keyed by a hash of the module's sources so an edit rebuilds it and
nothing built is ever committed. As in ``localcluster.build``, the build runs
in a temporary directory that is renamed into place, under a file lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from localcluster.build import cache_dir

MODULE_DIR = Path(__file__).resolve().parent / "argodiff"
SOURCES = ("go.mod", "go.sum", "main.go")


def source_hash() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((MODULE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def binary_path() -> Path:
    return cache_dir() / "bench" / f"argodiff-{source_hash()}" / "argodiff"


def ensure_argodiff() -> Path:
    """The path of the argodiff binary, building it first when it is missing."""
    target = binary_path()
    if target.exists():
        return target
    go = shutil.which("go")
    if not go:
        raise RuntimeError("Go >= 1.26 is needed to build bench/argodiff")
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / ".argodiff.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        print("bench: building bench/argodiff (gitops-engine, argo-cd) from Go modules",
              file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(dir=target.parent.parent) as tmp:
            subprocess.run(
                ["nice", "-n", "10", go, "build", "-trimpath", "-ldflags", "-s -w",
                 "-o", str(Path(tmp) / "argodiff"), "."],
                cwd=MODULE_DIR, check=True, env={**os.environ, "GOFLAGS": "-mod=mod"})
            shutil.rmtree(target.parent, ignore_errors=True)
            os.rename(tmp, target.parent)
            os.chmod(target.parent, 0o755)
    return target


def run_argodiff(cases: list[dict[str, Any]], *, rules: list[dict[str, Any]],
                 overrides: dict[str, Any], rounds: int,
                 cpu_profile: Path | None = None) -> dict[str, Any]:
    """Time gitops-engine on ``cases`` (``{"desired","predicted","live"}`` dicts)."""
    return _run({"rounds": rounds, "rules": rules, "overrides": overrides, "cases": cases},
                cpu_profile)


def run_argodiff_bytes(files: dict[str, str], *, rules: list[dict[str, Any]],
                       overrides: dict[str, Any], rounds: int, patch_all: bool = False,
                       cpu_profile: Path | None = None) -> dict[str, Any]:
    """Time gitops-engine from JSON bytes to a serialised patch.

    ``files``: ``{"desired","predicted","live"}`` paths, one compact JSON object per line.
    """
    return _run({"rounds": rounds, "rules": rules, "overrides": overrides, "mode": "bytes",
                 "patch": "all" if patch_all else "modified", "files": files}, cpu_profile)


def _run(request: dict[str, Any], cpu_profile: Path | None) -> dict[str, Any]:
    binary = ensure_argodiff()
    env = dict(os.environ)
    if cpu_profile is not None:
        env["ARGODIFF_CPUPROFILE"] = str(cpu_profile)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(request, handle)
    try:
        out = subprocess.run([str(binary), handle.name], check=True, capture_output=True,
                             text=True, env=env)
    finally:
        os.unlink(handle.name)
    result: dict[str, Any] = json.loads(out.stdout)
    return result
