"""Issue 41, item 6: what a new RayCluster costs the API server, applied or created.

Why: the cold sync's server-side floor is the API server's CPU per new object, so the one
lever on the floor itself is the kind of write. ``python -m bench.writecost`` starts a
fresh local control plane (the upstream KubeRay CRDs, as every test) and writes the
workload's RayClusters (``bench/workload.py``: the same bytes a sync sends, tracking label
and annotation included) as new objects, in alternating batches of each kind of write:

* ``apply``: server-side apply as ``gitops-ray``, forced, with the absent-object
  precondition (``resourceVersion: "1"``): exactly the sync's write of a new object;
* ``create``: ``POST`` with ``fieldManager=gitops-ray``;
* ``apply-after-create``: our apply of the same body to an object ``create`` made (what
  the next sync would send if it re-asserted it).

Each batch is ``--batch`` objects written ``--parallel`` at a time (the sync's
parallelism); the API server's and etcd's CPU (``/proc``) is read around each batch, so
the other kind's batches sit between them in time and a change of the machine's load
touches both. The load average is recorded beside the figures.

Then, on a few objects, **what each write leaves for later applies** (from the API
server, not from a model): the ``managedFields`` entries, whether our next apply owns the
fields, whether an apply that drops a field from git removes it, and whether the Ray
autoscaler's write of a worker group's ``replicas`` (a JSON patch as its KubeRay
provider sends it, manager ``python-requests``) survives our next apply of live's value
(as the sync sends it) and our next apply of a *different* value.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.controller import cpu_seconds
from bench.machine import code_revision, machine_info
from bench.workload import Workload, raycluster

RESULTS = Path(__file__).resolve().parent / "results"
FIELD_MANAGER = "gitops-ray"
AUTOSCALER = "python-requests"
Manifest = dict[str, Any]


def _renamed(obj: Manifest, name: str) -> Manifest:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    out["metadata"]["annotations"] = {
        k: v.rsplit("/", 1)[0] + "/" + name for k, v in out["metadata"]["annotations"].items()}
    return out


def _apply(kube: Any, obj: Manifest) -> Manifest:
    body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
    return dict(kube.apply(body, field_manager=FIELD_MANAGER, force=True))


def _apply_again(kube: Any, obj: Manifest) -> Manifest:
    return dict(kube.apply(obj, field_manager=FIELD_MANAGER, force=True))


def _create(kube: Any, obj: Manifest) -> Manifest:
    return dict(kube.create(obj, field_manager=FIELD_MANAGER))


def _batch(kube: Any, cp: Any, write: Callable[[Any, Manifest], Manifest],
           objs: list[Manifest], parallel: int) -> dict[str, float]:
    api, etcd = cp.processes["kube-apiserver"].pid, cp.processes["etcd"].pid
    a0, e0, t0 = cpu_seconds(api), cpu_seconds(etcd), time.monotonic()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda o: write(kube, o), objs))
    wall = time.monotonic() - t0
    return {"apiserver_ms": 1000 * (cpu_seconds(api) - a0) / len(objs),
            "etcd_ms": 1000 * (cpu_seconds(etcd) - e0) / len(objs),
            "wall_ms": 1000 * wall / len(objs)}


def measure(kube: Any, cp: Any, wl: Workload, *, rounds: int, batch: int,
            parallel: int) -> dict[str, Any]:
    """Alternating batches of each write; per-object CPU by kind (median of the batches)."""
    namespaces = sorted({wl.namespace(a) for a in range(wl.apps)})
    for ns in namespaces:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    field_manager="bench")
    base = [raycluster(wl, i) for i in range(batch)]
    warm = [_renamed(o, f"warm-{i}") for i, o in enumerate(base)]
    _batch(kube, cp, _apply, warm, parallel)  # the CRD's schema and caches, once
    per_kind: dict[str, list[dict[str, float]]] = {"apply": [], "create": [],
                                                   "apply-after-create": []}
    for r in range(rounds):
        applied = [_renamed(o, f"a{r}-{i}") for i, o in enumerate(base)]
        created = [_renamed(o, f"c{r}-{i}") for i, o in enumerate(base)]
        first = ("apply", "create") if r % 2 == 0 else ("create", "apply")
        for kind in first:
            objs, write = (applied, _apply) if kind == "apply" else (created, _create)
            per_kind[kind].append(_batch(kube, cp, write, objs, parallel))
        per_kind["apply-after-create"].append(_batch(kube, cp, _apply_again, created,
                                                     parallel))
    return {kind: {key: round(statistics.median(b[key] for b in batches), 2)
                   for key in batches[0]} | {"batches": len(batches)}
            for kind, batches in per_kind.items()}


# -- ownership: what each write leaves for later applies -----------------------------------


def _entries(obj: Manifest) -> list[str]:
    return sorted(f"{e['manager']}/{e['operation']}" + (f"/{e['subresource']}"
                                                        if e.get("subresource") else "")
                  for e in obj["metadata"].get("managedFields") or [])


def _owners_of_replicas(obj: Manifest, group: str) -> list[str]:
    """Who owns ``group``'s replicas: the upstream CRD's ``workerGroupSpecs`` is an atomic
    list (no ``x-kubernetes-list-type``), so whoever owns the list owns them."""
    key = f'k:{{"groupName":"{group}"}}'
    out = []
    for e in obj["metadata"].get("managedFields") or []:
        groups = ((e.get("fieldsV1") or {}).get("f:spec") or {}).get("f:workerGroupSpecs")
        if groups is not None and (not groups or "f:replicas" in (groups.get(key) or {})):
            out.append(f"{e['manager']}/{e['operation']}")
    return sorted(out)


def _replicas(obj: Manifest, group: str) -> int | None:
    spec = next(g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] == group)
    return spec.get("replicas")


def ownership(kube: Any, wl: Workload, first: str) -> dict[str, Any]:
    """One object written first by ``first``, then the life a synced object has."""
    obj = _renamed(raycluster(wl, 0), f"own-{first}")
    meta = obj["metadata"]
    ns, name = meta["namespace"], meta["name"]
    live = _apply(kube, obj) if first == "apply" else _create(kube, obj)
    out: dict[str, Any] = {"after_first_write": _entries(live)}
    live = _apply_again(kube, obj)
    out["after_our_next_apply"] = _entries(live)
    # the autoscaler scales group "cpu" (index 0) as its KubeRay provider does
    kube.patch("ray.io/v1", "RayCluster", name=name, namespace=ns, field_manager=AUTOSCALER,
               patch=[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                       "value": 7}])
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=ns)
    out["replicas_owners_after_autoscaler"] = _owners_of_replicas(live, "cpu")
    # the sync's next apply sends live's replicas (ignored path) and a changed env var
    body = copy.deepcopy(obj)
    body["spec"]["workerGroupSpecs"][0]["replicas"] = _replicas(live, "cpu")
    body["metadata"]["labels"]["changed"] = "yes"
    live = _apply_again(kube, body)
    out["replicas_after_sync_apply"] = _replicas(live, "cpu")
    out["replicas_owners_after_sync_apply"] = _owners_of_replicas(live, "cpu")
    # git drops a label it set at the first write: does our apply remove it?
    dropped = copy.deepcopy(body)
    del dropped["metadata"]["labels"]["app.kubernetes.io/name"]
    live = _apply_again(kube, dropped)
    out["label_git_dropped_removed"] = \
        "app.kubernetes.io/name" not in (live["metadata"].get("labels") or {})
    out["final_entries"] = _entries(live)
    return out


def main(argv: list[str] | None = None) -> None:
    from gitops_ray.kube import Kube
    from localcluster import LocalControlPlane

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / "writecost.json")
    args = parser.parse_args(argv)
    wl = Workload(clusters=args.batch, apps=1)
    report: dict[str, Any] = {"machine": machine_info(), "code": code_revision(),
                              "batch": args.batch, "rounds": args.rounds,
                              "parallel": args.parallel,
                              "load_average_at_start": list(os.getloadavg())}
    with LocalControlPlane() as cp:
        kube = Kube.connect(str(cp.kubeconfig))
        report["per_object"] = measure(kube, cp, wl, rounds=args.rounds, batch=args.batch,
                                       parallel=args.parallel)
        report["ownership"] = {first: ownership(kube, wl, first)
                               for first in ("apply", "create")}
    report["load_average_at_end"] = list(os.getloadavg())
    print(json.dumps(report["per_object"], indent=1))
    print(json.dumps(report["ownership"], indent=1))
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
