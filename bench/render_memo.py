"""Re-rendering one app after a one-line commit: with the parse memo, and without it.

Why: the render cache is keyed by everything an app reads, so a commit to one of an app's
100 RayCluster files re-renders all 100; without :mod:`gitops_ray.render.memo` that is 100
YAML parses (~1.5 s of CPU at idle), most of the commit -> applied budget of issue 18.
This times ``render_app`` of one app of ``--files`` RayCluster files (the 5,000 / 50 apps
shape of :mod:`bench.workload`) three ways, ``--rounds`` times each, a different file
changed each round:

* cold: the memo empty (a controller's first render of the app);
* one file changed: the memo warm from the previous render, as in a running controller;
* one file changed, no memo: the memo emptied and bounded to 0 entries (renders before it).

Run ``python -m bench.render_memo``. Wall-clock seconds on a shared machine: read them
with the load average printed next to them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.workload import Workload, cluster_path, one_line_change, write_config_repo
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.memo import MAX_ENTRIES, PARSES


def run(*, files: int = 100, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds per render of the app, each way (see the module docstring)."""
    wl = Workload(clusters=files, apps=1)
    with tempfile.TemporaryDirectory(prefix="bench-render-memo-") as tmp:
        root = Path(tmp)
        write_config_repo(wl, root, repo_url="https://example.invalid/config.git")
        path = Path(cluster_path(wl, 0)).parent.as_posix()
        app = application_from_flags(name=wl.app_name(0), repo_url="https://x", path=path,
                                     dest_namespace=wl.namespace(0))

        def render() -> float:
            start = time.perf_counter()
            render_app(app, root)
            return time.perf_counter() - start

        def change(step: int) -> Callable[[], float]:
            one_line_change(wl, root, step % files, f"bench-{step}")
            return render

        out: dict[str, list[float]] = {"cold": [], "one file changed": [],
                                       "one file changed, no memo": []}
        for step in range(rounds):
            PARSES.clear()
            out["cold"].append(render())
            out["one file changed"].append(change(2 * step)())
            PARSES.clear()
            PARSES.max_entries = 0
            try:
                out["one file changed, no memo"].append(change(2 * step + 1)())
            finally:
                PARSES.max_entries = MAX_ENTRIES
        PARSES.clear()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100, help="RayCluster files in the app")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for name, seconds in run(files=args.files, rounds=args.rounds).items():
        print(f"{name:<28} median {statistics.median(seconds):.3f} s  "
              f"(min {min(seconds):.3f}, max {max(seconds):.3f})")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
