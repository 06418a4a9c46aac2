"""Controller figures at scale: cold sync, no-op cycle, latencies, memory, API requests.

Why black-box: the figures must describe what a platform team will see, so the harness
runs the real ``gitops-ray`` CLI and controller as subprocesses against the real local
control plane, with a real git repository on disk, and observes them only from outside:

* **API requests** are counted by the API server itself (``apiserver_request_total`` from
  its ``/metrics``, by verb and resource; non-resource paths such as discovery and our own
  scrapes are left out), and cross-checked with the controller's
  ``gitops_ray_k8s_requests_total`` when it is running. The only other client is the
  namespace/garbage-collector controller, which is idle in these windows.
* **CPU** is ``utime + stime`` of the controller's process tree (``/proc``), **memory** the
  tree's RSS (``VmRSS``, and the peak ``VmHWM`` of the main process).
* **Latencies** are measured from the moment git has the commit (or the API server has the
  manual edit) to the moment a watch on the RayCluster shows the change applied (or
  reverted). The webhook is a signed GitHub push delivery, as GitHub would send it.

Figures (numbers as in issue 8): 1 cold sync (``gitops-ray sync``), 2 no-op cycle of all
apps (triggered by a push webhook that changes nothing), 3 commit → applied via webhook and
via polling at a 5 s interval, 4 drift → healed, 5 RSS with everything loaded; 7 is the
same at several sizes. Anything the CLI cannot do yet is recorded as not measured, with
the reason, never estimated.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.machine import code_revision, summary
from bench.workload import EDIT_MANAGER, RAY_VERSION, Workload, one_line_change, repo_files

CONTROL_NAMESPACE = "gitops-ray"
WEBHOOK_SECRET = "bench-webhook-secret"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]

Manifest = dict[str, Any]
_REFRESHED_APP = re.compile(rb'"app": ?"([^"]*)"[^\n]*"app_refreshed"|'
                            rb'"app_refreshed"[^\n]*"app": ?"([^"]*)"')


def gitops_ray_bin() -> str:
    """The ``gitops-ray`` console script of the venv running this benchmark."""
    here = Path(sys.executable).parent / "gitops-ray"
    return str(here) if here.exists() else (shutil.which("gitops-ray") or "gitops-ray")


def command_available(*words: str) -> str | None:
    """``None`` when ``gitops-ray <words> --help`` works, else why it does not."""
    out = subprocess.run([gitops_ray_bin(), *words, "--help"], capture_output=True, text=True,
                         check=False, timeout=60)
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return f"`gitops-ray {' '.join(words)}` is not available: {lines[-1] if lines else '?'}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- API requests as the API server counts them -------------------------------------------


class ApiServerRequests:
    """Snapshots of ``apiserver_request_total`` of the local control plane."""

    def __init__(self, url: str, token: str, ca_file: Path) -> None:
        self.url = url
        self.token = token
        self.ctx = ssl.create_default_context(cafile=str(ca_file))

    def snapshot(self) -> Counter[str]:
        request = urllib.request.Request(f"{self.url}/metrics")
        request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=30, context=self.ctx) as resp:
            text = resp.read().decode()
        counts: Counter[str] = Counter()
        for family in text_string_to_metric_families(text):
            if family.name != "apiserver_request":
                continue
            for sample in family.samples:
                labels = sample.labels
                if not sample.name.endswith("_total") or not labels.get("resource"):
                    continue
                sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
                dry = " (dry run)" if labels.get("dry_run") else ""
                counts[f"{labels['verb']} {labels['resource']}{sub}{dry}"] += int(sample.value)
        return counts


def delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in sorted(after) if after[k] - before[k] > 0}


def request_summary(counts: dict[str, int]) -> dict[str, Any]:
    """Total, per verb/resource, and the per-object GETs of RayClusters (target: zero)."""
    return {"total": sum(counts.values()), "by_verb_resource": counts,
            "raycluster_gets": sum(v for k, v in counts.items()
                                   if k.startswith("GET rayclusters"))}


# -- the config repository ----------------------------------------------------------------


class ConfigRepo:
    """A bare repository on disk (the "remote") and a work tree that pushes to it."""

    def __init__(self, root: Path, wl: Workload) -> None:
        self.wl = wl
        self.bare = root / "remote.git"
        self.work = root / "work"
        root.mkdir(parents=True, exist_ok=True)
        self._git(root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        self._git(root, "clone", "-q", str(self.bare), str(self.work))

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    @staticmethod
    def _git(cwd: Path, *args: str) -> str:
        return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True,
                              text=True).stdout.strip()

    def populate(self) -> str:
        for rel, text in repo_files(self.wl, repo_url=self.url):
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return self.commit_and_push(f"{self.wl.clusters} RayClusters in {self.wl.apps} apps")

    def commit_and_push(self, message: str) -> str:
        self._git(self.work, "add", "-A")
        self._git(self.work, "commit", "-q", "-m", message)
        self._git(self.work, "push", "-q", "origin", "HEAD:main")
        return self._git(self.work, "rev-parse", "HEAD")

    def change_one_line(self, index: int, value: str) -> tuple[str, str]:
        """Commit and push a one-line change of cluster ``index``: (commit SHA, its file)."""
        path = one_line_change(self.wl, self.work, index, value)
        return self.commit_and_push(f"rc {index}: CONFIG_REVISION={value}"), path


def github_push(url: str, repo_url: str, sha: str, changed: tuple[str, ...] = (), *,
                secret: str = WEBHOOK_SECRET) -> int:
    """POST a signed GitHub push delivery for the default branch to ``url``; its status.

    ``changed``: the files the pushed commit modified, listed as GitHub lists them in
    ``commits[].modified`` (a push of a commit always carries them; the no-op cycle's
    delivery re-announces the same commit and lists none).
    """
    payload: dict[str, Any] = {"ref": "refs/heads/main", "after": sha, "repository": {
        "clone_url": repo_url, "html_url": repo_url, "default_branch": "main"}}
    if changed:
        payload["commits"] = [{"id": sha, "added": [], "removed": [],
                               "modified": list(changed)}]
    body = json.dumps(payload).encode()
    signature = hmac.new(secret.encode(), body, hashlib.sha256)
    request = urllib.request.Request(
        url, data=body, method="POST",
        headers={"Content-Type": "application/json", "X-GitHub-Event": "push",
                 "X-GitHub-Delivery": secrets.token_hex(8),
                 "X-Hub-Signature-256": "sha256=" + signature.hexdigest(),
                 "X-Hub-Signature": "sha1=" + hmac.new(secret.encode(), body,
                                                       hashlib.sha1).hexdigest()})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return int(resp.status)


# -- the controller process ----------------------------------------------------------------


def _proc_stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (jq workers, git)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int(_proc_stat(int(entry.name))[1]), []).append(
                    int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the live process tree plus the reaped children of ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError):
            fields = _proc_stat(p)
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if p == pid:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / tick


def memory_kib(pid: int) -> dict[str, int]:
    """RSS of the whole tree, and the main process's RSS and peak (KiB)."""
    def status(p: int) -> dict[str, int]:
        out = {}
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
        return out
    main = status(pid)
    tree = sum(status(p).get("VmRSS", 0) for p in process_tree(pid))
    return {"tree_rss_kib": tree, "main_rss_kib": main.get("VmRSS", 0),
            "main_peak_rss_kib": main.get("VmHWM", 0)}


