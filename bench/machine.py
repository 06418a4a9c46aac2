"""What a figure was measured on, and the small statistics every benchmark reports.

Figures without the machine are meaningless (2 cores and 200 cores give different
answers), so every results file carries :func:`machine_info`, including the load average
when the run started: other work on a shared machine shows up there, not in the figures.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _tool_version(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if out.stdout or out.stderr \
        else None


def machine_info() -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "go": _tool_version(["go", "version"]),
        "kubectl": _tool_version(["kubectl", "version", "--client"]),
        "load_average_1_5_15m": list(os.getloadavg()),
        "code": code_revision(),
    }


def code_revision() -> dict[str, Any]:
    """The commit measured, and whether gitops_ray/ had uncommitted changes (shared tree)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                             check=False)
        return out.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "gitops_ray_dirty": bool(git("status", "--porcelain", "--", "gitops_ray"))}


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (``q=0.5`` median, ``q=0.99`` p99), as the Go side computes it."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, p99, min and max of a list of samples."""
    return {"median": quantile(values, 0.5), "p99": quantile(values, 0.99),
            "min": min(values), "max": max(values), "n": len(values)}
