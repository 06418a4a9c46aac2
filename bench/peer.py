"""Side by side with Argo CD itself: the same RayClusters, repo and machine (issue 41).

``python -m bench.peer`` runs each side on its own fresh local control plane of the same
build (upstream KubeRay CRDs, kube-scheduler, kwok fake nodes and the KubeRay operator, as
the e2e tier runs them), one after the other, and observes both only from outside:

* **One workload, the same bytes.** :mod:`bench.workload`'s RayClusters (1,000 over 50
  apps; ``--quick``: 20 over 4), a config repo generated afresh for each run from the same
  seed, served over git's smart HTTP on 127.0.0.1 (``git http-backend`` behind Basic auth,
  :mod:`tests.gitserver`) to both sides. The Applications are the KubeRay guide's:
  ``ignoreDifferences`` on ``.spec.workerGroupSpecs[].replicas``,
  ``RespectIgnoreDifferences=true``, automated prune and self-heal, ``CreateNamespace=true``
  (Argo CD also runs without the rule, and with it but without Respect).
* **Requests are counted by the API server** (its audit log, one line per request with
  the client's user agent), never by a client's own counters; CPU and memory from
  ``/proc`` (process trees); latencies from watches on the API server.
* **The fight**: for ``--fight-s`` seconds the Ray autoscaler's own KubeRay node provider
  (PyPI ``ray``, :mod:`localcluster.autoscaler`, as the cluster's autoscaler account)
  scales worker groups of the fight clusters, while a git commit edits one worker group's
  template every ``--edit-every-s``. From one watch on the RayClusters and one on the
  apps' status: (a) autoscaler writes changed back by another writer, (b) git edits not
  live 60 s after their commit, (c) Synced <-> OutOfSync flips per app.

Both sides are configured once here (:data:`ARGOCD_TUNING`, :func:`gitops_ray_side`) and
the figures land in ``bench/results/peer.json``. What a side cannot do is recorded as not
measured, with the reason, never estimated.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.controller import (
    WEBHOOK_SECRET,
    ApiServerRequests,
    ConfigRepo,
    Controller,
    Env,
    commit_to_applied,
    cpu_seconds,
    drift_to_healed,
    github_push,
    process_tree,
    server_cpu,
)
from bench.machine import code_revision, machine_info
from bench.workload import REPLICAS_RULE, Workload, cluster_path, dump_yaml
from gitops_ray.errors import GitOpsRayError

Manifest = dict[str, Any]
RESULTS = Path(__file__).resolve().parent / "results" / "peer.json"
CONTROL_NAMESPACE = "gitops-ray"
GIT_USER, GIT_TOKEN = "bench", "bench-git-token"
BENCH_AGENT = "gitops-ray-bench"  # the benchmark's own requests, told apart in the audit log
EDIT_ENV = "BENCH_EDIT"
EDITED_GROUP = "cpu"
GROUPS = ("cpu", "gpu", "highmem")  # the workload's worker groups
LIVE_WITHIN_S = 60.0

ARGOCD_CONFIGS: dict[str, tuple[bool, bool, bool]] = {
    # name: (the replicas ignore rule, RespectIgnoreDifferences=true, ServerSideDiff=true)
    "none": (False, False, False),
    "ignore": (True, False, False),
    "guide": (True, True, False),
    "guide-ssd": (True, True, True),  # the guide's, with Argo CD's opt-in server-side diff
}
SSD_ANNOTATION = {"argocd.argoproj.io/compare-options": "ServerSideDiff=true"}
ARGOCD_TUNING: dict[str, Any] = {
    # Argo CD's high-availability guide (docs/operator-manual/high_availability.md):
    # "For 1000 applications, we use 50 for --status-processors and 25 for
    # --operation-processors" (defaults 20 / 10). The workload is 50 apps of 1,000
    # objects; it gets the guide's large-size figures, so no processor waits. The kube
    # client's QPS / burst stay at the documented defaults (ARGOCD_K8S_CLIENT_QPS 50,
    # ARGOCD_K8S_CLIENT_BURST 100: the docs give no other figure), and so do
    # --kubectl-parallelism-limit (20) and the resync (3 minutes).
    "args": ("--status-processors=50", "--operation-processors=25",
             "--kubectl-parallelism-limit=20"),
    "env": {"ARGOCD_K8S_CLIENT_QPS": "50", "ARGOCD_K8S_CLIENT_BURST": "100"},
    "resync_s": 180,
    "source": "docs/operator-manual/high_availability.md (processors for 1,000 apps); "
              "QPS / burst: the documented defaults",
}


@dataclass(frozen=True)
class Plan:
    """How big a run is: the workload, the fight, the samples."""

    clusters: int
    apps: int
    fight_clusters: int
    fight_s: float
    edit_every_s: float
    scale_every_s: float
    idle_s: float
    samples: int
    argocd_configs: tuple[str, ...]
    no_fight: tuple[str, ...] = ()  # configurations measured without the fight


QUICK = Plan(20, 4, 20, 120.0, 30.0, 4.0, 30.0, 3, ("guide",))
# The server-side diff is measured on every figure but the fight: its fight would be
# the guide's again (the same sync, the same apply), and 10 minutes of a shared machine.
FULL = Plan(1000, 50, 100, 600.0, 60.0, 2.0, 60.0, 10,
            ("guide", "none", "ignore", "guide-ssd"), ("guide-ssd",))


# -- the API server's record of who asked what ----------------------------------------------


class Audit:
    """Requests per client from the API server's audit log (``LocalControlPlane(audit=True)``).

    A client is the first word of its user agent (``gitops-ray``, ``argocd-application-
    controller``, ``kuberay-operator``, ``python-requests``, ...). Each request counts
    once: at ``ResponseComplete``, or at ``ResponseStarted`` for a watch (it may never end).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def since(self, offset: int) -> Counter[tuple[str, str]]:
        counts: Counter[tuple[str, str]] = Counter()
        with self.path.open("rb") as f:
            f.seek(offset)
            for line in f:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if _counted(event):
                        counts[(_client(event), _what(event))] += 1
        return counts


