"""``python -m bench.issue18``: issue 18's benchmark table, every figure from one run.

Why this exists: the issue asks for its table filled in from one run, and its figures
only mean something together, on the same machine at the same time: on 2 shared cores a
cold sync, a no-op cycle or a diff ratio moves by tens of percent with the load, so
figures from different days (or next to other work) cannot be compared with each other
or with the targets. This runs the four benchmarks that produce them back to back, as
subprocesses of this checkout (``cwd`` is the repository holding this file, the
environment is inherited: from a git worktree with ``PYTHONPATH`` pointing at it, the
worktree's code is measured):

* ``controller``: ``bench.run`` at 1,000 and 5,000 RayClusters (cold sync, commit ->
  applied, no-op cycle, RSS);
* ``memory``: ``bench.memory`` at 10,000 (RSS and no-op cycle without a cold sync);
* ``diff``: ``bench.diff_throughput`` at 1,000 (the figure: from JSON bytes);
* ``fleet``: ``bench.fleet``, 3 clusters x 3,000 RayClusters, 3 replicas, one killed.

Each writes ``DIR/<name>.json`` and its output goes to ``DIR/<name>.log``; the wall times
(UTC), the load average before and after each, its exit code, the commit and the machine
are recorded in ``DIR/issue18.json`` with the table: one row per figure (value, target,
met, the load average around it, the benchmark it comes from). Rows at the issue's sizes
are always there ("not run", or "failed, see <log>"); the other sizes run show how the
figures grow (no-op cycle and RSS at 1,000 / 5,000 beside 10,000). A target is judged only
at the size the issue names. The table is printed as markdown for README.md.

``--report`` runs nothing and composes the table from the files in ``DIR``; ``--skip``
leaves a benchmark out (its earlier files, if any, still count, under their own times).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import code_revision, machine_info

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "issue18"
BENCHMARKS = ("controller", "memory", "diff", "fleet")
MODULES = {"controller": "bench.run", "memory": "bench.memory",
           "diff": "bench.diff_throughput", "fleet": "bench.fleet"}
APPS = 50
MIB = 1024.0


# -- running the benchmarks ----------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def bench_args(name: str, args: argparse.Namespace, out_dir: Path) -> list[str]:
    """The module and flags of benchmark ``name``, writing ``out_dir/<name>.json``."""
    out = ["--out", str(out_dir / f"{name}.json")]
    if name == "controller":
        return ["bench.run", "--sizes", args.sizes, "--skip", "web", "--skip", "diff",
                "--samples", "10", "--polling-samples", "3", *out]
    if name == "memory":
        return ["bench.memory", "--sizes", args.memory_sizes, "--samples", "5", *out]
    if name == "diff":
        return ["bench.diff_throughput", "--sizes", args.diff_sizes, "--kubectl-subset", "0",
                *out]
    return ["bench.fleet", "--per-cluster", str(args.fleet_per_cluster), "--apps",
            str(args.fleet_apps), "--keep-logs", str(out_dir / "fleet-logs"), *out]


def set_aside(path: Path) -> None:
    """Move an earlier run's file or directory to ``<name>.previous``: a benchmark that fails
    before writing must not leave the last run's figures in its place."""
    if not path.exists():
        return
    previous = path.with_name(f"{path.stem}.previous{path.suffix}")
    if previous.is_dir():
        shutil.rmtree(previous)
    path.replace(previous)


def run_one(name: str, args: argparse.Namespace, out_dir: Path) -> Json:
    """Run one benchmark to the end; what ran, when, at what load, and how it ended."""
    argv = [sys.executable, "-m", *bench_args(name, args, out_dir)]
    log = out_dir / f"{name}.log"
    set_aside(out_dir / f"{name}.json")
    if name == "fleet":
        set_aside(out_dir / "fleet-logs")
    record: Json = {"argv": argv[2:], "cwd": str(ROOT), "log": log.name,
                    "commit": code_revision()["commit"], "started": _now(),
                    "load_before": list(os.getloadavg())}
    print(f"issue18: {name}: python -m {' '.join(argv[2:])} (output: {log})", flush=True)
    began = time.monotonic()
    with log.open("w") as handle:
        done = subprocess.run(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                              check=False)
    record.update(ended=_now(), duration_s=round(time.monotonic() - began, 1),
                  load_after=list(os.getloadavg()), exit_code=done.returncode)
    print(f"issue18: {name}: exit {done.returncode} after {record['duration_s']:.0f} s, "
          f"load {record['load_after'][0]:.1f}", flush=True)
    return record


