"""The gitops-ray demo: five minutes with a real API server, a real git repo, a real controller.

Run it with ``make demo``. It starts a local control plane with the real Ray stack (etcd,
kube-apiserver, kube-scheduler, kwok fake nodes and the KubeRay operator v1.6.2, all built
from the Go module proxy), creates a config repo from ``examples/demo`` (an Argo CD
app-of-apps: a RayCluster with two worker groups and a ComputeConfig), starts
``gitops-ray run`` and walks through what users buy the tool for:

1. the initial sync, and the cluster going ready as the operator reports it;
2. ``gitops-ray diff`` after a git commit, then a push webhook applying it;
3. the Ray autoscaler's own KubeRay node provider (PyPI ``ray``) scaling a group up,
   which is *not* reverted;
4. a manual edit that is healed;
5. a file removed from git that is pruned.

Nothing here writes a RayCluster's status: the operator does, and kwok runs its pods.
Everything is cleaned up on exit (Ctrl-C included).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from localcluster.build import ensure_helm
from localcluster.controlplane import free_port

HERE = Path(__file__).resolve().parent
NS = "ray-demo"
CONTROL_NS = "gitops-ray"  # the controller's default control namespace
SECRET = "demo-webhook-secret"
BIN = Path(sys.executable).parent / "gitops-ray"


def say(text: str) -> None:
    print(f"\n\033[1;36m==> {text}\033[0m", flush=True)


def show(command: list[str], env: dict[str, str]) -> str:
    print(f"\033[2m$ gitops-ray {' '.join(command)}\033[0m", flush=True)
    out = subprocess.run([str(BIN), *command], env=env, capture_output=True, text=True,
                         check=False)
    print(out.stdout.rstrip() or out.stderr.rstrip(), flush=True)
    return out.stdout


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            took = time.monotonic() - start
            print(f"   {what}: done in {took:.1f}s", flush=True)
            return took
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for: {what}")


class Repo:
    """The demo's config repo: a bare repo and a work tree."""

    def __init__(self, root: Path) -> None:
        self.bare, self.work = root / "ray-config.git", root / "ray-config"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        shutil.copytree(HERE / "demo", self.work)
        for app in (self.work / "apps").glob("*.yaml"):
            app.write_text(app.read_text().replace("REPO_URL", self.url))
        self.git("init", "-q", "-b", "main")
        self.git("remote", "add", "origin", str(self.bare))
        self.commit("initial config")

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=demo", "-c", "user.email=demo@local",
                               *args], cwd=self.work, check=True, capture_output=True,
                              text=True).stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        self.git("push", "-q", "origin", "HEAD:main")
        return self.git("rev-parse", "HEAD")