def _counted(event: Manifest) -> bool:
    stage = event.get("stage")
    return stage == ("ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete")


def _client(event: Manifest) -> str:
    return str(event.get("userAgent") or "?").split("/")[0].split(" ")[0]


def _what(event: Manifest) -> str:
    ref = event.get("objectRef") or {}
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    return f"{event.get('verb')} {ref.get('resource') or event.get('requestURI', '?')}{sub}"


def by_client(counts: Counter[tuple[str, str]], clients: tuple[str, ...]) -> dict[str, Any]:
    """The requests of ``clients``: total and per verb/resource; every client's total."""
    mine = {what: n for (who, what), n in counts.items() if who in clients}
    everyone: Counter[str] = Counter()
    for (who, _), n in counts.items():
        everyone[who] += n
    return {"total": sum(mine.values()), "by_verb_resource": dict(sorted(mine.items())),
            "every_client": dict(everyone.most_common())}


# -- what happened, recorded from watches ---------------------------------------------------


@dataclass
class Seen:
    """One RayCluster as a watch event showed it: per group replicas, deletes, edit marker."""

    at: float
    key: str  # namespace/name
    replicas: dict[str, int]
    deletes: dict[str, tuple[str, ...]]
    edits: dict[str, str]
    writer: str


def seen(obj: Manifest, at: float) -> Seen:
    meta = obj.get("metadata") or {}
    groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
    return Seen(at, f"{meta.get('namespace')}/{meta.get('name')}",
                {g["groupName"]: int(g.get("replicas") or 0) for g in groups},
                {g["groupName"]: tuple((g.get("scaleStrategy") or {}).get("workersToDelete")
                                       or ()) for g in groups},
                {g["groupName"]: _edit_marker(g) for g in groups},
                _newest_writer(meta.get("managedFields") or []))


def _edit_marker(group: Manifest) -> str:
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return next((str(e.get("value")) for e in containers[0].get("env") or []
                 if e.get("name") == EDIT_ENV), "")


def _newest_writer(entries: list[Manifest]) -> str:
    spec = [e for e in entries if e.get("subresource") != "status"]
    return str(max(spec, key=lambda e: e.get("time") or "").get("manager")) if spec else "?"