def load_state(out_dir: Path) -> Json:
    """The run records of ``out_dir/issue18.json`` (earlier runs of skipped benchmarks)."""
    state = read_json(out_dir / "issue18.json") or {}
    return {"runs": state.get("runs") or {}, "code": state.get("code"),
            "machine": state.get("machine")}


def run_all(args: argparse.Namespace, out_dir: Path) -> Json:
    state = load_state(out_dir)
    state.update(code=code_revision(), machine=machine_info())
    for name in BENCHMARKS:
        if name in args.skip:
            continue
        state["runs"][name] = run_one(name, args, out_dir)
        write_report(out_dir, state)
    return state


# -- reading results -----------------------------------------------------------------------


def read_json(path: Path) -> Json | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def dig(data: Any, *keys: str | int) -> Any:
    """``data[k0][k1]...``, or None where a level is missing."""
    for key in keys:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def num(data: Any, *keys: str | int) -> float | None:
    value = dig(data, *keys)
    return float(value) if isinstance(value, int | float) else None


@dataclass
class Context:
    """The results files of one out dir and the records of the runs that wrote them."""

    out_dir: Path
    runs: Json
    files: dict[str, Json | None] = field(default_factory=dict)

    @classmethod
    def of(cls, out_dir: Path, runs: Json) -> Context:
        return cls(out_dir, runs, {n: read_json(out_dir / f"{n}.json") for n in BENCHMARKS})

    def log(self, name: str) -> Path:
        return self.out_dir / f"{name}.log"

    def exit_code(self, name: str) -> int | None:
        code = dig(self.runs, name, "exit_code")
        return int(code) if isinstance(code, int) else None

    def absent(self, name: str) -> str:
        """Why a figure of benchmark ``name`` has no value."""
        code = self.exit_code(name)
        if code:
            return f"failed (exit {code}), see {self.log(name)}"
        if self.files[name] is None:
            return ("no results file, see " + str(self.log(name))) if name in self.runs \
                else "not run"
        return "not measured at this size"

    def failure_note(self, name: str) -> str:
        code = self.exit_code(name)
        return f"; the benchmark then failed (exit {code}), see {self.log(name)}" if code \
            else ""

    def source(self, name: str) -> str:
        note = "" if name in self.runs or self.files[name] is None else \
            ", a file not written by this script"
        return f"{MODULES[name]} ({name}.json{note})"


# -- the figures ---------------------------------------------------------------------------


Check = Callable[[Json], bool | None]
Load = tuple[float, float, str] | None


@dataclass(frozen=True)
class Figure:
    """One figure of the table at each size a benchmark ran (and at the issue's sizes)."""

    label: Callable[[int], str]
    source: str  # one of BENCHMARKS
    entries: Callable[[Json], dict[int, Json]]  # results file -> size -> its figures
    expected: tuple[int, ...]  # the sizes: a row even when not run
    targets: dict[int, tuple[str, Check]]  # size -> (target, met?)
    value: Callable[[Json], str]
    load: Callable[[Json], Load]


@dataclass(frozen=True)
class Row:
    figure: str
    target: str
    value: str
    met: bool | None
    load_average: Json | None  # 1-minute load at the start and end of the figure's window
    source: str


def controller_entries(results: Json) -> dict[int, Json]:
    return {int(c["clusters"]): c for c in results.get("controller") or [] if "clusters" in c}


def memory_entries(results: Json) -> dict[int, Json]:
    return {int(s["clusters"]): s for s in results.get("sizes") or [] if "clusters" in s}


def diff_entries(results: Json) -> dict[int, Json]:
    return {int(s["objects"]): s for s in results.get("sizes") or [] if "objects" in s}


def fleet_entries(results: Json) -> dict[int, Json]:
    size = results.get("per_cluster")
    return {int(size): results} if isinstance(size, int) else {}


def run_load(entry: Json) -> Load:
    start, end = num(entry, "load_average_at_start", 0), num(entry, "load_average_at_end", 0)
    return (start, end, "this size's run") if start is not None and end is not None else None


