"""Running helm and kubectl the way a render server must: sandboxed, bounded, explained.

* Each run gets a fresh temporary ``HOME`` (plus ``XDG_*`` and ``HELM_*`` homes) and a
  ``KUBECONFIG`` that does not exist, so neither the user's helm repositories, plugins and
  registry logins nor their cluster credentials can change (or leak into) a render. This
  is what Argo CD's repo-server does with its per-request helm homes.
* Only ``PATH`` and locale variables are inherited from our environment.
* Output is bounded: a tool that prints more than ``limits.MAX_RENDER_BYTES`` (a chart
  that loops over ``until 10000000``) is killed and its app fails, instead of the whole
  output landing in the controller's memory; stderr keeps only its last ``MAX_STDERR``
  characters for the same reason.
* Memory is bounded too (:mod:`gitops_ray.childproc`, as for every child): a run that
  goes over ``childMemoryLimit`` dies alone and raises :class:`ChildMemoryExceeded`
  (``MemoryLimitExceeded``), instead of the kernel killing the whole container; runs
  at once reserve at most 3/4 of the container's memory between them (``slot``).
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
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gitops_ray import childproc, limits
from gitops_ray.errors import (
    ChildMemoryExceeded,
    ChildTimedOut,
    LimitExceeded,
    RenderError,
    SourceError,
)
from gitops_ray.redact import redact
from gitops_ray.safepath import safe_path

HELM_BIN = "helm"
"""The helm v3 binary when none is configured (looked up on ``PATH``)."""
KUBECTL_BIN = "kubectl"
"""The kubectl binary that runs ``kubectl kustomize``."""
TIMEOUT_SECONDS = 300
MAX_STDERR = 4000
_INHERITED = ("PATH", "LANG", "LC_ALL", "TMPDIR")
_BACKTICKED = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class RenderTools:
    """The external programs a render runs, and where a Helm value file may come from.

    One type for every caller (the controller's pipeline, the one-shot commands,
    :func:`gitops_ray.render.render_app`), built from the settings ``helm`` and
    ``render.valueFileHosts``; cluster facts are per render and passed beside it.
    """

    helm_bin: str | Path = HELM_BIN
    kubectl_bin: str = KUBECTL_BIN
    value_file_hosts: tuple[str, ...] = ()  # setting render.valueFileHosts


@dataclass(frozen=True)
class ToolResult:
    """Exit status and output of one run."""

    returncode: int
    stdout: str
    stderr: str


def sandbox_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a tool run whose every home directory lives under ``home``."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env.update(HOME=str(home), KUBECONFIG=str(home / "no-kubeconfig"))
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"XDG_{name}_HOME"] = str(home / name.lower())
        env[f"HELM_{name}_HOME"] = str(home / "helm" / name.lower())
    return {**env, **(extra or {})}


def run_tool(argv: Sequence[str], *, what: str, hint: str = "",
             cwd: Path | None = None, max_output: int = limits.MAX_RENDER_BYTES,
             env: Mapping[str, str] | None = None) -> ToolResult:
    """Run ``argv`` sandboxed; raise if it cannot run, times out, prints too much or OOMs.

    ``env`` adds variables to the sandbox's environment.
    """
    with tempfile.TemporaryDirectory(prefix="gitops-ray-home-") as home, \
            tempfile.TemporaryFile() as stderr, childproc.slot():
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=stderr,
                                    **childproc.popen_options(sandbox_env(Path(home), env)))
        except FileNotFoundError as e:
            raise RenderError(f"{what}: {argv[0]} not found{'; ' + hint if hint else ''}") \
                from e
        except PermissionError as e:
            raise RenderError(f"{what}: {argv[0]} is not executable") from e
        stdout = _bounded_output(proc, what, max_output)
        result = ToolResult(proc.returncode, stdout, _tail(stderr))
    if childproc.out_of_memory(result.returncode, result.stderr):
        raise ChildMemoryExceeded(childproc.explain(what))
    return result


def _bounded_output(proc: subprocess.Popen[bytes], what: str, max_output: int) -> str:
    """All of ``proc``'s stdout once it exits; kills it past the time or size bound."""
    assert proc.stdout is not None
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(TIMEOUT_SECONDS, expire)
    timer.start()
    try:
        data = proc.stdout.read(max_output + 1)
        if len(data) > max_output:
            proc.kill()
        proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()
    if timed_out.is_set():
        raise ChildTimedOut(f"{what}: timed out after {TIMEOUT_SECONDS}s")
    if len(data) > max_output:
        raise LimitExceeded(f"{what}: printed more than {max_output // limits.MIB} MiB "
                            "(gitops_ray.limits.MAX_RENDER_BYTES); stopped")
    return data.decode("utf-8", errors="replace")


def _tail(stream: IO[bytes]) -> str:
    """The last ``MAX_STDERR`` characters (a few more bytes) written to ``stream``."""
    stream.seek(0, os.SEEK_END)
    stream.seek(max(stream.tell() - 4 * MAX_STDERR, 0))
    return stream.read().decode("utf-8", errors="replace")


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


def inside(root: Path, relative: str, shown: str, *, outside: str = "the repository") -> Path:
    """``relative`` (normalised, POSIX) as a path inside ``root``, or the render's error.

    The one check of every path a chart, a kustomization or a value file names (a
    ``file://`` dependency, a base or resource, a value file): ``../`` is refused by name,
    and :func:`~gitops_ray.safepath.safe_path` refuses a symlink out of ``root``.
    ``shown`` names the entry in the message, ``outside`` the root.
    """
    if relative == ".." or relative.startswith("../"):
        raise RenderError(f"{shown} resolves outside {outside}")
    try:
        return safe_path(root, relative)
    except SourceError as e:
        raise RenderError(f"{shown}: {e}") from e