class Recorder:
    """Every RayCluster event and every app status change, timed, from two watches."""

    def __init__(self, kube: Any, app_watch: tuple[str, str, str | None, str | None]) -> None:
        self.kube = kube
        self.clusters: list[Seen] = []
        self.status: list[tuple[float, str, str]] = []
        self._app_watch = app_watch
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch_clusters, daemon=True),
                         threading.Thread(target=self._watch_apps, daemon=True)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def live_names(self) -> set[str]:
        return {s.key for s in self.clusters}

    def last_status(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for _, app, status in self.status:
            out[app] = status
        return out

    def _watch_clusters(self) -> None:
        self._loop("ray.io/v1", "RayCluster", None, None,
                   lambda obj: self.clusters.append(seen(obj, time.monotonic())))

    def _watch_apps(self) -> None:
        api_version, kind, namespace, selector = self._app_watch
        self._loop(api_version, kind, namespace, selector, self._app_event)

    def _app_event(self, obj: Manifest) -> None:
        name, status = app_status(obj)
        if name and (not self.status or self.last_status().get(name) != status):
            self.status.append((time.monotonic(), name, status))

    def _loop(self, api_version: str, kind: str, namespace: str | None, selector: str | None,
              handle: Callable[[Manifest], None]) -> None:
        rv = ""
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for event in self.kube.watch(api_version, kind, namespace, resource_version=rv,
                                             label_selector=selector, timeout_seconds=60):
                    obj = event.object
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.type in ("ADDED", "MODIFIED"):
                        handle(obj)
                    if self._stop.is_set():
                        return


def app_status(obj: Manifest) -> tuple[str, str]:
    """(app, sync status) of an Argo CD Application, a gitops-ray record ConfigMap or a
    Flux Kustomization (``Ready`` True: Synced, False: OutOfSync, else Progressing)."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Kustomization":
        ready: Manifest = next((c for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("type") == "Ready"), {})
        return str(meta.get("name") or ""), {"True": "Synced", "False": "OutOfSync"}.get(
            str(ready.get("status")), "Progressing")
    if obj.get("kind") == "Application":
        return str(meta.get("name") or ""), str(((obj.get("status") or {}).get("sync") or {})
                                                 .get("status") or "Unknown")
    with contextlib.suppress(ValueError, TypeError):
        status = json.loads((obj.get("data") or {}).get("status") or "{}")
        return str((meta.get("labels") or {}).get("gitops-ray.io/app") or ""), \
            str(status.get("sync") or "Unknown")
    return "", ""


# -- the fight, counted -----------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """One autoscaler decision the driver made: group ``group`` of ``key`` to ``replicas``."""

    at: float
    key: str
    group: str
    replicas: int


@dataclass(frozen=True)
class Edit:
    """One git commit that set the edit marker of ``key``'s ``group`` to ``value``."""

    at: float
    key: str
    group: str
    value: str


def reverted_writes(events: list[Seen], scales: list[Scale]) -> dict[str, Any]:
    """Autoscaler writes that live showed and another writer then changed back.

    The driver is the only writer of ``replicas`` values other than git's, so a change of
    a group's replicas away from the driver's last value, after live showed that value and
    before the driver's next decision for the group, is another writer's (named by the
    newest ``managedFields`` entry; the count does not rely on it).
    """
    reverted, writers = 0, Counter[str]()
    for s in scales:
        nxt = min((o.at for o in scales if (o.key, o.group) == (s.key, s.group) and o.at > s.at),
                  default=float("inf"))
        landed = False
        for e in events:
            if e.key != s.key or e.at < s.at or e.at >= nxt or s.group not in e.replicas:
                continue
            if e.replicas[s.group] == s.replicas:
                landed = True
            elif landed:
                reverted += 1
                writers[e.writer] += 1
                break
    return {"count": reverted, "of": len(scales), "writers": dict(writers)}


def dropped_edits(events: list[Seen], edits: list[Edit]) -> dict[str, Any]:
    """Git edits of a worker group's template not live within 60 s of their commit."""
    late = []
    for edit in edits:
        live = next((e.at for e in events if e.key == edit.key and e.at >= edit.at
                     and e.edits.get(edit.group) == edit.value), None)
        if live is None or live - edit.at > LIVE_WITHIN_S:
            late.append(edit.key)
    return {"count": len(late), "of": len(edits)}


def flips(status: list[tuple[float, str, str]], start: float, end: float) -> dict[str, Any]:
    """Synced <-> OutOfSync transitions per app between ``start`` and ``end``."""
    last: dict[str, str] = {}
    per_app: Counter[str] = Counter()
    for at, app, value in status:
        before = last.get(app)
        last[app] = value
        if start <= at <= end and {before, value} == {"Synced", "OutOfSync"}:
            per_app[app] += 1
    return {"total": sum(per_app.values()), "apps_flipping": len(per_app),
            "max_per_app": max(per_app.values(), default=0)}


# -- one side on one control plane ------------------------------------------------------------


@dataclass
class Side:
    """What differs between the sides: how it starts, its processes, its webhook, its apps."""

    name: str
    config: str
    clients: tuple[str, ...]
    start: Callable[[], None]
    pids: Callable[[], list[int]]
    webhook: Callable[[str, str, tuple[str, ...]], int]
    app_watch: tuple[str, str, str | None, str | None]
    tuning: dict[str, Any] = field(default_factory=dict)
    stop: Callable[[], None] = lambda: None
    diagnose: Callable[[], str] = lambda: ""  # what went wrong, for a figure that timed out


def guide_application(app: Manifest, config: str) -> Manifest:
    """The workload's Application as the KubeRay guide writes it, in Argo CD config ``config``."""
    ignore, respect, ssd = ARGOCD_CONFIGS[config]
    app = copy.deepcopy(app)
    if ssd:
        app["metadata"].setdefault("annotations", {}).update(SSD_ANNOTATION)
    spec = app["spec"]
    spec["ignoreDifferences"] = [copy.deepcopy(REPLICAS_RULE)] if ignore else []
    options = ["CreateNamespace=true"] + (["RespectIgnoreDifferences=true"] if respect else [])
    spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True},
                          "syncOptions": options}
    return app


def write_repo(wl: Workload, root: Path, url: str) -> ConfigRepo:
    """A fresh config repo of the workload whose apps/ are the guide's Applications."""
    repo = ConfigRepo(root, wl)
    repo.populate()
    for path in sorted((repo.work / "apps").glob("*.yaml")):
        app = yaml.safe_load(path.read_text())
        app["spec"]["source"]["repoURL"] = url
        path.write_text(dump_yaml(guide_application(app, "guide")))
    repo.commit_and_push("the KubeRay guide's Applications")
    return repo


def gitops_ray_side(env: Env, url: str, workdir: Path, _config: str = "builtin") -> Side:
    """``gitops-ray run`` with its defaults, its credentials in a config file."""
    token = workdir / "git-token"
    token.write_text(GIT_TOKEN)
    config = workdir / "gitops-ray.yaml"
    config.write_text(yaml.safe_dump({"credentials": [
        {"url": url.rsplit("/", 1)[0] + "/", "username": GIT_USER,
         "passwordFile": str(token)}]}))
    ctl = Controller(env.cp.kubeconfig, url, workdir, interval="3m",
                     extra=("--config", str(config)))
    return Side("gitops-ray", "builtin rules", ("gitops-ray",), ctl.start,
                lambda: process_tree(ctl.pid),
                lambda _file_url, sha, changed: ctl.push_webhook(url, sha, changed),
                ("v1", "ConfigMap", CONTROL_NAMESPACE, "gitops-ray.io/app"),
                {"interval": "3m (default)", "sync_parallelism": "default"}, ctl.stop)