def fleet_load(entry: Json) -> Load:
    start = num(entry, "load_average_before_failover", 0)
    end = num(entry, "load_average_at_end", 0)
    return (start, end, "just before the kill to the end") \
        if start is not None and end is not None else None


def diff_load(entry: Json) -> Load:
    start = num(entry, "load_average", "bytes")
    end = num(entry, "load_average", "dicts") or num(entry, "load_average", "end")
    return (start, end, "the bytes part") if start is not None and end is not None else None


def unmeasured(entry: Json, figure: Any) -> str:
    """Why ``figure`` of ``entry`` has no numbers."""
    if isinstance(figure, dict) and "not_measured" in figure:
        return f"not measured: {figure['not_measured']}"
    if isinstance(figure, dict) and "error" in figure:
        return f"error: {str(figure['error'])[:200]}"
    if "error" in entry:
        return f"error: {str(entry['error'])[:200]}"
    return "not in the results"


# cold sync


def cold_value(entry: Json) -> str:
    cold = entry.get("cold_sync") or {}
    wall, per = num(cold, "wall_s"), num(cold, "requests_per_new_object")
    if wall is None or per is None:
        return unmeasured(entry, cold)
    text = (f"{wall:.1f} s, {int(cold['api_requests']['total']):,} requests ({per:.2f} per "
            f"new object), floor {num(cold, 'floor_s') or 0:.1f} s, API server "
            f"{num(cold, 'apiserver_cpu_per_new_object_ms') or 0:.1f} ms CPU per RayCluster")
    return text + (f"; the CLI exited {cold['exit_code']}" if cold.get("exit_code") else "")


def cold_check(limit_s: float, per_object: float | None) -> Check:
    def check(entry: Json) -> bool | None:
        wall, per = num(entry, "cold_sync", "wall_s"), num(entry, "cold_sync",
                                                           "requests_per_new_object")
        if wall is None or per is None:
            return None
        return (wall < limit_s and (per_object is None or per <= per_object)
                and not dig(entry, "cold_sync", "exit_code"))
    return check


# commit -> applied


def commit_value(entry: Json) -> str:
    fig = entry.get("commit_to_applied_webhook")
    if not isinstance(fig, dict) or "samples" not in fig:
        return unmeasured(entry, fig)
    timeouts = int(fig.get("timeouts") or 0)
    lost = f", {timeouts} of {fig['samples']} timed out (120 s)" if timeouts else ""
    if not fig.get("latency_s"):
        return f"all {fig['samples']} samples timed out (120 s)"
    lat = fig["latency_s"]
    return f"{lat['median']:.2f} s p50 (p99 {lat['p99']:.2f} s, {lat['n']} samples){lost}"


def commit_check(entry: Json) -> bool | None:
    """Met: p50 under 1 s and no sample timed out."""
    fig = entry.get("commit_to_applied_webhook")
    if not isinstance(fig, dict) or "samples" not in fig:
        return None
    median = num(fig, "latency_s", "median")
    return median is not None and median < 1.0 and not fig.get("timeouts")


# no-op cycle


def controller_requests(noop: Json) -> int | None:
    """The most requests the controller itself counted in one no-op cycle."""
    runs = noop.get("runs") or []
    if not runs or any("controller_counted" not in r for r in runs):
        return None
    return max(sum(int(v) for v in r["controller_counted"].values()) for r in runs)


def noop_value(entry: Json) -> str:
    noop = entry.get("noop_cycle")
    wall = num(noop, "wall_s", "median")
    if not isinstance(noop, dict) or wall is None:
        return unmeasured(entry, noop)
    own = controller_requests(noop)
    return (f"{wall:.3f} s median ({_range(noop, 'wall_s', '{:.2f}')} s, "
            f"{int(noop['wall_s']['n'])} cycles), controller CPU "
            f"{num(noop, 'cpu_s', 'median') or 0:.2f} s; requests from the controller: "
            f"{'?' if own is None else own}, counted by the API server: "
            f"{_range(noop, 'api_requests_total', '{:.0f}')}")


def _range(figure: Json, key: str, form: str) -> str:
    """``min-max`` of a summary, or the one value when they are equal."""
    low, high = num(figure, key, "min"), num(figure, key, "max")
    if low is None or high is None:
        return "?"
    return form.format(low) if form.format(low) == form.format(high) else \
        f"{form.format(low)}-{form.format(high)}"