@dataclass
class Controller:
    """``gitops-ray run`` as a subprocess with its HTTP endpoints on free local ports."""

    kubeconfig: Path
    repo_url: str
    workdir: Path
    interval: str = "0"
    extra: tuple[str, ...] = ()  # more ``run`` options (a config file, say)
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    _log_offset: int = 0
    _log_count: int = 0
    _standby_count: int = 0
    _apps_seen: set[bytes] = field(default_factory=set)

    def argv(self) -> list[str]:
        self.ports = {name: free_port() for name in ("metrics", "health", "webhook")}
        return [gitops_ray_bin(), "run", "--kubeconfig", str(self.kubeconfig),
                "--repo", self.repo_url, "--apps", "apps",
                "--interval", self.interval, "--jitter", "0",
                "--cache-dir", str(self.workdir / "cache"),
                "--control-namespace", CONTROL_NAMESPACE, "--no-leader-elect",
                "--metrics-addr", f"127.0.0.1:{self.ports['metrics']}",
                "--health-addr", f"127.0.0.1:{self.ports['health']}",
                "--webhook-addr", f"127.0.0.1:{self.ports['webhook']}",
                "--log-format", "json", "--log-level", "debug", *self.extra]

    def start(self, *, timeout: float = 600.0) -> None:
        self.log_path = self.workdir / f"controller-{time.time_ns()}.log"
        self._log_offset = self._log_count = self._standby_count = 0
        self._apps_seen = set()
        log = open(self.log_path, "wb")  # noqa: SIM115
        env = {**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": WEBHOOK_SECRET}
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gitops-ray run exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            if self._get("health", "/readyz", quiet=True) is not None:
                return
            time.sleep(0.2)
        raise RuntimeError(f"gitops-ray run not ready after {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        logs = sorted(self.workdir.glob("controller-*.log"))
        text = logs[-1].read_text(errors="replace") if logs else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _get(self, port: str, path: str, *, quiet: bool = False) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[port]}{path}",
                                        timeout=10) as resp:
                return str(resp.read().decode())
        except OSError:
            if quiet:
                return None
            raise

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics`` as ``name{labels}`` -> value."""
        text = self._get("metrics", "/metrics") or ""
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
        return out

    def reconciles(self) -> float:
        return sum(v for k, v in self.metrics().items()
                   if k.startswith("gitops_ray_reconcile_total{"))

    def requests(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for key, value in self.metrics().items():
            if key.startswith("gitops_ray_k8s_requests_total{"):
                counts[key[len("gitops_ray_k8s_requests_total"):]] += int(value)
        return counts

    def push_webhook(self, repo_url: str, sha: str, changed: tuple[str, ...] = ()) -> int:
        """A signed GitHub push delivery for the default branch (:func:`github_push`)."""
        return github_push(f"http://127.0.0.1:{self.ports['webhook']}/webhook", repo_url, sha,
                           changed)

    def refreshes_logged(self) -> int:
        """Refreshes the controller finished so far (``app_refreshed``, logged once the
        refresh is over and counted in ``/metrics``).

        Reading the log costs the controller nothing, unlike scraping ``/metrics`` in a
        tight loop, which would slow down the very cycle being timed (each scrape costs
        the controller tens of milliseconds of CPU).
        """
        assert self.log_path is not None
        with open(self.log_path, "rb") as handle:
            handle.seek(self._log_offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._log_offset += len(complete)
        self._log_count += complete.count(b'"app_refreshed"')
        self._standby_count += complete.count(b'"app_prepared"')
        self._apps_seen.update(m.group(1) or m.group(2)
                               for m in _REFRESHED_APP.finditer(complete))
        return self._log_count

    def wait_every_app(self, apps: int, timeout: float) -> float:
        """Wait until ``apps`` distinct apps have logged a refresh; the time it took.

        A count of refreshes is not enough at start-up: watch events refresh the apps
        already done again, so the count can be reached while some app still renders
        for the first time.
        """
        def every_app() -> bool:
            self.refreshes_logged()  # reads the new log lines
            return len(self._apps_seen) >= apps

        return self._until(every_app, timeout, f"{apps} apps not all refreshed",
                           interval=0.05)

    def work_logged(self) -> int:
        """Refreshes and standby passes (sharding: apps it would take over) so far."""
        return self.refreshes_logged() + self._standby_count

    def wait_reconciles(self, target: float, timeout: float, *, logged: int | None = None
                        ) -> float:
        """Wait until ``target`` refreshes are counted in ``/metrics``; the time it took.

        With ``logged``, the time is until that many refreshes were logged as finished
        (reading the log); ``/metrics`` is scraped once afterwards, to check the count.
        """
        start = time.monotonic()
        took = self.wait_logged(logged, timeout) if logged is not None else None
        self._until(lambda: self.reconciles() >= target, timeout - (time.monotonic() - start),
                    f"{target} refreshes not reached", interval=0.02)
        return took if took is not None else time.monotonic() - start

    def wait_logged(self, logged: int, timeout: float) -> float:
        """Wait until ``logged`` refreshes were logged as finished; the time it took."""
        return self._until(lambda: self.refreshes_logged() >= logged, timeout,
                           f"{logged} refreshes not logged", interval=0.005)

    def _until(self, done: Callable[[], bool], timeout: float, what: str, *,
               interval: float) -> float:
        """Poll ``done`` every ``interval`` until true; the time it took. Raises on
        ``timeout`` (``what`` names it) and when the controller exited."""
        start = time.monotonic()
        while not done():
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{what} in {timeout:.0f}s")
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"controller exited: {self.log_tail()}")
            time.sleep(interval)
        return time.monotonic() - start

    def wait_idle(self, quiet: float = 3.0, timeout: float = 600.0) -> float:
        """Wait until no refresh or standby pass was logged for ``quiet`` seconds; the
        time it took.

        After the first cycle, the watches' initial lists still trigger refreshes of
        every app (their objects were "added"); a no-op sample taken during that burst
        measures start-up, not a steady-state cycle. A sharded replica renders the other
        replicas' apps when it is otherwise idle; a failover measured before those renders
        are done would measure a replica's start-up too.
        """
        start = last_change = time.monotonic()
        count = self.work_logged()
        while time.monotonic() - last_change < quiet:
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"controller still refreshing after {timeout:.0f}s")
            time.sleep(0.2)
            now = self.work_logged()
            if now != count:
                count, last_change = now, time.monotonic()
        return time.monotonic() - start


# -- watching one RayCluster ----------------------------------------------------------------


class Watcher:
    """Waits, on a watch, for a RayCluster to satisfy a predicate; records when it did."""

    def __init__(self, kube: Any, namespace: str, name: str,
                 predicate: Callable[[Manifest], bool]) -> None:
        self.kube, self.namespace, self.name, self.predicate = kube, namespace, name, predicate
        self.seen_at: float | None = None
        self._done = threading.Event()
        _, self.rv = kube.list("ray.io/v1", "RayCluster", namespace)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rv = self.rv
        while not self._done.is_set():
            with contextlib.suppress(Exception):
                for event in self.kube.watch("ray.io/v1", "RayCluster", self.namespace,
                                             resource_version=rv, timeout_seconds=60):
                    obj = event.object
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if obj.get("metadata", {}).get("name") == self.name \
                            and self.predicate(obj):
                        self.seen_at = time.monotonic()
                        self._done.set()
                        return

    def wait(self, timeout: float) -> float | None:
        self._done.wait(timeout)
        self._done.set()
        return self.seen_at


def head_env(obj: Manifest, name: str) -> str | None:
    container = obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    return next((e.get("value") for e in container.get("env", []) if e["name"] == name), None)


def head_image(obj: Manifest) -> str:
    return str(obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"])


def _env_is(name: str, value: str) -> Callable[[Manifest], bool]:
    return lambda obj: head_env(obj, name) == value


def _image_is(image: str) -> Callable[[Manifest], bool]:
    return lambda obj: head_image(obj) == image


# -- the figures --------------------------------------------------------------------------


@dataclass
class Env:
    """Everything one size's run needs."""

    wl: Workload
    cp: Any  # LocalControlPlane
    kube: Any  # gitops_ray.kube.Kube of the benchmark itself
    repo: ConfigRepo
    api: ApiServerRequests
    workdir: Path