def argocd_side(env: Env, url: str, workdir: Path, config: str) -> Side:
    """Argo CD's application controller + repo-server (+ Redis, argocd-server for webhooks)."""
    from localcluster.argocd import ArgoCD

    argocd = ArgoCD(env.cp, workdir=workdir / "argocd")
    argocd.start()
    _argocd_settings(env.kube, url)
    for path in sorted((env.repo.work / "apps").glob("*.yaml")):
        app = guide_application(yaml.safe_load(path.read_text()), config)
        env.kube.apply(app, field_manager="bench", force=True)

    def start() -> None:
        argocd.start_repo_server()
        argocd.application_controller(resync=ARGOCD_TUNING["resync_s"],
                                      args=ARGOCD_TUNING["args"], env=ARGOCD_TUNING["env"])

    def pids() -> list[int]:
        return [p for name in ("argocd-application-controller", "argocd-repo-server", "redis",
                               "argocd-server") if name in argocd.processes
                for p in process_tree(argocd.processes[name].pid)]

    def diagnose() -> str:
        apps, _ = env.kube.list("argoproj.io/v1alpha1", "Application", "argocd")
        states = [f"{a['metadata']['name']}: {json.dumps(a.get('status', {}).get('sync'))} "
                  f"{json.dumps(a.get('status', {}).get('conditions'))} "
                  f"{json.dumps((a.get('status', {}).get('operationState') or {}).get('message'))}"
                  for a in apps]
        return "\n".join([*states, argocd.log("argocd-application-controller", 15),
                          argocd.log("argocd-repo-server", 10)])

    # The application controller's clients send two user agents: "argocd-application-
    # controller" (its informers) and "argocd" (its kubectl-like applies and gets).
    return Side("argocd", config, ("argocd", "argocd-application-controller", "argocd-server",
                                   "argocd-repo-server"), start, pids,
                lambda _file_url, sha, changed: github_push(
                    f"http://{argocd.server}/api/webhook", url, sha, changed),
                ("argoproj.io/v1alpha1", "Application", "argocd", None),
                {**ARGOCD_TUNING, "args": list(ARGOCD_TUNING["args"])}, argocd.stop, diagnose)


FLUX_TUNING: dict[str, Any] = {
    # Flux's defaults, as `flux bootstrap` writes them: the GitRepository polls every
    # minute, each Kustomization reconciles (and corrects drift) every 10 minutes;
    # kustomize-controller --concurrent 4, --kube-api-qps 50, --kube-api-burst 300.
    "git_repository_interval": "1m", "kustomization_interval": "10m",
    "kustomize_controller_args": [], "prune": True, "spec.ignore": "none",
    "webhook": "what the notification-controller's Receiver does with a delivery: "
               "annotate the GitRepository reconcile.fluxcd.io/requestedAt",
}
FLUX_SOURCE = "bench"


def flux_side(env: Env, url: str, workdir: Path, config: str) -> Side:
    """Flux's source-controller + kustomize-controller: one GitRepository, one
    Kustomization per app (its directory, prune on, no ``spec.ignore``)."""
    from localcluster.flux import NAMESPACE, Flux, request_reconcile

    flux = Flux(env.cp, workdir / "flux")
    flux.install()
    for app in range(env.wl.apps):  # Argo CD's CreateNamespace=true; Flux creates none
        env.kube.apply({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": env.wl.namespace(app)}},
                       field_manager="bench", force=True)
    for obj in flux_objects(env.wl, url):
        env.kube.apply(obj, field_manager="bench", force=True)

    def pids() -> list[int]:
        return [p for proc in flux.processes.values() for p in process_tree(proc.pid)]

    def webhook(_file_url: str, _sha: str, _changed: tuple[str, ...]) -> int:
        request_reconcile(env.kube, "GitRepository", FLUX_SOURCE)
        return 200

    def diagnose() -> str:
        items, _ = env.kube.list("kustomize.toolkit.fluxcd.io/v1", "Kustomization", NAMESPACE)
        states = [f"{k['metadata']['name']}: "
                  f"{json.dumps((k.get('status') or {}).get('conditions'))}" for k in items]
        return "\n".join([*states, flux.log("source-controller", 10),
                          flux.log("kustomize-controller", 15)])

    return Side("flux", config, ("source-controller", "kustomize-controller"),
                lambda: flux.start(args=tuple(FLUX_TUNING["kustomize_controller_args"])),
                pids, webhook, ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", NAMESPACE,
                                None), dict(FLUX_TUNING), flux.stop, diagnose)


def flux_objects(wl: Workload, url: str) -> list[Manifest]:
    """The repository's credentials, the GitRepository, one Kustomization per app."""
    from localcluster.flux import NAMESPACE

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    meta = {"namespace": NAMESPACE}
    objs: list[Manifest] = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bench-git", **meta},
         "data": {"username": b64(GIT_USER), "password": b64(GIT_TOKEN)}},
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": FLUX_SOURCE, **meta},
         "spec": {"url": url, "ref": {"branch": "main"}, "secretRef": {"name": "bench-git"},
                  "interval": FLUX_TUNING["git_repository_interval"]}}]
    for app in range(wl.apps):
        objs.append({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                     "metadata": {"name": wl.app_name(app), **meta},
                     "spec": {"interval": FLUX_TUNING["kustomization_interval"],
                              "path": f"./clusters/{wl.app_name(app)}", "prune": True,
                              "sourceRef": {"kind": "GitRepository", "name": FLUX_SOURCE}}})
    return objs


def _argocd_settings(kube: Any, url: str) -> None:
    """The repository's credentials as a repository Secret; the webhook's secret."""
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "bench-repo", "namespace": "argocd",
        "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "data": {"type": b64("git"), "url": b64(url), "username": b64(GIT_USER),
                 "password": b64(GIT_TOKEN)}}, field_manager="bench", force=True)
    kube.patch("v1", "Secret", name="argocd-secret", namespace="argocd",
               patch={"data": {"webhook.github.secret": b64(WEBHOOK_SECRET)}},
               content_type="application/merge-patch+json")