def start_controller(cp: LocalControlPlane, repo: Repo, tmp: Path) -> tuple[
        subprocess.Popen[bytes], dict[str, int]]:
    ports = {"metrics": free_port(), "health": free_port(), "webhook": free_port()}
    argv = [str(BIN), "run", "--kubeconfig", str(cp.kubeconfig), "--repo", repo.url,
            "--revision", "main", "--apps", "apps", "--interval", "30s", "--jitter", "0",
            "--no-leader-elect", "--cache-dir", str(tmp / "cache"),
            "--helm", str(ensure_helm()), "--log-format", "json",
            "--metrics-addr", f"127.0.0.1:{ports['metrics']}",
            "--health-addr", f"127.0.0.1:{ports['health']}",
            "--webhook-addr", f"127.0.0.1:{ports['webhook']}"]
    log = open(tmp / "controller.log", "wb")  # noqa: SIM115 - lives as long as the process
    env = {**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": SECRET}
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, ports


def push_webhook(port: int, repo: Repo, sha: str) -> None:
    body = json.dumps({"ref": "refs/heads/main", "after": sha,
                       "repository": {"clone_url": repo.url}}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    resp = requests.post(f"http://127.0.0.1:{port}/webhook", data=body, timeout=5,
                         headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": signature,
                                  "Content-Type": "application/json"})
    print(f"   POST /webhook (GitHub push, signed) -> {resp.status_code}", flush=True)


def operator_ready(kube: Kube) -> bool:
    """What the KubeRay operator says about ``demo``: ready, head pod ready."""
    status = (kube.get("ray.io/v1", "RayCluster", name="demo", namespace=NS) or {}).get(
        "status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("state") == "ready" and ready.get("HeadPodReady") == "True"


def recorded_health(kube: Kube, app: str) -> str:
    return str(RecordStore(kube, CONTROL_NS).load(app).status.get("health", ""))


def running_workers(kube: Kube, group_name: str) -> int:
    pods, _ = kube.list("v1", "Pod", NS,
                        label_selector=f"ray.io/cluster=demo,ray.io/group={group_name}")
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and not (p.get("metadata") or {}).get("deletionTimestamp"))


def group(kube: Kube, name: str) -> dict[str, Any]:
    live = kube.get("ray.io/v1", "RayCluster", name="demo", namespace=NS) or {"spec": {}}
    return next((g for g in live["spec"].get("workerGroupSpecs", [])
                 if g["groupName"] == name), {})


def walk_through(cp: LocalControlPlane, repo: Repo, ports: dict[str, int],
                 env: dict[str, str], tmp: Path) -> None:
    kube = Kube.connect(str(cp.kubeconfig))
    ns_args = ["--kubeconfig", str(cp.kubeconfig)]
    say("1. Initial sync: the controller reads apps/ (Argo CD Applications) and applies them")
    wait_for("RayCluster demo and the ComputeConfig's RayCluster exist", lambda: all(
        kube.get("ray.io/v1", "RayCluster", name=n, namespace=NS)
        for n in ("demo", "analytics")), 120)
    wait_for("the KubeRay operator reports demo ready (pods Running on kwok nodes)",
             lambda: operator_ready(kube), 180)
    wait_for("gitops-ray records ray-demo Healthy", lambda: recorded_health(
        kube, "ray-demo") == "Healthy", 60)
    show(["status", *ns_args], env)

    say("2. A git commit: the cpu group gets 3 CPUs. `gitops-ray diff` shows what will change")
    rc_file = repo.work / "clusters" / "demo" / "raycluster.yaml"
    rc = yaml.safe_load(rc_file.read_text())
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["resources"] = {"requests": {"cpu": "3", "memory": "8Gi"},
                           "limits": {"cpu": "3", "memory": "8Gi"}}
    rc_file.write_text(yaml.safe_dump(rc, sort_keys=False))
    sha = repo.commit("cpu workers: 3 CPUs")
    show(["diff", *ns_args, "--repo", repo.url, "--apps", "apps", "--app", "ray-demo",
          "--color", "always", "--cache-dir", str(repo.work.parent / "cli-cache")], env)
    push_webhook(ports["webhook"], repo, sha)
    wait_for("commit applied after the webhook", lambda: group(kube, "cpu").get(
        "template", {}).get("spec", {}).get("containers", [{}])[0].get(
        "resources", {}).get("requests", {}).get("cpu") == "3")

    say("3. The Ray autoscaler's own KubeRay provider (PyPI ray) scales the cpu group to 5")
    Autoscaler(cp, kube, NS, "demo", tmp).run("scale", "cpu", "5")
    wait_for("5 cpu workers Running", lambda: running_workers(kube, "cpu") == 5, 180)
    print(f"   replicas: {group(kube, 'cpu').get('replicas')} (the autoscaler's value, "
          "not reverted)")
    show(["diff", *ns_args, "--repo", repo.url, "--apps", "apps", "--app", "ray-demo",
          "--cache-dir", str(repo.work.parent / "cli-cache")], env)
    print("   (no output: the autoscaler's replicas are not drift)")

    say("4. Someone edits the cluster by hand: rayVersion 2.40.0. Self-heal reverts it")
    kube.patch("ray.io/v1", "RayCluster", name="demo", namespace=NS,
               patch=[{"op": "replace", "path": "/spec/rayVersion", "value": "2.40.0"}],
               field_manager="kubectl-edit")
    wait_for("manual edit healed", lambda: (kube.get("ray.io/v1", "RayCluster", name="demo",
                                                     namespace=NS)
                                            or {})["spec"]["rayVersion"] == "2.52.0")
    print(f"   replicas still {group(kube, 'cpu').get('replicas')}: healing kept the "
          "autoscaler's value")

    say("5. job-settings.yaml is removed from git: the ConfigMap is pruned")
    (repo.work / "clusters" / "demo" / "job-settings.yaml").unlink()
    push_webhook(ports["webhook"], repo, repo.commit("drop job settings"))
    wait_for("ConfigMap pruned", lambda: kube.get("v1", "ConfigMap", name="job-settings",
                                                  namespace=NS)
             is None)
    show(["status", *ns_args], env)


def main() -> None:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="gitops-ray-demo-") as tmp_dir:
        tmp = Path(tmp_dir)
        say("Starting a local control plane with the Ray stack (kube-apiserver, scheduler, "
            "kwok nodes, KubeRay operator)")
        with LocalControlPlane(kuberay=True) as cp:
            repo = Repo(tmp)
            say(f"Config repo {repo.url}: apps/ holds two Argo CD Applications")
            proc, ports = start_controller(cp, repo, tmp)
            env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
            try:
                walk_through(cp, repo, ports, env, tmp)
                say("Done. Controller log: last lines")
                print("\n".join((tmp / "controller.log").read_text().splitlines()[-5:]))
            except KeyboardInterrupt:
                print("\ninterrupted", flush=True)
            finally:
                proc.terminate()
                proc.wait(30)
    say("Cleaned up: control plane stopped, temporary files removed")


if __name__ == "__main__":
    main()