def cold_sync(env: Env) -> dict[str, Any]:
    """Figure 1: ``gitops-ray sync`` of every app into an empty cluster.

    Every RayCluster is new, so the API server's count over their number is what one new
    object costs (the issue's target: at most 2; the floor is its one apply). The API
    server's and etcd's CPU are measured too: a RayCluster write costs the API server tens
    of milliseconds (admission, the upstream CRD's schema and CEL rules, managed fields),
    and on a machine that runs it beside the CLI, ``floor_s`` (all three processes' CPU
    over the cores) is the wall time no client could beat.
    """
    from gitops_ray import settings

    argv = [gitops_ray_bin(), "sync", "--kubeconfig", str(env.cp.kubeconfig),
            "--repo", env.repo.url, "--apps", "apps", "--cache-dir",
            str(env.workdir / "cli-cache"), "--control-namespace", CONTROL_NAMESPACE]
    before, cpu0 = env.api.snapshot(), resource.getrusage(resource.RUSAGE_CHILDREN)
    servers0 = server_cpu(env.cp)
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    servers = {name: cpu - servers0[name] for name, cpu in server_cpu(env.cp).items()}
    requests = delta(before, env.api.snapshot())
    applied = sum(1 for line in out.stdout.splitlines() if "RayCluster" in line)
    counted = request_summary(requests)
    client = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    result = {"wall_s": wall, "cpu_s": client, "exit_code": out.returncode,
              "server_cpu_s": servers,
              "apiserver_cpu_per_new_object_ms": 1000 * servers["kube-apiserver"]
              / env.wl.clusters,
              "floor_s": (client + sum(servers.values())) / (os.cpu_count() or 1),
              "resources_reported": applied, "api_requests": counted,
              "requests_per_new_object": counted["total"] / env.wl.clusters,
              "sync_parallelism": settings.option("sync.parallelism").default}
    if out.returncode != 0:
        result["stderr_tail"] = out.stderr.strip().splitlines()[-5:]
    return result