SIDES: dict[str, Callable[[Env, str, Path, str], Side]] = {
    "gitops-ray": gitops_ray_side, "argocd": argocd_side, "flux": flux_side}


# -- the figures ------------------------------------------------------------------------------


def _until(done: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if done():
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError(f"{what} not within {timeout:.0f}s")


def cold_sync(env: Env, side: Side, rec: Recorder, audit: Audit) -> dict[str, Any]:
    """From the controller's start until every app is Synced and every RayCluster exists.

    Both moments are recorded apart (``all_applied_s``, ``all_synced_s``). Every object
    applied but some app never Synced within the bound is a figure, not an error:
    ``every_app_synced`` false, with the apps' last states; the other figures go on.
    """
    names = {f"{env.wl.namespace(env.wl.app_of(i))}/{env.wl.cluster_name(i)}"
             for i in range(env.wl.clusters)}
    offset, servers0, t0 = audit.mark(), server_cpu(env.cp), time.monotonic()
    bound = 120 + 3 * env.wl.clusters
    side.start()
    try:
        applied = _until(lambda: names <= rec.live_names(), timeout=bound,
                         what="every RayCluster applied")
    except TimeoutError as e:
        raise TimeoutError(f"{e}: {len(names & rec.live_names())} of {len(names)} RayClusters, "
                           f"apps {rec.last_status()}\n{side.diagnose()}") from None
    synced: float | None = None
    with contextlib.suppress(TimeoutError):
        synced = applied + _until(lambda: _all_synced(rec, env.wl.apps),
                                  timeout=max(60.0, bound - applied),
                                  what="every app Synced")
    wall = time.monotonic() - t0
    servers = {name: cpu - servers0[name] for name, cpu in server_cpu(env.cp).items()}
    client_cpu = sum(cpu_seconds(p) for p in side.pids())
    requests = by_client(audit.since(offset), side.clients)
    cores = os.cpu_count() or 1
    floor = sum(servers.values()) / cores
    states = Counter(rec.last_status().values())
    return {"wall_s": wall, "all_applied_s": applied, "all_synced_s": synced,
            "every_app_synced": synced is not None, "app_states_at_end": dict(states),
            "client_cpu_s": client_cpu, "server_cpu_s": servers,
            "server_side_floor_s": floor, "ratio_to_server_side_floor": wall / floor,
            "floor_s_all_processes": (floor * cores + client_cpu) / cores,
            "client_cpu_per_new_object_ms": 1000 * client_cpu / env.wl.clusters,
            "apiserver_cpu_per_new_object_ms": 1000 * servers["kube-apiserver"]
            / env.wl.clusters,
            "api_requests": requests,
            "requests_per_object": requests["total"] / env.wl.clusters}


def _all_synced(rec: Recorder, apps: int) -> bool:
    status = rec.last_status()
    return len(status) == apps and set(status.values()) == {"Synced"}


def idle(env: Env, side: Side, audit: Audit, seconds: float) -> dict[str, Any]:
    """Nothing changes for ``seconds``: CPU and requests per minute, ours and the server's."""
    offset, servers0 = audit.mark(), server_cpu(env.cp)
    cpu0, t0 = sum(cpu_seconds(p) for p in side.pids()), time.monotonic()
    time.sleep(seconds)  # the window itself is what is measured
    minutes = (time.monotonic() - t0) / 60
    servers = {n: (c - servers0[n]) / minutes for n, c in server_cpu(env.cp).items()}
    counts = audit.since(offset)
    requests = by_client(counts, side.clients)
    return {"window_s": seconds, "controller_cpu_s_per_min":
            (sum(cpu_seconds(p) for p in side.pids()) - cpu0) / minutes,
            "server_cpu_s_per_min": servers,
            "apiserver_cpu_s_per_min": servers["kube-apiserver"],
            "controller_requests_per_min": requests["total"] / minutes,
            # every request the API server served in the window, whoever sent it (the
            # KubeRay operator, kube-scheduler, kwok and the benchmark's own watches too)
            "apiserver_requests_per_min": sum(counts.values()) / minutes,
            "api_requests": requests}


def rss(side: Side) -> dict[str, Any]:
    """Peak RSS of the side's processes (each process's ``VmHWM``), in MiB."""
    peaks = {pid: _peak_kib(pid) for pid in side.pids()}
    return {"rss_mib": sum(peaks.values()) / 1024, "processes": len(peaks)}


def _peak_kib(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
    return 0


def fight(env: Env, side: Side, rec: Recorder, plan: Plan, workdir: Path,
          log: Callable[[str], None]) -> dict[str, Any]:
    """The autoscaler scales while git edits worker groups; what each side did to both."""
    from localcluster.autoscaler import Autoscaler

    fighters = [i * env.wl.clusters // plan.fight_clusters for i in range(plan.fight_clusters)]
    where = {i: (env.wl.namespace(env.wl.app_of(i)), env.wl.cluster_name(i)) for i in fighters}
    for ns, name in where.values():
        _autoscaler_account(env.kube, ns, name)
    scalers = {i: Autoscaler(env.cp, env.kube, ns, name, workdir) for i, (ns, name) in
               where.items()}
    rng = random.Random(41)
    scales: list[Scale] = []
    edits: list[Edit] = []
    start = time.monotonic()
    over = threading.Event()

    def edit_loop() -> None:  # one commit every edit_every_s while 60 s remain to see it
        edit_rng = random.Random(42)
        while not over.wait(0) and time.monotonic() - start < plan.fight_s - LIVE_WITHIN_S / 2:
            edits.append(_edit(env, side, edit_rng.choice(fighters), len(edits)))
            over.wait(max(0.0, start + len(edits) * plan.edit_every_s - time.monotonic()))

    editor = threading.Thread(target=edit_loop, daemon=True)
    editor.start()
    while time.monotonic() - start < plan.fight_s:
        i, group, replicas = rng.choice(fighters), rng.choice(GROUPS), rng.randint(2, 6)
        at = time.monotonic()
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            scalers[i].run("scale", group, str(replicas))
            scales.append(Scale(at, "/".join(where[i]), group, replicas))
        over.wait(max(0.0, at + plan.scale_every_s - time.monotonic()))  # the pace
    over.set()
    editor.join()
    end = time.monotonic()
    log(f"{side.name}/{side.config}: fight over ({len(scales)} scales, {len(edits)} edits)")
    over.clear()
    over.wait(LIVE_WITHIN_S / 2)  # the last edits' 60 s to land
    events = list(rec.clusters)
    return {"seconds": plan.fight_s, "fight_clusters": len(fighters),
            "reverted_writes": reverted_writes(events, scales),
            "dropped_edits": dropped_edits(events, edits),
            "flips": flips(list(rec.status), start, end)}


def _autoscaler_account(kube: Any, namespace: str, cluster: str) -> None:
    """The cluster's autoscaler ServiceAccount, made here where the operator made none.

    KubeRay makes it for a head without its own ``serviceAccountName``; the workload's
    heads name one, so the benchmark makes the account the autoscaler runs as, allowed
    what its sidecar is (RayClusters and Pods of its namespace).
    """
    meta = {"name": cluster, "namespace": namespace}
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
               field_manager="bench", force=True)
    kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
                "rules": [{"apiGroups": ["ray.io"], "resources": ["rayclusters"],
                           "verbs": ["get", "list", "watch", "patch", "update"]},
                          {"apiGroups": [""], "resources": ["pods"],
                           "verbs": ["get", "list", "watch"]}]},
               field_manager="bench", force=True)
    kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                              "kind": "Role", "name": cluster},
                "subjects": [{"kind": "ServiceAccount", "name": cluster,
                              "namespace": namespace}]}, field_manager="bench", force=True)


