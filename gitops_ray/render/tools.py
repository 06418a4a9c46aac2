"""Running helm and kubectl the way a render server must: sandboxed, bounded, explained.

* Each run gets a fresh temporary ``HOME`` (plus ``XDG_*`` and ``HELM_*`` homes) and a
  ``KUBECONFIG`` that does not exist, so neither the user's helm repositories, plugins and
  registry logins nor their cluster credentials can change (or leak into) a render. This
  is what Argo CD's repo-server does with its per-request helm homes.
* Only ``PATH`` and locale variables are inherited from our environment.
* A run that fails raises :class:`RenderError` with the tool's stderr (trimmed), because
  that is where helm and kustomize say which template or patch is wrong. Never its
  stdout, which is the rendered objects (their values); values Go's YAML decoder quotes
  in backticks (``cannot unmarshal !!str `...` into int``) are cut, URLs are redacted.
* Tools that write into the directory they render (``helm dependency build``, kustomize
  overrides) get a scratch copy of the checkout, never the shared checkout itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gitops_ray.errors import RenderError
from gitops_ray.redact import redact

TIMEOUT_SECONDS = 300
MAX_STDERR = 4000
_INHERITED = ("PATH", "LANG", "LC_ALL", "TMPDIR")
_BACKTICKED = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class ToolResult:
    """Exit status and output of one run."""

    returncode: int
    stdout: str
    stderr: str


def sandbox_env(home: Path) -> dict[str, str]:
    """Environment for a tool run whose every home directory lives under ``home``."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env.update(HOME=str(home), KUBECONFIG=str(home / "no-kubeconfig"))
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"XDG_{name}_HOME"] = str(home / name.lower())
        env[f"HELM_{name}_HOME"] = str(home / "helm" / name.lower())
    return env


def run_tool(argv: Sequence[str], *, what: str, hint: str = "",
             cwd: Path | None = None) -> ToolResult:
    """Run ``argv`` sandboxed; raise only if it cannot run at all (missing, timeout)."""
    with tempfile.TemporaryDirectory(prefix="gitops-ray-home-") as home:
        try:
            proc = subprocess.run(list(argv), cwd=cwd, env=sandbox_env(Path(home)),
                                  capture_output=True, text=True, check=False,
                                  timeout=TIMEOUT_SECONDS)
        except FileNotFoundError as e:
            raise RenderError(f"{what}: {argv[0]} not found{'; ' + hint if hint else ''}") \
                from e
        except PermissionError as e:
            raise RenderError(f"{what}: {argv[0]} is not executable") from e
        except subprocess.TimeoutExpired as e:
            raise RenderError(f"{what}: timed out after {TIMEOUT_SECONDS}s") from e
    return ToolResult(proc.returncode, proc.stdout, proc.stderr)


def tool_error(what: str, result: ToolResult, *,
               replace: Mapping[str, str] | None = None) -> RenderError:
    """The error for a failed run: ``what``, the exit code and stderr.

    ``replace`` rewrites temporary paths in stderr into names the user knows (for example
    the file holding ``helm.values`` becomes ``spec.source.helm.values``).
    """
    stderr = redact(_BACKTICKED.sub("`…`", result.stderr.strip()))
    for old, new in (replace or {}).items():
        stderr = stderr.replace(old, new)
    if len(stderr) > MAX_STDERR:
        stderr = stderr[:MAX_STDERR] + " [...]"
    return RenderError(f"{what} failed (exit {result.returncode}): {stderr or 'nothing on stderr'}")


@contextmanager
def scratch_copy(repo_root: Path) -> Iterator[Path]:
    """A throw-away copy of the checkout (without ``.git``), symlinks kept as symlinks."""
    with tempfile.TemporaryDirectory(prefix="gitops-ray-scratch-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(repo_root, copy, symlinks=True,
                        ignore=shutil.ignore_patterns(".git"))
        yield copy