def server_cpu(cp: Any) -> dict[str, float]:
    """CPU seconds so far of the control plane's API server and etcd (``/proc``)."""
    return {name: cpu_seconds(cp.processes[name].pid) for name in ("kube-apiserver", "etcd")}


def noop_cycles(env: Env, ctl: Controller, samples: int) -> dict[str, Any]:
    """Figure 2: a refresh of every app when nothing changed (push webhook, same commit)."""
    sha = ConfigRepo._git(env.repo.work, "rev-parse", "HEAD")
    walls, cpus, totals, gets = [], [], [], []
    runs = []
    for _ in range(samples):
        target = ctl.reconciles() + env.wl.apps
        logged = ctl.refreshes_logged() + env.wl.apps
        before, own_before, cpu0 = env.api.snapshot(), ctl.requests(), cpu_seconds(ctl.pid)
        ctl.push_webhook(env.repo.url, sha)
        wall = ctl.wait_logged(logged, timeout=600)
        cpu = cpu_seconds(ctl.pid) - cpu0
        ctl.wait_reconciles(target, timeout=600)  # counted in /metrics too
        time.sleep(0.5)  # let trailing writes of the cycle land before counting
        requests = request_summary(delta(before, env.api.snapshot()))
        own = delta(own_before, ctl.requests())
        walls.append(wall)
        cpus.append(cpu)
        totals.append(requests["total"])
        gets.append(requests["raycluster_gets"])
        runs.append({"wall_s": wall, "cpu_s": cpu, "api_requests": requests,
                     "controller_counted": own})
    return {"wall_s": summary(walls), "cpu_s": summary(cpus),
            "api_requests_total": summary(totals), "raycluster_gets": summary(gets),
            "runs": runs}


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return None
    # --gil: only the thread holding the GIL is sampled, so threads waiting on a lock
    # (the other queue workers, the log handler's lock) do not pass for CPU time
    argv = [spy, "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
            "--output", str(out), "--nonblocking", "--gil"]
    recorder = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    return recorder