def _edit(env: Env, side: Side, index: int, k: int) -> Edit:
    """Commit a new edit marker into cluster ``index``'s edited worker group; push webhook."""
    path = env.repo.work / cluster_path(env.wl, index)
    obj = yaml.safe_load(path.read_text())
    group = next(g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] == EDITED_GROUP)
    container = group["template"]["spec"]["containers"][0]
    value = f"edit-{k}-{secrets.token_hex(3)}"
    container["env"] = [e for e in container.get("env") or [] if e["name"] != EDIT_ENV] \
        + [{"name": EDIT_ENV, "value": value}]
    path.write_text(dump_yaml(obj))
    sha = env.repo.commit_and_push(f"rc {index}: {EDIT_ENV}={value}")
    at = time.monotonic()
    side.webhook(env.repo.url, sha, (cluster_path(env.wl, index),))
    ns, name = env.wl.namespace(env.wl.app_of(index)), env.wl.cluster_name(index)
    return Edit(at, f"{ns}/{name}", EDITED_GROUP, value)


class _SideController:
    """What :func:`bench.controller.commit_to_applied` needs of a controller: its webhook."""

    def __init__(self, side: Side) -> None:
        self.side = side

    def push_webhook(self, repo_url: str, sha: str, changed: tuple[str, ...] = ()) -> int:
        return self.side.webhook(repo_url, sha, changed)