def noop_check(entry: Json) -> bool | None:
    noop = entry.get("noop_cycle")
    wall = num(noop, "wall_s", "median")
    if not isinstance(noop, dict) or wall is None:
        return None
    own = controller_requests(noop)
    requests = own if own is not None else num(noop, "api_requests_total", "max")
    return wall < 0.5 and requests == 0


# RSS


def rss_kib(entry: Json) -> tuple[float | None, float | None]:
    """RSS of the controller's tree with everything loaded, and the same later on."""
    later = num(entry, "memory_after_noop", "tree_rss_kib") or num(entry, "memory_after",
                                                                   "tree_rss_kib")
    return num(entry, "memory", "tree_rss_kib"), later


def rss_value(entry: Json) -> str:
    rss, later = rss_kib(entry)
    if rss is None:
        return unmeasured(entry, entry.get("memory"))
    when = "after the first cycle" if "memory_after_noop" in entry else \
        "after the no-op cycles"
    text = f"{rss / MIB:.0f} MiB {when} ({rss / int(entry['clusters']):.1f} KiB per RayCluster)"
    if later is not None:
        text += (f", {later / MIB:.0f} MiB after the no-op cycles" if "memory_after_noop"
                 in entry else f", {later / MIB:.0f} MiB after the commit and heal samples")
    return text


def rss_check(entry: Json) -> bool | None:
    measured = [v for v in rss_kib(entry) if v is not None]
    return max(measured) < 500 * MIB if measured else None


# failover


def failover_value(entry: Json) -> str:
    fo = entry.get("failover") or {}
    first, last = num(fo, "kill_to_first_applied_s"), num(fo, "kill_to_last_applied_s")
    lease = num(fo, "lease_duration_s") or 15.0
    parts = [f"{fo['applied']} of {fo['apps_of_killed']} changes applied, "
             + (f"first {first:.1f} s, last {last:.1f} s after the kill"
                if first is not None and last is not None else "none")
             + f" (lease {lease:.0f} s + 5 s = {lease + 5:.0f} s)"
             if "applied" in fo else unmeasured(entry, fo)]
    overlap = entry.get("overlap") or {}
    parts.append(f"{overlap.get('overlapping_syncs', '?')} overlapping syncs of "
                 f"{overlap.get('syncs_logged', '?')}")
    if "shards_of_killed" in fo:
        parts.append(f"the killed replica held {fo['shards_of_killed']} of "
                     f"{entry.get('shards', '?')} shards")
    parts.append(fleet_cold_value(entry))
    return "; ".join(parts)


def fleet_cold_value(entry: Json) -> str:
    cold = entry.get("cold_sync") or {}
    wall, per = num(cold, "wall_s"), num(cold, "requests_per_new_raycluster")
    if wall is None or per is None:
        return f"fleet cold sync: {unmeasured(entry, cold)}"
    start = num(entry, "load_average_at_start", 0)
    return (f"fleet cold sync of {int(cold['rayclusters']):,}: {wall:.0f} s "
            f"({per:.2f} requests per RayCluster)"
            + (f", load {start:.1f} at its start" if start is not None else ""))


def failover_check(entry: Json) -> bool | None:
    last = num(entry, "failover", "kill_to_last_applied_s")
    overlapping = num(entry, "overlap", "overlapping_syncs")
    if last is None or overlapping is None:
        return None
    lease = num(entry, "failover", "lease_duration_s") or 15.0
    return bool(dig(entry, "failover", "all_applied")) and last < lease + 5 and overlapping == 0


# diff throughput


def diff_mode(part: Json, mode: str) -> str:
    ours = num(part, "gitops_ray", "modes", mode, "objects_per_second")
    argo = num(part, "gitops_engine", "modes", mode, "objects_per_second")
    ratio = num(part, "ratio", mode)
    if ours is None or argo is None or ratio is None:
        return f"{mode}: not measured"
    return f"{ratio:.1f}x {mode} ({ours:,.0f} vs {argo:,.0f} objects/s)"


def diff_correct(part: Json, mode: str) -> bool:
    return all(dig(part, side, "modes", mode, "correct") is True
               for side in ("gitops_ray", "gitops_engine"))