def _stop(recorder: subprocess.Popen[bytes]) -> None:
    recorder.send_signal(signal.SIGINT)
    try:
        recorder.wait(60)
    except subprocess.TimeoutExpired:
        recorder.kill()


def profile_noop_cycle(env: Env, ctl: Controller, out: Path, cycles: int = 10
                       ) -> dict[str, Any]:
    """Sample the controller with py-spy during ``cycles`` no-op cycles; where the time goes.

    Optional (``--profile``): py-spy (PyPI) samples the running process from outside, all
    threads on CPU, at 100 Hz; the collapsed stacks go to ``out`` and the top functions by
    own and inclusive share of samples into the results. Several cycles, one after the
    other: one cycle at 2,000 RayClusters is ~20 samples, too few to rank anything.
    """
    sha = ConfigRepo._git(env.repo.work, "rev-parse", "HEAD")
    recorder = _py_spy(ctl.pid, out)
    if recorder is None:
        return {"not_measured": "py-spy is not installed"}
    walls = []
    for _ in range(cycles):
        target = ctl.reconciles() + env.wl.apps
        logged = ctl.refreshes_logged() + env.wl.apps
        ctl.push_webhook(env.repo.url, sha)
        walls.append(ctl.wait_reconciles(target, timeout=600, logged=logged))
    _stop(recorder)
    return {"cycles": cycles, "wall_s": sum(walls), "stacks": str(out), **_top_frames(out)}


