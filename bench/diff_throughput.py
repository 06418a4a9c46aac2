"""Diff throughput: gitops-ray's diff side by side with Argo CD's, on the same objects.

Why this benchmark exists: the controller diffs every RayCluster of every app on every
cycle, so the diff's objects/s bounds how often a large cluster can be reconciled. The
only fair yardstick is Argo CD's own implementation on the same input, so one run times:

* **gitops-ray**: ``compile_rules`` (once per round, as the pipeline does per app) then
  ``compare(desired=, predicted=, live=, rules=)`` per object (``gitops_ray.diff``);
* **gitops-engine** (``bench/argodiff``, Go): ``diff.Diff`` with argo-cd's
  ``NewIgnoreNormalizer`` over the same rules plus Argo CD's default ``/status`` override,
  in server-side-diff mode (same inputs as ours: desired, the dry-run answer, live) and in
  its default legacy mode (desired vs live);
* **kubectl diff --server-side** against the real local control plane, on a subset, as a
  user would run it: one process per file, and once over a directory of all of them.

Two input modes (``--mode dicts|bytes|both``, default both):

* **dicts** (as before): gitops-ray gets already-decoded dicts; gitops-engine gets
  unstructured objects decoded before its clock starts (its own timed path still
  marshals and unmarshals internally and returns JSON bytes);
* **bytes**: both sides start from the same compact JSON bytes per object (desired, the
  dry-run answer, live: ``json.dumps(obj, separators=(",", ":"))``, as the API server
  sends them; written once to three files, one object per line, that both sides read) and
  end with a serialised RFC 6902 JSON Patch from the normalized live object to the
  desired/predicted one. Timed per object on our side: what the product does with the
  bytes, :mod:`gitops_ray.jsonio` (the kube client's decoder of every response and watch
  event, orjson): ``jsonio.loads`` of each input, ``compare``,
  ``gitops_ray.diff.format.patch`` (what ``diff -o json`` emits) and ``jsonio.dumps``;
  on gitops-engine's see ``bench/argodiff/main.go``.
  ``--patch modified`` (default) patches the objects found modified and emits ``[]``
  for the others (a reconciler needs no patch for an object in sync); ``--patch all``
  patches every object on both sides.

Inputs come from :mod:`bench.workload` at 100, 1,000 and 5,000 RayClusters. Each side
must report exactly the drifted clusters as modified; the run records whether they agree.
If gitops-ray is below half of gitops-engine, a cProfile of one round is saved so the
report can say where the time goes. Our rounds run with the harness's own objects frozen
out of Python's cyclic collector (:func:`harness_frozen`): it holds every case decoded,
which the controller does not.

Run: ``python -m bench.diff_throughput`` (``--help`` for sizes, rounds, subset).
Writes ``bench/results/diff.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import datetime as dt
import gc
import io
import json
import os
import pstats
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.argodiff import run_argodiff, run_argodiff_bytes
from bench.machine import machine_info, quantile, summary
from bench.workload import (
    ARGO_DEFAULT_OVERRIDES,
    AUTOSCALER_MANAGER,
    EDIT_MANAGER,
    FIELD_MANAGER,
    DiffCase,
    Workload,
    diff_case,
    diff_cases,
    ignore_rules,
)

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SIZES = (100, 1000, 5000)
HALF = 0.5
MODES = ("dicts", "bytes", "both")
PATCHES = ("modified", "all")
SIDES = ("desired", "predicted", "live")

# -- gitops-ray --------------------------------------------------------------------------


@contextlib.contextmanager
def harness_frozen() -> Iterator[None]:
    """Keep the harness's own objects out of Python's cyclic collector while we time.

    The harness holds every case decoded (~770,000 containers at 1,000 RayClusters, ten
    times the controller's whole heap at start, whose objects at rest are packed bytes:
    ``gitops_ray.packed``), and each full collection walks all of them, which doubled our
    side's time. ``gc.freeze()`` moves them out of the collector's view; it still runs
    over everything the rounds allocate. gitops-engine runs in its own process.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _is_modified(result: Any) -> bool:
    """Whether a ``ResourceDiff`` says the object is out of sync."""
    value = getattr(result, "out_of_sync", None)
    if isinstance(value, bool):
        return value
    return str(getattr(result, "status", "")) == "OutOfSync"