def diff_value(entry: Json) -> str:
    part = entry.get("bytes")
    if not isinstance(part, dict):
        return "not measured: no bytes-mode figures in the results"
    text = f"{diff_mode(part, 'server-side')}, {diff_mode(part, 'legacy')}"
    dicts = [num(entry, "ratio", m) for m in ("server-side", "legacy")]
    if None not in dicts:
        text += f"; from decoded dicts {dicts[0]:.1f}x / {dicts[1]:.1f}x"
    correct = all(diff_correct(part, m) for m in ("server-side", "legacy"))
    return text + ("; both sides report exactly the drifted objects" if correct
                   else "; NOT both sides report exactly the drifted objects")


def diff_check(entry: Json) -> bool | None:
    """Met: server-side (the controller's mode) from bytes >= 10x, both sides correct."""
    ratio = num(entry, "bytes", "ratio", "server-side")
    if ratio is None:
        return None
    return ratio >= 10.0 and diff_correct(entry["bytes"], "server-side")


def _count(size: int) -> str:
    return f"{size:,}"


FIGURES = (
    Figure(lambda n: f"cold sync, {_count(n)} RayClusters / {min(APPS, n)} apps", "controller",
           controller_entries, (1000, 5000),
           {1000: ("< 20 s, <= 2 requests per new object", cold_check(20.0, 2.0)),
            5000: ("< 90 s", cold_check(90.0, None))}, cold_value, run_load),
    Figure(lambda n: f"commit -> applied (webhook), {_count(n)}, p50", "controller",
           controller_entries, (1000, 5000), {5000: ("< 1 s", commit_check)}, commit_value,
           run_load),
    Figure(lambda n: f"no-op cycle, {_count(n)} RayClusters", "controller",
           controller_entries, (1000, 5000), {10000: ("< 0.5 s, 0 requests", noop_check)},
           noop_value, run_load),
    Figure(lambda n: f"no-op cycle, {_count(n)} RayClusters", "memory", memory_entries,
           (10000,), {10000: ("< 0.5 s, 0 requests", noop_check)}, noop_value, run_load),
    Figure(lambda n: f"RSS, {_count(n)} RayClusters (one replica)", "controller",
           controller_entries, (1000, 5000), {10000: ("< 500 MiB", rss_check)}, rss_value,
           run_load),
    Figure(lambda n: f"RSS, {_count(n)} RayClusters (one replica)", "memory", memory_entries,
           (10000,), {10000: ("< 500 MiB", rss_check)}, rss_value, run_load),
    Figure(lambda n: f"3 clusters x {_count(n)} RayClusters, 3 replicas: kill one replica "
                     "-> its apps reconciled again", "fleet", fleet_entries, (3000,),
           {3000: ("< lease duration + 5 s, 0 apps reconciled twice at once",
                   failover_check)}, failover_value, fleet_load),
    Figure(lambda n: f"diff throughput vs gitops-engine, both from JSON bytes, {_count(n)} "
                     "RayClusters", "diff", diff_entries, (1000,),
           {1000: (">= 10x", diff_check)}, diff_value, diff_load),
)


# -- composing the table -------------------------------------------------------------------


def load_average(load: Load, ctx: Context, name: str) -> Json | None:
    if load is not None:
        return {"start": round(load[0], 2), "end": round(load[1], 2), "window": load[2]}
    before, after = num(ctx.runs, name, "load_before", 0), num(ctx.runs, name, "load_after", 0)
    if before is None or after is None:
        return None
    return {"start": round(before, 2), "end": round(after, 2), "window": "the whole benchmark"}


def figure_row(figure: Figure, size: int, entry: Json | None, ctx: Context) -> Row:
    target, check = figure.targets.get(size, ("", None))
    source = ctx.source(figure.source)
    if entry is None:
        return Row(figure.label(size), target, ctx.absent(figure.source), None,
                   load_average(None, ctx, figure.source), source)
    return Row(figure.label(size), target,
               figure.value(entry) + ctx.failure_note(figure.source),
               check(entry) if check is not None else None,
               load_average(figure.load(entry), ctx, figure.source), source)


def compose(ctx: Context) -> list[Row]:
    rows = []
    for figure in FIGURES:
        results = ctx.files[figure.source]
        entries = figure.entries(results) if results is not None else {}
        for size in sorted(set(figure.expected) | set(entries)):
            rows.append(figure_row(figure, size, entries.get(size), ctx))
    return rows


