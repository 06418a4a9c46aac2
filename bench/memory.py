"""Memory per RayCluster and the no-op cycle at 10,000 RayClusters, without a cold sync.

Why a separate harness: the full controller benchmark (:mod:`bench.controller`) starts
with ``gitops-ray sync`` into an empty cluster, which at 10,000 RayClusters takes longer
than everything else together. What a controller holds once everything is loaded does
not depend on who applied the objects, so here the harness applies the workload's
RayClusters itself (server-side apply as ``gitops-ray``, the same objects a sync sends,
several at a time) and then starts ``gitops-ray run`` over the already-synced cluster.
That is also the no-op-cycle situation: every app is compared, finds nothing to do and
must ask the API server nothing.

Per size, one control plane: apply N RayClusters, start the controller, wait for its
first cycle and for it to go idle, time a few no-op cycles (push webhooks of the same
commit, requests counted by the API server) and read the RSS of its process tree.
``python -m bench.memory --sizes 1000,5000,10000`` writes ``results/memory.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import controller
from bench.machine import code_revision, machine_info
from bench.workload import Workload, raycluster
from gitops_ray import FIELD_MANAGER

RESULTS = Path(__file__).resolve().parent / "results"
APPLY_THREADS = 8
# The first refresh of each app writes its record (none exists: no `gitops-ray sync` ran),
# and a loaded machine spreads those writes out; 3 s without a refresh was not idle yet.
IDLE_QUIET_S = 15.0


def apply_workload(kube: Any, wl: Workload) -> float:
    """Server-side apply every RayCluster of ``wl`` (namespaces first); the seconds it took."""
    start = time.monotonic()
    for app in range(wl.apps):
        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": wl.namespace(app)}}, field_manager=FIELD_MANAGER)
    with concurrent.futures.ThreadPoolExecutor(APPLY_THREADS) as pool:
        for _ in pool.map(lambda i: kube.apply(raycluster(wl, i), field_manager=FIELD_MANAGER),
                          range(wl.clusters)):
            pass
    return time.monotonic() - start


def run_size(wl: Workload, *, samples: int, log: Callable[[str], None],
             profile: Path | None = None) -> dict[str, Any]:
    """Apply, start the controller, measure no-op cycles and RSS, for one size.

    ``profile``: afterwards, sample one more no-op cycle with py-spy into that directory.
    """
    out: dict[str, Any] = {"clusters": wl.clusters, "apps": wl.apps, "code": code_revision(),
                           "load_average_at_start": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="gitops-ray-memory-") as tmp, \
            controller.environment(wl, Path(tmp)) as env:
        out["apply_s"] = apply_workload(env.kube, wl)
        log(f"{wl.clusters}: applied in {out['apply_s']:.0f}s")
        ctl = controller.Controller(env.cp.kubeconfig, env.repo.url, env.workdir, interval="0")
        try:
            started = time.monotonic()
            ctl.start(timeout=1800)
            ctl.wait_every_app(wl.apps, timeout=3600)
            out["controller_start_to_first_cycle_s"] = time.monotonic() - started
            ctl.wait_idle(quiet=IDLE_QUIET_S, timeout=1800)
            out["controller_start_to_idle_s"] = time.monotonic() - started
            out["memory"] = controller.memory_kib(ctl.pid)
            out["noop_cycle"] = controller.noop_cycles(env, ctl, samples=samples)
            out["memory_after_noop"] = controller.memory_kib(ctl.pid)
            if profile is not None:
                profile.mkdir(parents=True, exist_ok=True)
                out["noop_cycle_profile"] = controller.profile_noop_cycle(
                    env, ctl, profile / f"memory-noop-{wl.clusters}.txt")
        except (RuntimeError, TimeoutError, OSError) as e:
            out["error"] = f"{type(e).__name__}: {e}"
        finally:
            ctl.stop()
    out["load_average_at_end"] = list(os.getloadavg())
    log(f"{wl.clusters}: {_brief(out)}")
    return out


def _brief(size: dict[str, Any]) -> str:
    if "error" in size:
        return str(size["error"])[:300]
    rss = size["memory"]["tree_rss_kib"]
    noop = size["noop_cycle"]
    return (f"RSS {rss / 1024:.0f} MiB ({rss / size['clusters']:.1f} KiB per RayCluster), "
            f"no-op cycle median {noop['wall_s']['median']:.3f}s, "
            f"{noop['api_requests_total']['median']:.0f} requests (median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,5000,10000", help="RayCluster counts")
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--samples", type=int, default=5, help="no-op cycles per size")
    parser.add_argument("--out", type=Path, default=RESULTS / "memory.json")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="also sample one no-op cycle per size with py-spy into DIR")
    args = parser.parse_args()
    results: dict[str, Any] = {"benchmark": "gitops-ray memory", "machine": machine_info(),
                               "sizes": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        results["sizes"].append(run_size(Workload(size, min(args.apps, size)),
                                         samples=args.samples,
                                         log=lambda m: print(f"bench: {m}", flush=True),
                                         profile=args.profile))
        args.out.write_text(json.dumps(results, indent=2))
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