def _ours_round(cases: list[DiffCase], rules: list[dict[str, Any]], *,
                server_side: bool) -> tuple[float, list[float], list[int]]:
    """One comparison of every object, as the pipeline does it for an app.

    ``server_side``: compare against the dry-run answer (``predicted``), which is what the
    controller does; otherwise ``predicted=None``, our equivalent of Argo CD's legacy diff.
    """
    from gitops_ray.diff import compare, compile_rules

    took: list[float] = []
    modified: list[int] = []
    start = time.perf_counter()
    ruleset = compile_rules(rules, builtin=True, jq_timeout=1.0)
    for i, case in enumerate(cases):
        t0 = time.perf_counter()
        result = compare(desired=case.desired,
                         predicted=case.predicted if server_side else None,
                         live=case.live, rules=ruleset)
        took.append(time.perf_counter() - t0)
        if _is_modified(result):
            modified.append(i)
    return time.perf_counter() - start, took, modified


def bench_ours(cases: list[DiffCase], rules: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode in ("server-side", "legacy"):
        seconds: list[float] = []
        per_object: list[float] = []
        modified: list[int] = []
        for _ in range(rounds):
            with harness_frozen():
                total, took, modified = _ours_round(cases, rules,
                                                    server_side=mode == "server-side")
            seconds.append(total)
            per_object += took
        modes[mode] = {"seconds": seconds,
                       "objects_per_second": len(cases) / quantile(seconds, 0.5),
                       "per_object_p50_us": quantile(per_object, 0.5) * 1e6,
                       "per_object_p99_us": quantile(per_object, 0.99) * 1e6,
                       "modified": modified}
    return {"implementation": "gitops-ray", "modes": modes}


def inputs_untouched(wl: Workload, cases: list[DiffCase], sample: int = 25) -> bool:
    """``compare`` must not mutate its inputs: regenerate a sample and check."""
    return all(diff_case(wl, i) == cases[i] for i in range(min(sample, len(cases))))


def profile_ours(cases: list[DiffCase], rules: list[dict[str, Any]], out: Path,
                 top: int = 25) -> dict[str, Any]:
    """cProfile one round; keep the text report and the top functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    _ours_round(cases, rules, server_side=True)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(40)
    out.write_text(text.getvalue())
    rows = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    for (path, line, func), (_, calls, tottime, cumtime, _) in sorted(
            raw.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{Path(path).name}:{line}({func})", "calls": calls,
                     "own_s": round(tottime, 4), "cum_s": round(cumtime, 4),
                     "own_share": round(tottime / total, 3) if total else None})
    return {"objects": len(cases), "report": str(out), "top_by_own_time": rows}


# -- gitops-engine -----------------------------------------------------------------------


def bench_argo(cases: list[DiffCase], rules: list[dict[str, Any]], rounds: int,
               cpu_profile: Path | None = None) -> dict[str, Any]:
    payload = [{"desired": c.desired, "predicted": c.predicted, "live": c.live} for c in cases]
    return run_argodiff(payload, rules=rules, overrides=ARGO_DEFAULT_OVERRIDES, rounds=rounds,
                        cpu_profile=cpu_profile)


# -- bytes mode: same JSON bytes in, a serialised JSON Patch out -------------------------


def compact(obj: Any) -> bytes:
    """An object as the API server sends it: compact JSON."""
    return json.dumps(obj, separators=(",", ":")).encode()


def write_inputs(cases: list[DiffCase], directory: Path) -> dict[str, Path]:
    """Three files (desired, predicted, live), line i holding case i's compact JSON."""
    paths = {}
    for side in SIDES:
        path = paths[side] = directory / f"{side}.jsonl"
        path.write_bytes(b"".join(compact(getattr(c, side)) + b"\n" for c in cases))
    return paths


def read_inputs(paths: dict[str, Path]) -> dict[str, list[bytes]]:
    """The files' lines: the very bytes gitops-engine reads."""
    return {side: paths[side].read_bytes().rstrip(b"\n").split(b"\n") for side in SIDES}


def _ours_bytes_round(raw: dict[str, list[bytes]], rules: list[dict[str, Any]], *,
                      server_side: bool, patch_all: bool
                      ) -> tuple[float, list[float], list[int], list[bytes]]:
    """One round from bytes: decode, compare, serialise the patch (see the module doc)."""
    from gitops_ray import jsonio
    from gitops_ray.diff import compare, compile_rules
    from gitops_ray.diff.format import patch

    loads, dumps = jsonio.loads, jsonio.dumps
    desired, predicted, live = raw["desired"], raw["predicted"], raw["live"]
    took: list[float] = []
    modified: list[int] = []
    patches: list[bytes] = []
    start = time.perf_counter()
    ruleset = compile_rules(rules, builtin=True, jq_timeout=1.0)
    for i in range(len(desired)):
        t0 = time.perf_counter()
        result = compare(desired=loads(desired[i]),
                         predicted=loads(predicted[i]) if server_side else None,
                         live=loads(live[i]), rules=ruleset)
        changed = _is_modified(result)
        out = dumps(patch(result)) if changed or patch_all else b"[]"
        took.append(time.perf_counter() - t0)
        patches.append(out)
        if changed:
            modified.append(i)
    return time.perf_counter() - start, took, modified, patches


def bench_ours_bytes(raw: dict[str, list[bytes]], rules: list[dict[str, Any]], rounds: int,
                     *, patch_all: bool) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode in ("server-side", "legacy"):
        seconds: list[float] = []
        per_object: list[float] = []
        modified: list[int] = []
        patches: list[bytes] = []
        for _ in range(rounds):
            with harness_frozen():
                total, took, modified, patches = _ours_bytes_round(
                    raw, rules, server_side=mode == "server-side", patch_all=patch_all)
            seconds.append(total)
            per_object += took
        modes[mode] = {"seconds": seconds,
                       "objects_per_second": len(raw["desired"]) / quantile(seconds, 0.5),
                       "per_object_p50_us": quantile(per_object, 0.5) * 1e6,
                       "per_object_p99_us": quantile(per_object, 0.99) * 1e6,
                       "modified": modified,
                       "patch_bytes": sum(len(p) for p in patches),
                       "patches": {str(i): patches[i].decode() for i in modified}}
    return {"implementation": "gitops-ray", "modes": modes}


def _same_patch(a: str, b: str) -> bool:
    """The same operations, in any order."""
    def ops(text: str) -> list[str]:
        return sorted(json.dumps(op, sort_keys=True) for op in json.loads(text))
    return ops(a) == ops(b)


def run_bytes(cases: list[DiffCase], rules: list[dict[str, Any]], rounds: int,
              expected: list[int], *, patch_all: bool,
              log: Callable[[str], None]) -> dict[str, Any]:
    """The bytes mode at one size: both sides read the same files."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_inputs(cases, Path(tmp))
        raw = read_inputs(paths)
        entry: dict[str, Any] = {
            "patch": "all" if patch_all else "modified",
            "input_bytes": {side: sum(len(b) + 1 for b in raw[side]) for side in SIDES},
            "gitops_ray": bench_ours_bytes(raw, rules, rounds, patch_all=patch_all),
            "gitops_engine": run_argodiff_bytes(
                {side: str(p) for side, p in paths.items()}, rules=rules,
                overrides=ARGO_DEFAULT_OVERRIDES, rounds=rounds, patch_all=patch_all)}
    for side in ("gitops_ray", "gitops_engine"):
        for mode, result in entry[side]["modes"].items():
            result["correct"] = result["modified"] == expected
            log(f"{len(cases)} bytes: {side} {mode}: "
                f"{result['objects_per_second']:.0f} objects/s")
    ours, argo = entry["gitops_ray"]["modes"], entry["gitops_engine"]["modes"]
    entry["ratio"] = {m: ours[m]["objects_per_second"] / argo[m]["objects_per_second"]
                      for m in ours if m in argo}
    entry["same_patches"] = {}
    for mode in ours:
        if mode not in argo:
            continue
        mine, theirs = ours[mode].pop("patches"), argo[mode].pop("patches", None) or {}
        both = sorted(set(mine) & {str(k) for k in theirs}, key=int)
        equal = [i for i in both if _same_patch(mine[i], theirs[i])]
        entry["same_patches"][mode] = {
            "compared": len(both), "equal": len(equal),
            "example": {"index": both[0], "gitops_ray": mine[both[0]],
                        "gitops_engine": theirs[both[0]]} if both else None,
            "first_different": {"index": d, "gitops_ray": mine[d], "gitops_engine": theirs[d]}
            if (d := next((i for i in both if i not in equal), None)) is not None else None}
    return entry


# -- kubectl diff --server-side ----------------------------------------------------------


def _set_up_live(kube: Any, case: DiffCase) -> None:
    """Make the cluster hold ``case.live``: sync, autoscaler patches, a manual edit."""
    body = copy.deepcopy(case.desired)
    kube.apply(body, field_manager=FIELD_MANAGER, force=True)
    patch = [{"op": "replace", "path": f"/spec/workerGroupSpecs/{i}/{field}", "value": g[field]}
             for i, g in enumerate(case.predicted["spec"]["workerGroupSpecs"])
             for field in ("replicas", "scaleStrategy") if field in g]
    meta = case.desired["metadata"]
    kube.patch("ray.io/v1", "RayCluster", name=meta["name"],
               namespace=meta["namespace"], patch=patch,
               field_manager=AUTOSCALER_MANAGER)
    if case.drifted:
        kube.patch("ray.io/v1", "RayCluster", name=meta["name"], namespace=meta["namespace"],
                   patch=[{"op": "replace", "path": "/spec", "value": case.live["spec"]}],
                   field_manager=EDIT_MANAGER)


def _kubectl_diff(paths: list[Path], kubeconfig: Path) -> tuple[float, int]:
    argv = ["kubectl", "diff", "--server-side", "--force-conflicts"]
    for path in paths:
        argv += ["-f", str(path)]
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=False,
                         env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    took = time.perf_counter() - start
    if out.returncode > 1:
        raise RuntimeError(f"kubectl diff failed ({out.returncode}): {out.stderr[-500:]}")
    return took, out.returncode


def bench_kubectl(wl: Workload, subset: int) -> dict[str, Any]:
    """``kubectl diff --server-side`` on ``subset`` RayClusters of the real control plane."""
    from gitops_ray.kube import Kube
    from localcluster import LocalControlPlane

    cases = [diff_case(wl, i) for i in _subset_indices(wl, subset)]
    with LocalControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        kube = Kube.connect(str(cp.kubeconfig))
        for ns in sorted({c.desired["metadata"]["namespace"] for c in cases}):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                        field_manager="bench")
        for case in cases:
            _set_up_live(kube, case)
        mismatches = _fidelity(kube, cases)
        paths = []
        for case in cases:
            path = Path(tmp) / f"{case.desired['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump(case.desired, sort_keys=False))
            paths.append(path)
        per_file = [_kubectl_diff([p], cp.kubeconfig) for p in paths]
        together, _ = _kubectl_diff(paths, cp.kubeconfig)
    per = [t for t, _ in per_file]
    return {
        "objects": len(cases),
        "per_invocation_s": summary(per),
        "objects_per_second_one_per_process": len(per) / sum(per),
        "one_process_all_files_s": together,
        "objects_per_second_one_process": len(cases) / together,
        "reported_modified": sum(1 for _, rc in per_file if rc == 1),
        "drifted": sum(c.drifted for c in cases),
        "note": "kubectl has no ignoreDifferences: autoscaled replicas show as differences",
        "generated_live_mismatches": mismatches,
    }


def _subset_indices(wl: Workload, subset: int) -> list[int]:
    """``subset`` clusters including some drifted ones, spread over the whole range."""
    step = max(1, wl.clusters // subset)
    picked = list(range(0, wl.clusters, step))[:subset]
    drifted = [i for i in range(wl.clusters) if wl.drifted(i)][: max(1, subset // 5)]
    return sorted(set(picked[: subset - len(drifted)]) | set(drifted))


def _fidelity(kube: Any, cases: list[DiffCase]) -> list[str]:
    """Where the generator's ``live.spec`` differs from what the real API server holds."""
    out = []
    for case in cases:
        meta = case.desired["metadata"]
        real = kube.get("ray.io/v1", "RayCluster", name=meta["name"],
                        namespace=meta["namespace"]) or {}
        if real.get("spec") != case.live["spec"]:
            out.append(f"{meta['namespace']}/{meta['name']}")
    return out


# -- the run -----------------------------------------------------------------------------


def _rounds_for(size: int, rounds: int | None) -> int:
    return rounds if rounds else (5 if size <= 100 else 3)


def run_size(size: int, *, apps: int, rounds: int | None, profile_dir: Path | None,
             log: Callable[[str], None], mode: str = "both",
             patch_all: bool = False) -> dict[str, Any]:
    wl = Workload(size, min(apps, size))
    started = time.perf_counter()
    cases = diff_cases(wl)
    log(f"{size} objects generated in {time.perf_counter() - started:.1f}s")
    rules, n = ignore_rules(), _rounds_for(size, rounds)
    expected = [i for i, c in enumerate(cases) if c.drifted]
    entry: dict[str, Any] = {"objects": size, "apps": wl.apps, "rounds": n,
                             "drifted": len(expected)}
    entry["load_average"] = {}  # 1-minute load when each part starts: a shared machine
    if mode in ("bytes", "both"):
        entry["load_average"]["bytes"] = os.getloadavg()[0]
        entry["bytes"] = run_bytes(cases, rules, n, expected, patch_all=patch_all, log=log)
    if mode == "bytes":
        entry["load_average"]["end"] = os.getloadavg()[0]
        return _compact(entry)
    entry["load_average"]["dicts"] = os.getloadavg()[0]
    try:
        ours = bench_ours(cases, rules, n)
        ours["untouched_inputs"] = inputs_untouched(wl, cases)
        entry["gitops_ray"] = ours
    except ImportError as e:
        entry["gitops_ray"] = {"error": f"gitops_ray.diff not available yet: {e}", "modes": {}}
    entry["gitops_engine"] = bench_argo(cases, rules, n)
    entry["load_average"]["end"] = os.getloadavg()[0]
    for side in ("gitops_ray", "gitops_engine"):
        for mode, result in entry[side]["modes"].items():
            result["correct"] = result["modified"] == expected
            log(f"{size}: {side} {mode}: {result['objects_per_second']:.0f} objects/s")
    ours_modes, argo_modes = entry["gitops_ray"]["modes"], entry["gitops_engine"]["modes"]
    entry["ratio"] = {m: ours_modes[m]["objects_per_second"] / argo_modes[m]["objects_per_second"]
                      for m in ours_modes if m in argo_modes}
    below_half = entry["ratio"].get("server-side", 1.0) < HALF
    if profile_dir is not None and below_half and size <= 1000:
        entry["profile"] = profile_ours(cases, rules, profile_dir / f"diff-profile-{size}.txt")
    return _compact(entry)


def _compact(entry: dict[str, Any]) -> dict[str, Any]:
    """Replace the lists of modified indices by their length."""
    for part in (entry, entry.get("bytes") or {}):
        for side in ("gitops_ray", "gitops_engine"):
            for result in part.get(side, {}).get("modes", {}).values():
                result["modified"] = len(result["modified"])
    return entry


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Diff throughput: objects/s, median of rounds "
                        "(per-object p50/p99 in µs); correct = exactly the drifted objects")
    for column in ("objects", "mode", "gitops-ray", "gitops-engine", "ratio", "correct"):
        table.add_column(column, justify="right")
    for entry in results["sizes"]:
        parts = [("", entry)] if "gitops_engine" in entry else []
        if "bytes" in entry:
            parts.append((f" from JSON bytes (patch {entry['bytes']['patch']})",
                          entry["bytes"]))
        for label, part in parts:
            for mode in ("server-side", "legacy"):
                ours = part["gitops_ray"]["modes"].get(mode, {})
                argo = part["gitops_engine"]["modes"][mode]
                ratio = part["ratio"].get(mode)
                table.add_row(str(entry["objects"]), mode + label, _rate(ours), _rate(argo),
                              f"{ratio:.2f}" if ratio is not None else "-",
                              f"{ours.get('correct', '-')} / {argo['correct']}")
    console = Console(width=150)
    console.print(table)
    kubectl = results.get("kubectl")
    if kubectl and "objects" in kubectl:
        console.print(
            f"kubectl diff --server-side, {kubectl['objects']} RayClusters: "
            f"{kubectl['per_invocation_s']['median'] * 1000:.0f} ms per file "
            f"(p99 {kubectl['per_invocation_s']['p99'] * 1000:.0f} ms) = "
            f"{kubectl['objects_per_second_one_per_process']:.1f} objects/s; one process "
            f"for all files: {kubectl['objects_per_second_one_process']:.1f} objects/s")
    elif kubectl:
        console.print(f"kubectl diff: {kubectl.get('error')}")