def profile_commit(env: Env, ctl: Controller, out: Path) -> dict[str, Any]:
    """The same during one commit -> applied (webhook)."""
    recorder = _py_spy(ctl.pid, out)
    if recorder is None:
        return {"not_measured": "py-spy is not installed"}
    figure = commit_to_applied(env, ctl, 1, webhook=True, offset=env.wl.apps // 2)
    _stop(recorder)
    return {**figure, "stacks": str(out), **_top_frames(out)}


def _top_frames(path: Path, top: int = 20) -> dict[str, Any]:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].rstrip(")")
                      for f in stack.split(";") if f]
            if not frames:
                continue
            total += int(count)
            own[frames[-1]] += int(count)
            for frame in set(frames):
                inclusive[frame] += int(count)
    share = (lambda n: round(n / total, 3)) if total else (lambda n: 0.0)
    return {"on_cpu_samples": total,
            "top_own": [(f, share(n)) for f, n in own.most_common(top)],
            "top_inclusive": [(f, share(n)) for f, n in inclusive.most_common(top)]}


def commit_to_applied(env: Env, ctl: Controller, samples: int, *, webhook: bool,
                      offset: int) -> dict[str, Any]:
    """Figure 3: a one-line commit until the RayCluster in the cluster carries it."""
    latencies, misses = [], 0
    for k in range(samples):
        index = _spread(env.wl, k + offset)
        name, ns = env.wl.cluster_name(index), env.wl.namespace(env.wl.app_of(index))
        value = f"bench-{'w' if webhook else 'p'}-{k}-{secrets.token_hex(3)}"
        watcher = Watcher(env.kube, ns, name, _env_is("CONFIG_REVISION", value))
        sha, path = env.repo.change_one_line(index, value)
        t0 = time.monotonic()
        if webhook:
            ctl.push_webhook(env.repo.url, sha, (path,))
        seen = watcher.wait(timeout=120)
        if seen is None:
            misses += 1
        else:
            latencies.append(seen - t0)
    return {"latency_s": summary(latencies) if latencies else None, "samples": samples,
            "timeouts": misses}


def drift_to_healed(env: Env, ctl: Controller, samples: int) -> dict[str, Any]:
    """Figure 4: a manual image edit of one RayCluster until self-heal reverts it."""
    latencies, misses = [], 0
    for k in range(samples):
        index = _spread(env.wl, k)
        name, ns = env.wl.cluster_name(index), env.wl.namespace(env.wl.app_of(index))
        live = env.kube.get("ray.io/v1", "RayCluster", name=name, namespace=ns)
        original = head_image(live)
        watcher = Watcher(env.kube, ns, name, _image_is(original))
        env.kube.patch("ray.io/v1", "RayCluster", name=name, namespace=ns, patch=[
            {"op": "replace", "path": "/spec/headGroupSpec/template/spec/containers/0/image",
             "value": f"rayproject/ray:{RAY_VERSION}-drift-{k}"}],
            field_manager=EDIT_MANAGER)
        t0 = time.monotonic()
        seen = watcher.wait(timeout=120)
        if seen is None:
            misses += 1
        else:
            latencies.append(seen - t0)
    return {"latency_s": summary(latencies) if latencies else None, "samples": samples,
            "timeouts": misses}


def _spread(wl: Workload, k: int) -> int:
    """The first cluster of app ``k`` (mod apps): every sample hits a different app."""
    return wl.members(k % wl.apps).start


@contextlib.contextmanager
def environment(wl: Workload, workdir: Path) -> Iterator[Env]:
    from gitops_ray.kube import Kube
    from localcluster import LocalControlPlane

    with LocalControlPlane() as cp:
        kube = Kube.connect(str(cp.kubeconfig))
        kube.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": CONTROL_NAMESPACE}}, field_manager="bench")
        repo = ConfigRepo(workdir / "repo", wl)
        repo.populate()
        yield Env(wl, cp, kube, repo, ApiServerRequests(cp.url, cp.token,
                                                        cp.workdir / "ca.crt"), workdir)


