"""One memory limit for every child process: helm, kubectl kustomize, git, the jq worker.

Why: under cgroup v2 the kernel's OOM killer takes the whole container when one process
in it goes over the container's limit, and the controller then crash-loops re-rendering
the same commit. A chart of a hundred bytes can make ``helm`` allocate a gigabyte, so
every child is started with ``RLIMIT_DATA`` set to :func:`memory_limit`: an allocation
past it fails *in the child*, which exits, and only its app fails.

``RLIMIT_DATA``, not ``RLIMIT_AS``: Go reserves address space it never touches (helm
and kubectl die at start with ``failed to reserve page summary memory`` below about
1 GiB of ``RLIMIT_AS``), while ``RLIMIT_DATA`` counts only private writable mappings,
which is what a Go heap, glibc's malloc and Python's allocator grow. Go children also get
``GOMEMLIMIT`` (a soft limit) somewhat below it, so the Go runtime collects garbage
harder before it reaches the hard one.

The limit is ``childMemoryLimit`` (:mod:`gitops_ray.settings`) when it is set,
else half of the container's limit (cgroup v2 ``memory.max``, cgroup v1
``memory.limit_in_bytes``), else none. The process that reads the settings calls
:func:`configure` once at start-up; every launch asks :func:`popen_options`.

One limit per child does not bound several at once: eight workers rendering eight
runaway charts would together pass the container's limit. So render children (helm,
kubectl kustomize) also hold a :func:`slot` while they run: together they may reserve
:data:`CHILDREN_SHARE` of the container's memory, each its whole limit, and a render
that would pass it waits for one to end (at least one always runs). With the default
limit (half the container's) that is one render child at a time (a chart's render
takes well under a second); a quarter of the container's lets three run at once.
"""

from __future__ import annotations

import contextlib
import resource
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gitops_ray import limits

CGROUP_V2 = Path("/sys/fs/cgroup/memory.max")
CGROUP_V1 = Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")
AUTO = -1
"""``childMemoryLimit``'s default: half the container's limit (none without one)."""
SHARE = 2
"""A child may use 1/SHARE of the container's memory; the controller keeps the rest."""
MIN_LIMIT = 128 * limits.MIB
"""Below this helm v3.19 does not start (measured: it dies at 112 MiB of ``RLIMIT_DATA``
before reading the chart); a smaller setting is raised to it."""
CHILDREN_SHARE = 0.75
"""Render children together reserve at most this share of the container's memory."""
GO_SOFT_SHARE = 0.8
"""``GOMEMLIMIT`` is this share of the hard limit."""
_NO_LIMIT_V1 = 1 << 60  # cgroup v1 writes a page-rounded 2**63 - 1 for "unlimited"
REASON = "MemoryLimitExceeded"
"""The machine-readable word in the error of a child stopped by the limit."""
OUT_OF_MEMORY_MARKERS = (
    "fatal error: runtime: out of memory",  # Go (helm, kubectl kustomize)
    "runtime: cannot allocate memory",
    "out of memory",  # git: "fatal: Out of memory, malloc failed"
    "cannot allocate memory",  # libc, jq
    "memoryerror",  # Python (the jq worker)
)

_configured = [AUTO]  # the setting, once the process has read it


def configure(memory: int) -> None:
    """Set the limit in bytes (``AUTO``: derived from the container; 0: no limit)."""
    _configured[0] = memory


def container_memory(v2: Path = CGROUP_V2, v1: Path = CGROUP_V1) -> int | None:
    """The container's memory limit in bytes, or ``None`` when it has none (or no cgroup)."""
    for path in (v2, v1):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit():
            return None
        value = int(text)
        return None if value >= _NO_LIMIT_V1 else value
    return None


def memory_limit(configured: int | None = None, container: int | None = None) -> int:
    """Bytes a child may allocate (0: unlimited), from the setting or the container."""
    chosen = _configured[0] if configured is None else configured
    if chosen == AUTO:
        found = container_memory() if container is None else container
        return max(found // SHARE, MIN_LIMIT) if found else 0
    return max(chosen, MIN_LIMIT) if chosen > 0 else 0


def _limiter(limit: int) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec: no locks, no imports
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return apply


def popen_options(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for :class:`subprocess.Popen` (or GitPython's ``execute``).

    ``preexec_fn`` setting the limit, and ``env`` (when given) with ``GOMEMLIMIT``.
    """
    limit = memory_limit()
    if not limit:
        return {} if env is None else {"env": env}
    options: dict[str, Any] = {"preexec_fn": _limiter(limit)}
    if env is not None:
        options["env"] = {**env, "GOMEMLIMIT": str(int(limit * GO_SOFT_SHARE))}
    return options


class _Budget:
    """Bytes reserved by running children, and a wait for room."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.used = 0

    @contextlib.contextmanager
    def held(self, amount: int, total: int) -> Iterator[None]:
        with self._cond:
            while self.used and self.used + amount > total:
                self._cond.wait()
            self.used += amount
        try:
            yield
        finally:
            with self._cond:
                self.used -= amount
                self._cond.notify_all()


_BUDGET = _Budget()


def slot(container: int | None = None) -> contextlib.AbstractContextManager[None]:
    """Hold room for one render child's limit while it runs (see the module docstring).

    No wait without a container limit or with the limit switched off.
    """
    limit = memory_limit()
    found = container_memory() if container is None else container
    if not limit or not found:
        return contextlib.nullcontext()
    return _BUDGET.held(limit, int(found * CHILDREN_SHARE))


def out_of_memory(returncode: int, stderr: str) -> bool:
    """Whether a child that exited ``returncode`` with ``stderr`` ran out of memory."""
    if returncode == 0:
        return False
    text = stderr.lower()
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


def explain(what: str) -> str:
    """The error message for ``what`` stopped by the limit (no output of the child)."""
    limit = memory_limit()
    size = f"{limit // limits.MIB} MiB" if limit else "the memory available"
    return (f"{what}: {REASON}: it went over its memory limit of {size} "
            "(childMemoryLimit, default half the container's) and was stopped")