def _rate(side: dict[str, Any]) -> str:
    if "objects_per_second" not in side:
        return "n/a"
    return (f"{side['objects_per_second']:.0f} "
            f"({side['per_object_p50_us']:.0f}/{side['per_object_p99_us']:.0f})")


def run(*, sizes: tuple[int, ...], apps: int, rounds: int | None, kubectl_subset: int,
        profile: bool, out: Path, log: Callable[[str], None], mode: str = "both",
        patch_all: bool = False) -> dict[str, Any]:
    results: dict[str, Any] = {
        "benchmark": "diff-throughput",
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "workload": {"apps": apps, "seed": 0, "drift": Workload().drift,
                     "rules": ignore_rules(), "argo_overrides": ARGO_DEFAULT_OVERRIDES},
        "mode": mode,
        "collector": "the harness's objects frozen (gc.freeze) during gitops-ray's rounds",
        "sizes": [],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        results["sizes"].append(run_size(size, apps=apps, rounds=rounds,
                                         profile_dir=out.parent if profile else None, log=log,
                                         mode=mode, patch_all=patch_all))
        out.write_text(json.dumps(results, indent=2))
    if kubectl_subset:
        try:
            results["kubectl"] = bench_kubectl(Workload(max(sizes), apps), kubectl_subset)
        except Exception as e:  # the rest of the figures still count
            results["kubectl"] = {"error": f"{type(e).__name__}: {e}"}
    out.write_text(json.dumps(results, indent=2))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="Diff throughput, gitops-ray vs Argo CD")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="comma-separated RayCluster counts")
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per size (default 5 up to 100 objects, else 3)")
    parser.add_argument("--kubectl-subset", type=int, default=20,
                        help="RayClusters for kubectl diff --server-side (0 to skip)")
    parser.add_argument("--no-profile", action="store_true",
                        help="never profile, even when below half of gitops-engine")
    parser.add_argument("--mode", choices=MODES, default="both",
                        help="inputs: decoded dicts (as before), the same JSON bytes for both "
                             "sides ending in a serialised patch, or both (default)")
    parser.add_argument("--patch", choices=PATCHES, default="modified",
                        help="bytes mode: patch only the objects found modified (default) "
                             "or every object")
    parser.add_argument("--out", type=Path, default=RESULTS / "diff.json")
    args = parser.parse_args()
    results = run(sizes=tuple(int(s) for s in args.sizes.split(",")), apps=args.apps,
                  rounds=args.rounds, kubectl_subset=args.kubectl_subset,
                  profile=not args.no_profile, out=args.out,
                  log=lambda m: print(f"bench: {m}", flush=True), mode=args.mode,
                  patch_all=args.patch == "all")
    print_table(results)
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
