"""Issue 41, item 6: the cold sync's real floor and our share of it.

Why a separate harness: :func:`bench.controller.cold_sync`'s ``floor_s`` divides *all*
the processes' CPU (the CLI's own included) by the cores, so it is a time the CLI sets
for itself, not one no client could beat. This runs the same cold sync (``gitops-ray
sync`` of a fresh config repo into a fresh local control plane) and reports:

* two floors: every process's CPU over the cores (``floor_all_s``, issue 18's), and the
  **server-side floor**, API server + etcd CPU over the cores (``floor_server_s``), with
  the wall time's ratio to it (target: at most 1.25);
* the client's CPU per new object beside the API server's (target: at most a quarter);
* where the cores sat idle: the CPU the three processes did *not* use of ``cores x
  wall`` (sampled every 0.25 s, so a stretch where only one core was busy shows), and the
  machine's own idle time from ``/proc/stat`` (other work on a shared machine fills it);
* with ``--profile``, where the client's CPU went: py-spy (PyPI, a dev tool) samples the
  CLI from outside at 100 Hz, every thread on CPU (``--nonblocking``: the process is not
  stopped to be read), and the stacks are sorted into the issue's buckets (YAML parsing,
  request encoding, TLS and connections, response decoding, records, Events, our
  diff/normalisation, ...), a sample to the first bucket its stack matches.

CPU seconds are the figure that matters; the wall time is only as good as the machine's
load, recorded at the start and the end. ``python -m bench.floor [--clusters 1000
--apps 50] [--profile] [--runs N]`` writes ``bench/results/floor.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import controller
from bench.machine import code_revision, machine_info
from bench.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
SAMPLE_S = 0.25
SERVERS = ("kube-apiserver", "etcd", "kube-controller-manager")

# (bucket, pattern any frame of the stack matches), first match wins: the buckets that
# name *why* a request is sent come before the transport's, so an Event's TLS is the
# Events' cost, a record's JSON decoding is the records'; packing before parsing, so the
# parse memo's packs are packing.
BUCKETS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern)) for name, pattern in (
        ("imports and start-up", r"_find_and_load"),
        ("Events", r"gitops_ray/sync/events\.py|gitops_ray/kube/outbox\.py"),
        ("records", r"gitops_ray/sync/records\.py|gitops_ray/sync/history\.py"),
        ("packing (parse memo, desired objects, watch cache)", r"gitops_ray/packed\.py"),
        ("YAML parsing", r"[(/]yaml/|gitops_ray/render/(documents|loader|bounds)\.py"),
        ("request encoding", r"json/encoder\.py|param_serialize|\(dumps\) .*jsonio|"
                             r"dumps \(.*jsonio\.py"),
        ("TLS and connections", r"[(/]ssl\.py|[(/]socket\.py|urllib3/|http/client\.py|"
                                r"kubernetes/client/rest\.py"),
        ("response decoding", r"_decoded \(|loads \(.*jsonio\.py"),
        ("diff/normalisation", r"gitops_ray/diff/"),
        ("render (other)", r"gitops_ray/render/"),
        ("git", r"gitops_ray/source/|[(/]git/"),
        ("health", r"gitops_ray/health/"),
        ("sync engine (other)", r"gitops_ray/sync/"),
        ("reconcile (other)", r"gitops_ray/reconcile/"),
        ("CLI display and output", r"gitops_ray/cli/|/rich/|/click/"),
    ))


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / tick, idle / tick


class Sampler:
    """The CPU of the client and the servers every :data:`SAMPLE_S` seconds."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> tuple[float, dict[str, float]]:
        """One tick: the client's process tree (git, jq), the servers' own CPU."""
        out = {}
        tick = os.sysconf("SC_CLK_TCK")
        for name, pid in self.pids.items():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if name == "gitops-ray":
                    out[name] = controller.cpu_seconds(pid)
                else:
                    fields = controller._proc_stat(pid)
                    out[name] = (int(fields[11]) + int(fields[12])) / tick
        return time.monotonic(), out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._read())
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self._read())

    def busy_histogram(self, cores: int) -> dict[str, Any]:
        """How many of the cores the three processes kept busy, interval by interval."""
        shares: Counter[str] = Counter()
        unused = 0.0
        for (t0, a), (t1, b) in zip(self.samples, self.samples[1:], strict=False):
            span = t1 - t0
            if span <= 0:
                continue
            used = sum(max(0.0, b[k] - a[k]) for k in a if k in b)  # a reaped child
            busy = used / span
            unused += max(0.0, cores * span - used)
            shares[f"{min(cores, round(busy * 2) / 2):.1f} cores"] += span
        total = sum(shares.values()) or 1.0
        return {"wall_share_by_cores_busy": {k: round(v / total, 3)
                                             for k, v in sorted(shares.items())},
                "core_seconds_unused": round(unused, 2)}