def run_size(wl: Workload, *, samples: int, polling_samples: int,
             log: Callable[[str], None], profile_dir: Path | None = None) -> dict[str, Any]:
    """All controller figures for one workload size."""
    out: dict[str, Any] = {"clusters": wl.clusters, "apps": wl.apps,
                           "load_average_at_start": list(os.getloadavg()),
                           "code": code_revision()}
    with tempfile.TemporaryDirectory(prefix="gitops-ray-bench-") as tmp, \
            environment(wl, Path(tmp)) as env:
        missing = command_available("sync")
        out["cold_sync"] = {"not_measured": missing} if missing else cold_sync(env)
        log(f"{wl.clusters}: cold sync {_brief(out['cold_sync'])}")
        missing = command_available("run")
        if missing:
            for figure in ("noop_cycle", "commit_to_applied_webhook",
                           "commit_to_applied_polling_5s", "drift_to_healed", "memory"):
                out[figure] = {"not_measured": missing}
            return out
        out.update(_with_controller(env, samples, polling_samples, log, profile_dir))
        out["load_average_at_end"] = list(os.getloadavg())
    return out


def _with_controller(env: Env, samples: int, polling_samples: int,
                     log: Callable[[str], None], profile_dir: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ctl = Controller(env.cp.kubeconfig, env.repo.url, env.workdir, interval="0")
    try:
        started = time.monotonic()
        ctl.start()
        ctl.wait_every_app(env.wl.apps, timeout=1800)
        out["controller_start_to_first_cycle_s"] = time.monotonic() - started
        ctl.wait_idle()
        out["controller_start_to_idle_s"] = time.monotonic() - started
        out["noop_cycle"] = noop_cycles(env, ctl, samples=max(3, samples // 4))
        log(f"{env.wl.clusters}: no-op cycle {_brief(out['noop_cycle'])}")
        out["memory"] = memory_kib(ctl.pid)
        if profile_dir is not None:
            out["noop_cycle_profile"] = profile_noop_cycle(
                env, ctl, profile_dir / f"controller-noop-{env.wl.clusters}.txt")
            out["commit_profile"] = profile_commit(
                env, ctl, profile_dir / f"controller-commit-{env.wl.clusters}.txt")
        out["commit_to_applied_webhook"] = commit_to_applied(env, ctl, samples, webhook=True,
                                                             offset=0)
        log(f"{env.wl.clusters}: commit->applied (webhook) "
            f"{_brief(out['commit_to_applied_webhook'])}")
        out["drift_to_healed"] = drift_to_healed(env, ctl, samples)
        log(f"{env.wl.clusters}: drift->healed {_brief(out['drift_to_healed'])}")
        out["memory_after"] = memory_kib(ctl.pid)
    except (RuntimeError, TimeoutError, OSError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    finally:
        ctl.stop()
    polling = Controller(env.cp.kubeconfig, env.repo.url, env.workdir, interval="5s")
    try:
        polling.start()
        polling.wait_reconciles(env.wl.apps, timeout=1800, logged=env.wl.apps)
        out["commit_to_applied_polling_5s"] = commit_to_applied(
            env, polling, polling_samples, webhook=False, offset=samples)
        log(f"{env.wl.clusters}: commit->applied (poll 5s) "
            f"{_brief(out['commit_to_applied_polling_5s'])}")
    except (RuntimeError, TimeoutError, OSError) as e:
        out["commit_to_applied_polling_5s"] = {"error": f"{type(e).__name__}: {e}"}
    finally:
        polling.stop()
    return out


def _brief(figure: dict[str, Any]) -> str:
    if "not_measured" in figure:
        return "not measured"
    for key in ("latency_s", "wall_s"):
        value = figure.get(key)
        if isinstance(value, dict):
            return f"median {value['median']:.3f}s p99 {value['p99']:.3f}s"
        if isinstance(value, float):
            per = figure.get("requests_per_new_object")
            return (f"{value:.2f}s, {figure.get('api_requests', {}).get('total', '?')} requests"
                    + (f" ({per:.2f} per new object)" if per is not None else ""))
    return json.dumps(figure)[:200]
