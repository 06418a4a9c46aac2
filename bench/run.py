"""``python -m bench.run``: every benchmark that can run here, one table, one JSON file.

Why one entry point: the figures of issue 8 only mean something together and on the same
machine (the diff throughput next to gitops-engine's, the no-op cycle next to the request
count, each at 100, 1,000 and 5,000 RayClusters). This runs the diff benchmark
(:mod:`bench.diff_throughput`) and the controller benchmark (:mod:`bench.controller`) for
each size, checks the issue's targets, prints a table and writes
``bench/results/bench.json`` (plus ``diff.json``). Figures that cannot be measured yet
say why instead of showing a number.

``--quick`` is a smoke run (100 RayClusters, few samples) that takes a few minutes;
``--report A.json B.json --out all.json`` merges runs of different sizes into one report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import controller, diff_throughput, web_page
from bench.machine import machine_info
from bench.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SIZE = 1000
MIB = 1024


def _median(figure: dict[str, Any] | None, key: str) -> float | None:
    value = (figure or {}).get(key)
    return value.get("median") if isinstance(value, dict) else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, evaluated at 1,000 RayClusters (or the nearest size run)."""
    ctl = {c["clusters"]: c for c in results.get("controller", [])}
    size = min(ctl, key=lambda s: abs(s - TARGET_SIZE)) if ctl else None
    at = ctl.get(size, {}) if size else {}
    rows = []

    cold = at.get("cold_sync") or {}
    rows.append(_row("cold sync wall < 20 s", size, cold.get("wall_s"),
                     lambda v: v < 20.0, "s"))
    rows.append(_row("cold sync <= 2 API requests per new object", size,
                     cold.get("requests_per_new_object"), lambda v: v <= 2.0, ""))
    noop = at.get("noop_cycle")
    rows.append(_row("no-op cycle wall < 1 s", size, _median(noop, "wall_s"),
                     lambda v: v < 1.0, "s"))
    gets = _median(noop, "raycluster_gets")
    totals = {s: _median(c.get("noop_cycle"), "api_requests_total") for s, c in ctl.items()}
    flat = [v for _, v in sorted(totals.items()) if v is not None]
    rows.append({"target": "no-op cycle: 0 RayCluster GETs, requests flat in size", "size": size,
                 "value": f"{gets} GETs; totals by size {totals}" if gets is not None else None,
                 "met": (gets == 0 and (len(flat) < 2 or flat[-1] <= flat[0] * 1.5))
                 if gets is not None else None})
    rows.append(_row("commit -> applied p50 < 2 s (webhook)", size,
                     _median(at.get("commit_to_applied_webhook"), "latency_s"),
                     lambda v: v < 2.0, "s"))
    rows.append(_row("drift -> healed p50 < 2 s", size,
                     _median(at.get("drift_to_healed"), "latency_s"), lambda v: v < 2.0, "s"))
    rss = (at.get("memory") or {}).get("tree_rss_kib")
    rows.append(_row("memory < 300 MB", size, rss / MIB if rss else None,
                     lambda v: v < 300, "MiB"))
    web = results.get("web_page")
    if web:
        rows.append(_row("app page at 1,000 RayClusters < 300 ms", web["clusters"],
                         web["app_page_s"]["median"] * 1000, lambda v: v < 300, "ms"))
    for entry in results.get("diff", {}).get("sizes", []):
        ratio = entry.get("ratio", {}).get("server-side")
        rows.append(_row("diff >= 0.5 x gitops-engine", entry["objects"], ratio,
                         lambda v: v >= 0.5, "x"))
        from_bytes = (entry.get("bytes") or {}).get("ratio", {}).get("server-side")
        if from_bytes is not None:
            rows.append(_row("diff from JSON bytes >= 0.5 x gitops-engine", entry["objects"],
                             from_bytes, lambda v: v >= 0.5, "x"))
    return rows


def _row(target: str, size: int | None, value: float | None, ok: Any, unit: str
         ) -> dict[str, Any]:
    return {"target": target, "size": size,
            "value": f"{value:.3f} {unit}" if value is not None else None,
            "met": bool(ok(value)) if value is not None else None}