def _span(runs: Json) -> str:
    starts = sorted(str(r["started"]) for r in runs.values() if r.get("started"))
    ends = sorted(str(r["ended"]) for r in runs.values() if r.get("ended"))
    if not starts:
        return "times not recorded (composed from files alone)"
    first, last = starts[0], ends[-1] if ends else "?"
    if last[:10] == first[:10]:
        return f"{first[:10]} {first[11:16]}-{last[11:16]} UTC"
    return f"{first[:16]} - {last[:16]} UTC"


def _commits(ctx: Context, code: Json | None) -> str:
    by: dict[str, list[str]] = {}
    for name in BENCHMARKS:
        commit = dig(ctx.runs, name, "commit") or dig(ctx.files[name], "machine", "code",
                                                      "commit")
        if commit:
            by.setdefault(str(commit)[:7], []).append(name)
    if not by and code:
        by[str(code.get("commit", "?"))[:7]] = []
    if len(by) <= 1:
        return f"`{next(iter(by), '?')}`"
    return ", ".join(f"`{c}` ({', '.join(names)})" for c, names in by.items())


def _first_load(ctx: Context, machine: Json | None) -> list[float] | None:
    runs = sorted((r for r in ctx.runs.values() if r.get("started")),
                  key=lambda r: str(r["started"]))
    if runs and runs[0].get("load_before"):
        return [float(x) for x in runs[0]["load_before"]]
    loads = dig(machine, "load_average_1_5_15m") or next(
        (dig(f, "machine", "load_average_1_5_15m") for f in ctx.files.values()
         if dig(f, "machine", "load_average_1_5_15m")), None)
    return [float(x) for x in loads] if loads else None


def header(ctx: Context, state: Json) -> str:
    machine = state.get("machine") or next(
        (f["machine"] for f in ctx.files.values() if f and "machine" in f), None)
    load = _first_load(ctx, machine)
    dirty = " (gitops_ray/ had uncommitted changes)" if dig(state, "code",
                                                             "gitops_ray_dirty") else ""
    where = f" ({machine['cpu']}, {machine['cores']} cores)" if machine else ""
    at_start = (f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) "
                "at the start" if load else "load at the start not recorded")
    return (f"Issue 18's figures at {_commits(ctx, state.get('code'))}{dirty}, {_span(ctx.runs)}"
            f", {at_start}{where}:")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _met(row: Row) -> str:
    if row.met is None:
        return "-" if row.target else ""
    return "yes" if row.met else "**no**"


def _load_cell(load: Json | None) -> str:
    return f"{load['start']:.1f}-{load['end']:.1f}" if load else "not recorded"


def markdown(rows: list[Row], title: str) -> str:
    lines = [title, "", "| figure | target | value | met | load average (1 min) | source |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        cells = (row.figure, row.target, row.value, _met(row), _load_cell(row.load_average),
                 row.source)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def write_report(out_dir: Path, state: Json) -> tuple[str, list[Row]]:
    """Compose the table from ``out_dir``'s files; write ``issue18.json``; the markdown."""
    ctx = Context.of(out_dir, state.get("runs") or {})
    rows = compose(ctx)
    title = header(ctx, state)
    report = {"issue": 18, "composed": _now(), "header": title, "code": state.get("code"),
              "machine": state.get("machine"), "runs": ctx.runs,
              "rows": [asdict(r) for r in rows]}
    (out_dir / "issue18.json").write_text(json.dumps(report, indent=2))
    return markdown(rows, title), rows


# -- the command ---------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--skip", choices=BENCHMARKS, action="append", default=[],
                        help="leave this benchmark out (repeatable)")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: compose the table from the files in --out-dir")
    parser.add_argument("--sizes", default="1000,5000",
                        help="RayCluster counts of the controller benchmark (bench.run)")
    parser.add_argument("--memory-sizes", default="10000",
                        help="RayCluster counts of bench.memory")
    parser.add_argument("--diff-sizes", default="1000",
                        help="RayCluster counts of bench.diff_throughput")
    parser.add_argument("--fleet-per-cluster", type=int, default=3000)
    parser.add_argument("--fleet-apps", type=int, default=APPS, help="apps per cluster")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    state = load_state(out_dir) if args.report else run_all(args, out_dir)
    table, _ = write_report(out_dir, state)
    print(table)
    print(f"\nresults: {out_dir / 'issue18.json'}")


if __name__ == "__main__":
    main()