def run_one(side_name: str, config: str, plan: Plan, git_root: Path, git_base: str,
            log: Callable[[str], None],
            save: Callable[[dict[str, Any]], None] = lambda _out: None) -> dict[str, Any]:
    """Every figure of one side in one configuration, on its own fresh control plane.

    ``save`` is handed what is measured so far after each figure.
    """
    from gitops_ray.kube import Kube

    wl = Workload(plan.clusters, plan.apps)
    out: dict[str, Any] = {"side": side_name, "config": config,
                           "load_average_at_start": list(os.getloadavg()),
                           "machine_before": machine_busy(),
                           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    run = f"{side_name}-{config}-{secrets.token_hex(3)}"
    url = f"{git_base}/{run}/remote.git"
    with tempfile.TemporaryDirectory(prefix=f"peer-{run}-") as tmp, \
            _control_plane(log) as cp:
        workdir = Path(tmp)
        kube = Kube.connect(str(cp.kubeconfig))
        kube._api.user_agent = BENCH_AGENT  # the audit log tells our own requests apart
        kube.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": CONTROL_NAMESPACE}}, field_manager="bench")
        repo = write_repo(wl, git_root / run, url)
        repo_env = Env(wl, cp, kube, repo, ApiServerRequests(cp.url, cp.token,
                                                             cp.workdir / "ca.crt"), workdir)
        try:
            side = SIDES[side_name](repo_env, url, workdir, config)
        except (RuntimeError, OSError, subprocess.CalledProcessError, GitOpsRayError) as e:
            out["error"] = f"{side_name} did not start: {type(e).__name__}: {e}"
            log(f"{side_name}/{config}: {out['error']}")
            return out
        out["tuning"] = side.tuning
        rec = Recorder(kube, side.app_watch)
        audit = Audit(cp.audit_log)
        try:
            _figures(repo_env, side, rec, audit, plan, workdir, log, out, lambda: save(out))
        except (RuntimeError, TimeoutError, OSError, GitOpsRayError) as e:
            out["error"] = f"{type(e).__name__}: {e}"
            log(f"{side_name}/{config}: {out['error']}")
        finally:
            rec.stop()
            side.stop()
    out["load_average_at_end"] = list(os.getloadavg())
    return out


@contextlib.contextmanager
def _control_plane(log: Callable[[str], None], tries: int = 3) -> Iterator[Any]:
    """A fresh control plane with the Ray stack; a start that times out on a loaded
    machine (a CRD not established in 60 s) is tried again, up to ``tries`` times."""
    from localcluster import LocalControlPlane

    for attempt in range(1, tries + 1):
        cp = LocalControlPlane(kuberay=True, audit=True)
        try:
            cp.start()
        except (TimeoutError, RuntimeError) as e:  # start() stopped what it started
            if attempt == tries:
                raise
            log(f"control plane did not start ({e}); again")
            continue
        try:
            yield cp
        finally:
            cp.stop()
        return


def _figures(env: Env, side: Side, rec: Recorder, audit: Audit, plan: Plan, workdir: Path,
             log: Callable[[str], None], out: dict[str, Any],
             save: Callable[[], None]) -> None:
    """Each figure into ``out`` in turn, ``save`` after each (a run cut short keeps them)."""
    out["cold_sync"] = cold_sync(env, side, rec, audit)
    log(f"{side.name}/{side.config}: cold sync {out['cold_sync']['wall_s']:.1f}s, "
        f"{out['cold_sync']['requests_per_object']:.2f} requests per object")
    out["rss_after_cold_sync"] = rss(side)
    save()
    out["idle"] = idle(env, side, audit, plan.idle_s)
    save()
    ctl = _SideController(side)
    out["commit_to_applied_webhook"] = commit_to_applied(env, ctl, plan.samples,  # type: ignore[arg-type]
                                                         webhook=True, offset=0)
    save()
    out["drift_to_healed"] = _drift(env, ctl, plan.samples)
    out["rss"] = rss(side)
    save()
    if side.config in plan.no_fight:
        out["fight"] = {"skipped": "not run in this configuration (Plan.no_fight)"}
    else:
        try:
            out["fight"] = fight(env, side, rec, plan, workdir, log)
        except (RuntimeError, TimeoutError, OSError, GitOpsRayError) as e:
            out["fight"] = {"error": f"{type(e).__name__}: {e}"}
    out["rss"] = rss(side)


def _drift(env: Env, ctl: _SideController, samples: int) -> dict[str, Any]:
    """Drift -> healed, ``samples`` times, unless the first edit is not healed in 120 s.

    A side that corrects drift only on a timer (Flux: the Kustomization's interval) would
    spend two minutes a sample learning the same thing again; one timeout says it.
    """
    probe = drift_to_healed(env, ctl, 1)  # type: ignore[arg-type]
    if probe["timeouts"]:
        return {**probe, "note": "the first drift was not healed within 120 s; "
                                 "no further samples"}
    return drift_to_healed(env, ctl, samples)  # type: ignore[arg-type]


# -- the whole comparison ---------------------------------------------------------------------


def flat(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's per-side, per-configuration keys of ``peer.json``."""
    def get(*path: str) -> Any:
        value: Any = result
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    latency = get("commit_to_applied_webhook", "latency_s")
    return {"cold_sync_s": get("cold_sync", "wall_s"),
            "every_app_synced_s": get("cold_sync", "all_synced_s"),
            "requests_per_object": get("cold_sync", "requests_per_object"),
            "server_side_floor_s": get("cold_sync", "server_side_floor_s"),
            "ratio_to_server_side_floor": get("cold_sync", "ratio_to_server_side_floor"),
            "client_cpu_per_new_object_ms": get("cold_sync", "client_cpu_per_new_object_ms"),
            "apiserver_cpu_per_new_object_ms": get("cold_sync",
                                                   "apiserver_cpu_per_new_object_ms"),
            "commit_to_applied_p50_s": latency["median"] if latency else None,
            "commit_to_applied_p99_s": latency["p99"] if latency else None,
            "idle_requests_per_min": get("idle", "controller_requests_per_min"),
            "idle_cpu_s_per_min": get("idle", "controller_cpu_s_per_min"),
            "idle_apiserver_requests_per_min": get("idle", "apiserver_requests_per_min"),
            "idle_apiserver_cpu_s_per_min": get("idle", "apiserver_cpu_s_per_min"),
            "rss_mib": get("rss", "rss_mib"),
            "drift_to_healed_p50_s": (get("drift_to_healed", "latency_s") or {}).get("median"),
            "reverted_writes": get("fight", "reverted_writes", "count"),
            "dropped_edits": get("fight", "dropped_edits", "count"),
            "flips": get("fight", "flips", "total"),
            "error": result.get("error")}


def table(results: dict[str, Any]) -> str:
    """The README's table: one column per side and configuration."""
    columns = [(f"{side} ({config})", figures) for side, configs in results["sides"].items()
               for config, figures in configs.items()]
    rows = ["cold_sync_s", "every_app_synced_s", "requests_per_object", "server_side_floor_s",
            "ratio_to_server_side_floor", "client_cpu_per_new_object_ms",
            "apiserver_cpu_per_new_object_ms", "commit_to_applied_p50_s",
            "commit_to_applied_p99_s", "idle_requests_per_min", "idle_cpu_s_per_min",
            "idle_apiserver_requests_per_min", "idle_apiserver_cpu_s_per_min", "rss_mib",
            "drift_to_healed_p50_s", "reverted_writes", "dropped_edits", "flips"]
    lines = ["| figure | " + " | ".join(name for name, _ in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for row in rows:
        cells = [_cell(figures["flat"].get(row)) for _, figures in columns]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines.append("| load average / busy cores before | " + " | ".join(
        f"{f['load_average_at_start'][0]:.1f} / {(f.get('machine_before') or {}).get('busy_cores')}"
        for _, f in columns) + " |")
    lines.append("| started (UTC), commit | " + " | ".join(
        f"{f.get('started_utc', '?')}, {_commit(f)}" for _, f in columns) + " |")
    return "\n".join(lines)


def _commit(result: dict[str, Any]) -> str:
    rev = (result.get("versions") or {}).get("gitops-ray") or {}
    return str(rev.get("commit", "?"))[:7] + (" (dirty)" if rev.get("gitops_ray_dirty") else "")


def _cell(value: Any) -> str:
    if value is None:
        return "not measured"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def versions() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from localcluster import build, flux

    ray = None
    with contextlib.suppress(PackageNotFoundError):
        ray = version("ray")
    return {"kubernetes": build.K8S_VERSION, "kuberay": build.KUBERAY_VERSION,
            "argocd": build.ARGOCD_VERSION, "flux_source_controller": flux.SOURCE_VERSION,
            "flux_kustomize_controller": flux.KUSTOMIZE_VERSION,
            "ray_autoscaler (PyPI ray)": ray, "gitops-ray": code_revision()}


def machine_busy(seconds: float = 5.0) -> dict[str, Any]:
    """How busy the machine is before a side starts: load average and busy cores (/proc/stat).

    The cores' busy share over ``seconds`` says what the other tenants of a shared machine
    take right now; the load average what they took over the last minutes.
    """
    def times() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    total0, idle0 = times()
    time.sleep(seconds)  # the sample window itself
    total1, idle1 = times()
    cores = os.cpu_count() or 1
    busy = 1 - (idle1 - idle0) / max(1, total1 - total0)
    return {"load_average": list(os.getloadavg()), "busy_cores": round(busy * cores, 2),
            "cores": cores, "window_s": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="20 RayClusters over 4 apps, a 2-minute fight, Argo CD's guide "
                             "configuration only")
    parser.add_argument("--clusters", type=int)
    parser.add_argument("--apps", type=int)
    parser.add_argument("--fight-s", type=float)
    parser.add_argument("--sides", default="gitops-ray,argocd,flux",
                        help="comma-separated, in order: gitops-ray, argocd, flux (flux "
                             "where its controllers build)")
    parser.add_argument("--argocd-configs",
                        help="comma-separated: " + ", ".join(ARGOCD_CONFIGS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep-others", action="store_true",
                        help="keep the sides and configurations already in --out that this "
                             "run does not measure (a full run in parts)")
    parser.add_argument("--table-from", type=Path,
                        help="print the table of an earlier run's results file and exit")
    args = parser.parse_args(argv)
    if args.table_from:
        print(table(json.loads(args.table_from.read_text())))
        return 0
    plan = QUICK if args.quick else FULL
    plan = Plan(**{**asdict(plan), **{k: v for k, v in (
        ("clusters", args.clusters), ("apps", args.apps), ("fight_s", args.fight_s),
        ("argocd_configs", tuple(args.argocd_configs.split(",")) if args.argocd_configs
         else None)) if v is not None}})
    plan = Plan(**{**asdict(plan), "fight_clusters": min(plan.fight_clusters, plan.clusters)})
    results = run_all(plan, tuple(args.sides.split(",")), _log, args.out,
                      keep=args.keep_others)
    print(table(results))
    return 0


SIDE_CONFIGS = {"gitops-ray": ("builtin",), "flux": ("no-ignore",)}


def run_all(plan: Plan, sides: tuple[str, ...], log: Callable[[str], None], out: Path,
            *, keep: bool = False) -> dict[str, Any]:
    """Run every side and configuration; ``out`` is rewritten after each (a checkpoint).

    ``keep``: the sides and configurations already in ``out`` that this run does not
    measure are kept (a run in parts: each result carries its own plan, start and load).
    """
    from tests.gitserver import serve_git

    results: dict[str, Any] = {"plan": asdict(plan), "machine": machine_info(),
                               "versions": versions(), "sides": {}}
    if keep and out.exists():
        results["sides"] = json.loads(out.read_text()).get("sides", {})
    with tempfile.TemporaryDirectory(prefix="peer-git-") as git_root, \
            serve_git(Path(git_root), username=GIT_USER, token=GIT_TOKEN) as base:
        for side in sides:
            for config in SIDE_CONFIGS.get(side, plan.argocd_configs):
                log(f"{side}/{config}: start, load {os.getloadavg()[0]:.1f}")
                measured = versions()  # the commit as the side starts (HEAD may move)

                def save(result: dict[str, Any], side: str = side, config: str = config,
                         done: bool = False, measured: dict[str, Any] = measured) -> None:
                    result = {**result, "plan": asdict(plan), "versions": measured,
                              "complete": done}
                    result["flat"] = flat(result)
                    results["sides"].setdefault(side, {})[config] = result
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")

                save(run_one(side, config, plan, Path(git_root), base, log, save), done=True)
    return results


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