def _spy(pid: int, out: Path, *, gil: bool = False) -> subprocess.Popen[bytes] | None:
    """py-spy on ``pid``; ``gil``: only the thread holding the GIL (CPU, not waits)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return None
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--rate", "100",
                             "--format", "raw", "--output", str(out), "--nonblocking",
                             *(["--gil"] if gil else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def buckets(stacks: Path) -> dict[str, Any]:
    """The samples of py-spy's raw output sorted into :data:`BUCKETS` (shares)."""
    counts: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError):
        for line in stacks.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            if not stack:  # a thread running no Python code
                continue
            n = int(count)
            total += n
            name = next((b for b, pattern in BUCKETS if pattern.search(stack)), "other")
            counts[name] += n
    return {"samples": total,
            "share": {k: round(v / total, 3) for k, v in counts.most_common()} if total
            else {}}


def cold_sync(env: controller.Env, *, profile: Path | None, gil: bool = False
              ) -> dict[str, Any]:
    """One ``gitops-ray sync`` of every app, measured from outside."""
    argv = [controller.gitops_ray_bin(), "sync", "--kubeconfig", str(env.cp.kubeconfig),
            "--repo", env.repo.url, "--apps", "apps", "--cache-dir",
            str(env.workdir / f"cli-cache-{time.time_ns()}"),
            "--control-namespace", controller.CONTROL_NAMESPACE]
    cores = os.cpu_count() or 1
    servers = {name: env.cp.processes[name].pid for name in SERVERS
               if name in env.cp.processes}
    load0 = list(os.getloadavg())
    before = env.api.snapshot()
    busy0, idle0 = machine_cpu()
    own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    spy = _spy(proc.pid, profile, gil=gil) if profile else None
    with Sampler({"gitops-ray": proc.pid, **servers}) as sampler:
        _, err = proc.communicate()
        wall = time.monotonic() - start
        own1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # before py-spy is reaped
    busy1, idle1 = machine_cpu()
    if spy is not None:
        spy.wait(60)
    requests = controller.request_summary(controller.delta(before, env.api.snapshot()))
    return _figures(env, sampler, wall=wall, cores=cores, load=(load0, os.getloadavg()),
                    machine=(busy1 - busy0, idle1 - idle0), exit_code=proc.returncode,
                    client_cpu=(own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime),
                    requests=requests, stderr=err.decode(errors="replace"),
                    profile=profile if spy is not None else None)


def _figures(env: controller.Env, sampler: Sampler, *, wall: float, cores: int,
             load: tuple[list[float], Any], machine: tuple[float, float], exit_code: int,
             client_cpu: float,
             requests: dict[str, Any], stderr: str, profile: Path | None) -> dict[str, Any]:
    first, last = sampler.samples[0][1], sampler.samples[-1][1]
    cpu = {k: round(last.get(k, 0.0) - first.get(k, 0.0), 2) for k in last}
    cpu["gitops-ray"] = round(client_cpu, 2)  # its children's too (git, jq), once reaped
    n = env.wl.clusters
    client, api, etcd = cpu["gitops-ray"], cpu["kube-apiserver"], cpu["etcd"]
    server_floor = (api + etcd) / cores
    result: dict[str, Any] = {
        "clusters": n, "apps": env.wl.apps, "wall_s": round(wall, 2), "exit_code": exit_code,
        "cpu_s": cpu, "cores": cores,
        "floor_all_s": round(sum(cpu.values()) / cores, 2),
        "floor_server_s": round(server_floor, 2),
        "wall_over_server_floor": round(wall / server_floor, 2) if server_floor else None,
        "client_cpu_per_new_object_ms": round(1000 * client / n, 2),
        "apiserver_cpu_per_new_object_ms": round(1000 * api / n, 2),
        "client_over_apiserver": round(client / api, 3) if api else None,
        "cores_busy": sampler.busy_histogram(cores),
        "machine_busy_s": round(machine[0], 2), "machine_idle_s": round(machine[1], 2),
        "load_average_at_start": load[0], "load_average_at_end": list(load[1]),
        "api_requests": requests["total"], "requests_per_new_object": requests["total"] / n,
        "by_verb_resource": requests["by_verb_resource"]}
    if exit_code != 0:
        result["stderr_tail"] = stderr.strip().splitlines()[-5:]
    if profile is not None:
        result["profile"] = {"stacks": str(profile), **buckets(profile),
                             **controller._top_frames(profile)}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1, help="cold syncs, each on a fresh "
                        "control plane")
    parser.add_argument("--profile", action="store_true", help="sample the CLI with py-spy")
    parser.add_argument("--gil", action="store_true", help="with --profile: sample only "
                        "the thread holding the GIL (Python's CPU; a thread blocked on a "
                        "socket or on the GIL is not counted)")
    parser.add_argument("--out", type=Path, default=RESULTS / "floor.json")
    args = parser.parse_args(argv)
    wl = Workload(clusters=args.clusters, apps=args.apps)
    runs = []
    for k in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gitops-ray-floor-") as tmp, \
                controller.environment(wl, Path(tmp)) as env:
            stacks = RESULTS / f"floor-stacks-{args.clusters}-{k}{'-gil' * args.gil}.txt" \
                if args.profile else None
            RESULTS.mkdir(exist_ok=True)
            runs.append(cold_sync(env, profile=stacks, gil=args.gil))
            print(json.dumps({k: v for k, v in runs[-1].items()
                              if k not in ("by_verb_resource", "profile")}), flush=True)
            if args.profile:
                print(json.dumps(runs[-1]["profile"]["share"]), flush=True)
    report = {"machine": machine_info(), "code": code_revision(), "runs": runs}
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