def print_tables(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    if "diff" in results:
        diff_throughput.print_table(results["diff"])
    sizes = [c["clusters"] for c in results.get("controller", [])]
    if sizes:
        table = Table(title="Controller figures (median / p99; requests counted by the API "
                            "server)")
        table.add_column("figure")
        for size in sizes:
            table.add_column(f"{size} RayClusters", justify="right")
        for label, render in _FIGURES:
            table.add_row(label, *(render(c) for c in results["controller"]))
        console.print(table)
    table = Table(title=f"Targets (machine: {results['machine']['cpu']}, "
                        f"{results['machine']['cores']} cores)")
    for column in ("target", "size", "value", "met"):
        table.add_column(column)
    for row in results["targets"]:
        met = {True: "yes", False: "NO", None: "not measured"}[row["met"]]
        table.add_row(row["target"], str(row["size"]), str(row["value"] or "-"), met)
    console.print(table)


def _fmt(figure: dict[str, Any] | None, key: str, unit: str = "s") -> str:
    if not figure:
        return "-"
    if "not_measured" in figure or "error" in figure:
        return "not measured" if "not_measured" in figure else "error"
    value = figure.get(key)
    if isinstance(value, dict):
        return f"{value['median']:.3f} / {value['p99']:.3f} {unit}"
    if isinstance(value, (int, float)):
        return f"{value:.2f} {unit}"
    return "-"


_FIGURES: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("1 cold sync wall", lambda c: _fmt(c.get("cold_sync"), "wall_s")),
    ("1 cold sync API requests", lambda c: str(
        (c.get("cold_sync") or {}).get("api_requests", {}).get("total", "-"))),
    ("1 cold sync requests per new object",
     lambda c: _fmt(c.get("cold_sync"), "requests_per_new_object", "")),
    ("1 cold sync: CLI CPU", lambda c: _fmt(c.get("cold_sync"), "cpu_s")),
    ("1 cold sync: API server CPU per new object",
     lambda c: _fmt(c.get("cold_sync"), "apiserver_cpu_per_new_object_ms", "ms")),
    ("1 cold sync: floor (CLI + API server + etcd CPU / cores)",
     lambda c: _fmt(c.get("cold_sync"), "floor_s")),
    ("2 no-op cycle wall", lambda c: _fmt(c.get("noop_cycle"), "wall_s")),
    ("2 no-op cycle CPU", lambda c: _fmt(c.get("noop_cycle"), "cpu_s")),
    ("2 no-op cycle API requests", lambda c: _fmt(c.get("noop_cycle"), "api_requests_total",
                                                  "")),
    ("2 no-op RayCluster GETs", lambda c: _fmt(c.get("noop_cycle"), "raycluster_gets", "")),
    ("3 commit -> applied (webhook)",
     lambda c: _fmt(c.get("commit_to_applied_webhook"), "latency_s")),
    ("3 commit -> applied (poll 5 s)",
     lambda c: _fmt(c.get("commit_to_applied_polling_5s"), "latency_s")),
    ("4 drift -> healed", lambda c: _fmt(c.get("drift_to_healed"), "latency_s")),
    ("5 controller RSS (tree)", lambda c: (
        f"{c['memory']['tree_rss_kib'] / MIB:.0f} MiB"
        if "tree_rss_kib" in (c.get("memory") or {}) else _fmt(c.get("memory"), ""))),
]


def merge(paths: list[Path]) -> dict[str, Any]:
    """One report from runs of different sizes (e.g. 5,000 RayClusters run on its own)."""
    runs = [json.loads(p.read_text()) for p in paths]
    merged: dict[str, Any] = {**runs[0], "merged_from": [str(p) for p in paths]}
    by_size = {c["clusters"]: c for r in runs for c in r.get("controller", [])}
    merged["controller"] = [by_size[s] for s in sorted(by_size)]
    merged["targets"] = targets(merged)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="RayCluster counts")
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--samples", type=int, default=20,
                        help="latency samples per figure (webhook, drift)")
    parser.add_argument("--polling-samples", type=int, default=8)
    parser.add_argument("--skip", choices=["diff", "controller", "web"], action="append",
                        default=[])
    parser.add_argument("--reuse-diff", action="store_true",
                        help="take the diff figures from results/diff.json instead of rerunning")
    parser.add_argument("--profile", action="store_true",
                        help="also sample the controller with py-spy during a no-op cycle")
    parser.add_argument("--quick", action="store_true", help="100 RayClusters, few samples")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench.json")
    parser.add_argument("--report", type=Path, nargs="+",
                        help="run nothing: merge these results files into --out and print")
    args = parser.parse_args()
    if args.report:
        merged = merge(args.report)
        args.out.write_text(json.dumps(merged, indent=2))
        print_tables(merged)
        return
    if args.quick:
        args.sizes, args.samples, args.polling_samples = "100", 5, 3
    sizes = tuple(int(s) for s in args.sizes.split(","))

    def log(message: str) -> None:
        print(f"bench: {message}", flush=True)

    results: dict[str, Any] = {
        "benchmark": "gitops-ray",
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    if args.reuse_diff:
        results["diff"] = json.loads((args.out.parent / "diff.json").read_text())
    elif "diff" not in args.skip:
        results["diff"] = diff_throughput.run(
            sizes=sizes, apps=args.apps, rounds=None, kubectl_subset=20, profile=True,
            out=args.out.parent / "diff.json", log=log)
    if "controller" not in args.skip:
        results["controller"] = []
        for size in sizes:
            wl = Workload(size, min(args.apps, size))
            results["controller"].append(controller.run_size(
                wl, samples=args.samples, polling_samples=args.polling_samples, log=log,
                profile_dir=args.out.parent if args.profile else None))
            args.out.write_text(json.dumps(results, indent=2))
    if "web" not in args.skip:
        results["web_page"] = web_page.run(clusters=max(sizes) if args.quick else TARGET_SIZE,
                                           rounds=5 if args.quick else 15)
    results["targets"] = targets(results)
    results["duration_s"] = time.monotonic() - began
    args.out.write_text(json.dumps(results, indent=2))
    print_tables(results)
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
