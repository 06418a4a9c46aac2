"""The web page's render time: one app of 1,000 RayClusters, and the app list of 1,000 apps.

Why: the app page is built on request from the controller's memory (record, watch cache,
Pods, Services, git's objects) and rendered by Jinja2 in the HTTP thread, so its cost grows
with the app. The target is an app of **1,000 RayClusters rendered in under 300 ms**: the
whole page, i.e. :func:`gitops_ray.runtime.web.pages.app_page` (the resource tree with
every RayCluster's Pods and head Service, the worker-group view of each from its
managedFields, history, summary) *and* the template, from inputs built by
:mod:`bench.workload` (git's RayClusters, the live ones after the autoscaler moved
replicas, and per live worker and head a Running Pod owned by its cluster). The list page
is timed too, at 1,000 apps (one page of :data:`~gitops_ray.runtime.web.pages.PAGE_SIZE`).

Run: ``python -m bench.web_page [--clusters 1000] [--rounds 15]``; writes
``bench/results/web_page.json`` with the machine's load average, as the other benchmarks do.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.machine import machine_info, summary
from bench.workload import Workload, diff_case
from gitops_ray.runtime.web.pages import (
    RESOURCES_PAGE,
    Diffs,
    app_page,
    app_row,
    live_keys,
    page_of,
    resource_slice,
)
from gitops_ray.runtime.web.render import render
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.types import ResourceKey

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_S = 0.300
Manifest = dict[str, Any]


def _pod(cluster: Manifest, name: str, group: str, role: str) -> Manifest:
    meta = cluster["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": {"ray.io/cluster": meta["name"], "ray.io/group": group,
                                    "ray.io/node-type": role},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True}]},
            "spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def children(live: Manifest) -> list[Manifest]:
    """What KubeRay makes for a live RayCluster: head Pod and Service, a Pod per worker."""
    name = live["metadata"]["name"]
    out = [_pod(live, f"{name}-head", "headgroup", "head")]
    for group in live["spec"]["workerGroupSpecs"]:
        out += [_pod(live, f"{name}-{group['groupName']}-worker-{i}", group["groupName"],
                     "worker") for i in range(int(group.get("replicas") or 0))]
    service = _pod(live, f"{name}-head-svc", "headgroup", "head")
    service.update(kind="Service", spec={"type": "ClusterIP"}, status={})
    return [*out, service]


def record_status(wl: Workload, keys: list[ResourceKey]) -> Manifest:
    """An app record's status as the controller writes it, with a full history."""
    ops = [{"id": i, "revision": f"{i:040x}", "phase": "Succeeded", "message": "synced",
            "finishedAt": 1_767_600_000 + i * 60, "trigger": "auto-sync"} for i in range(10)]
    rows = [{"group": k.group, "version": "v1", "kind": k.kind, "namespace": k.namespace,
             "name": k.name, "status": "Synced",
             "health": {"status": "Healthy", "message": "RayCluster is ready"}} for k in keys]
    return {"sync": "Synced", "health": "Healthy", "revision": "f" * 40, "resources": rows,
            "repoURL": "https://github.com/acme/ray-config.git",
            "path": f"clusters/{wl.app_name(0)}", "targetRevision": "main",
            "operation": ops[0], "history": ops, "comparedAt": time.time()}


def inputs(clusters: int) -> dict[str, Any]:
    wl = Workload(clusters, 1)
    cases = [diff_case(wl, i) for i in range(clusters)]
    live = {ResourceKey.of(c.live): c.live for c in cases}
    desired = {ResourceKey.of(c.desired): c.desired for c in cases}
    made = {c.live["metadata"]["uid"]: children(c.live) for c in cases}
    return {"status": record_status(wl, list(live)), "live": live, "desired": desired,
            "children": made}


def render_app(data: dict[str, Any], number: int = 1, size: int = RESOURCES_PAGE) -> bytes:
    """Page ``number`` of the app page, built as the site builds it: only that page's
    resources are looked up, and only their Pods and Services are candidates."""
    status = decode_status(data["status"])
    resources = resource_slice(status, number=number, size=size)
    keys = {k for k, _ in live_keys(resources.rows)}
    live = {k: v for k, v in data["live"].items() if k in keys}
    desired = {k: v for k, v in data["desired"].items() if k in keys}
    uids = {v["metadata"]["uid"] for v in live.values()}
    candidates = [c for uid in uids for c in data["children"][uid]]
    page = app_page("team-000", status, resources=resources, live=live,
                    desired=desired, candidates=candidates, diffs=Diffs(known=True),
                    now=time.time())
    return render("app.html", app=page, notice=None, actions=None)


def render_list(statuses: dict[str, Manifest]) -> bytes:
    page = page_of(list(statuses), number=1)
    now = time.time()
    rows = [app_row(n, statuses[n], now=now) for n in page.items]
    return render("list.html", page=page, rows=rows)


def timed(fn: Any, *args: Any, rounds: int) -> tuple[dict[str, float], int]:
    fn(*args)  # warm: templates compiled, caches filled
    samples, size = [], 0
    for _ in range(rounds):
        began = time.perf_counter()
        size = len(fn(*args))
        samples.append(time.perf_counter() - began)
    return summary(samples), size


def run(*, clusters: int, rounds: int) -> dict[str, Any]:
    data = inputs(clusters)
    app, app_bytes = timed(render_app, data, rounds=rounds)
    last, _ = timed(render_app, data, -(-clusters // RESOURCES_PAGE), rounds=rounds)
    whole, whole_bytes = timed(render_app, data, 1, clusters, rounds=max(3, rounds // 5))
    statuses = {f"team-{i:04d}": data["status"] for i in range(clusters)}
    listing, list_bytes = timed(render_list, statuses, rounds=rounds)
    rows = sum(len(c["spec"]["workerGroupSpecs"]) for c in data["live"].values())
    return {"benchmark": "web_page", "machine": machine_info(), "clusters": clusters,
            "pods_and_services": sum(map(len, data["children"].values())),
            "worker_group_rows": rows, "resources_per_page": RESOURCES_PAGE,
            "app_page_s": app, "app_page_bytes": app_bytes, "app_last_page_s": last,
            "unpaginated_app_page_s": whole, "unpaginated_app_page_bytes": whole_bytes,
            "list_page_s": listing,
            "list_page_bytes": list_bytes, "target_s": TARGET_S,
            "met": app["median"] < TARGET_S}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS / "web_page.json")
    args = parser.parse_args()
    result = run(clusters=args.clusters, rounds=args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"app page, {args.clusters} RayClusters ({result['pods_and_services']} Pods and "
          f"Services), {RESOURCES_PAGE} a page: median "
          f"{result['app_page_s']['median'] * 1000:.0f} ms, p99 "
          f"{result['app_page_s']['p99'] * 1000:.0f} ms, {result['app_page_bytes']} bytes; "
          f"last page {result['app_last_page_s']['median'] * 1000:.0f} ms; all on one page "
          f"{result['unpaginated_app_page_s']['median'] * 1000:.0f} ms; "
          f"list page of {args.clusters} apps: median "
          f"{result['list_page_s']['median'] * 1000:.1f} ms; load "
          f"{result['machine']['load_average_1_5_15m']}")


if __name__ == "__main__":
    main()
