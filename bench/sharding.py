"""Sharding: 3 replicas, kill one; how long until its apps are reconciled again.

The issue's figure: **3 replicas: kill one replica -> its apps reconciled again < lease
duration + 5 s, 0 apps reconciled twice at once**. Real everything: the local control
plane, a git repository on disk, three ``gitops-ray run`` processes with
``sharding.enabled``, each app one ConfigMap. Measured from outside:

1. every app synced at ``v1`` and every shard held by its rendezvous owner;
2. the replica holding the most shards is SIGKILLed, ``v2`` is committed and the push
   delivered to a survivor (which refreshes its own apps and forwards to the others);
3. the seconds from the kill until every app of the killed replica is at ``v2`` (its
   shards expire, the survivors take them and sync), against ``leaseDuration + 5 s``;
4. from every replica's log, the intervals during which each app was being synced
   (``sync_started`` .. ``sync_finished``; the killed one's open syncs end at the kill):
   two replicas' intervals of one app that overlap are counted.

Run: ``python -m bench.sharding [--apps 30] [--shards 16] [--lease-duration 15]``; writes
``bench/results/sharding.json`` with the machine's load average, as the other benchmarks do.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench.machine import machine_info
from gitops_ray.kube import Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.runtime.shards import GROUP_LABEL, ROLE_LABEL, shard_of
from localcluster import LocalControlPlane
from localcluster.controlplane import free_port

RESULTS = Path(__file__).resolve().parent / "results"
NAMESPACE = "bench-shards"
SECRET = "bench-shards-secret"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(work: Path, apps: list[str], version: str) -> str:
    for app in apps:
        path = work / "apps" / app / "cm.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": f"cm-{app}"},
                                        "data": {"version": version}}))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", version)
    git(work, "push", "-q", "origin", "HEAD:main")
    return git(work, "rev-parse", "HEAD")


def application(app: str, repo: str) -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": app, "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": repo, "targetRevision": "HEAD",
                                "path": f"apps/{app}"},
                     "destination": {"server": "https://kubernetes.default.svc",
                                     "namespace": NAMESPACE},
                     "syncPolicy": {"automated": {"prune": True}}}}


class Replica:
    def __init__(self, identity: str, config: Path, workdir: Path) -> None:
        self.identity, self.webhook_port = identity, free_port()
        self.log = workdir / f"{identity}.log"
        url = f"http://127.0.0.1:{self.webhook_port}/webhook"
        args = [sys.executable, "-m", "gitops_ray", "run", f"--config={config}",
                f"--leader-election-identity={identity}", "--metrics-addr=",
                f"--health-addr=127.0.0.1:{free_port()}",
                f"--webhook-addr=127.0.0.1:{self.webhook_port}",
                f"--webhook-advertise-url={url}", f"--cache-dir={workdir / identity}",
                "--log-format=json"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "GITOPS_RAY_WEBHOOK_SECRET": SECRET})

    def push(self, repo: str, sha: str) -> dict[str, Any]:
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"clone_url": repo, "default_branch": "main"}}).encode()
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.webhook_port}/webhook", data=body, method="POST",
            headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": f"sha256={digest}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return dict(json.loads(resp.read()))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def versions(kube: Kube) -> dict[str, str]:
    items, _ = kube.list("v1", "ConfigMap", NAMESPACE)
    return {i["metadata"]["name"][3:]: str((i.get("data") or {}).get("version"))
            for i in items if i["metadata"]["name"].startswith("cm-")}


def holders(kube: Kube, lease: str) -> dict[int, str]:
    items, _ = kube.list(LEASE_API, "Lease", NAMESPACE,
                         label_selector=f"{GROUP_LABEL}={lease},{ROLE_LABEL}=shard")
    return {int(i["metadata"]["name"].rsplit("-", 1)[1]): str(i["spec"]["holderIdentity"])
            for i in items if (i.get("spec") or {}).get("holderIdentity")}


def wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not within {timeout:.0f}s")


def intervals(log: Path, killed_at: float | None) -> list[tuple[str, float, float]]:
    """(app, start, end) of each sync in one replica's log (see the module docstring)."""
    open_: dict[str, float] = {}
    out = []
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        app, event = str(r.get("app")), r.get("event")
        at = datetime.datetime.fromisoformat(r["timestamp"]).timestamp()
        if event in ("sync_started", "sync_continued"):
            open_[app] = at
        elif event in ("sync_finished", "sync_waiting") and app in open_:
            out.append((app, open_.pop(app), at))
        elif event == "sync_aborted_lease_expired":
            open_.pop(app, None)  # refused by its shard's fence: wrote nothing more
    if killed_at is not None:
        out += [(app, start, killed_at) for app, start in open_.items()]
    return out


def overlapping(by: dict[str, list[tuple[str, float, float]]]) -> int:
    flat = [(who, *item) for who, items in by.items() for item in items]
    return sum(1 for i, (w, a, s, e) in enumerate(flat) for (w2, a2, s2, e2) in flat[i + 1:]
               if w != w2 and a == a2 and s < e2 and s2 < e)


def run(*, apps: int, shards: int, lease_duration: float) -> dict[str, Any]:
    names = [f"app-{i:03d}" for i in range(apps)]
    with tempfile.TemporaryDirectory() as tmp, LocalControlPlane() as cp:
        root = Path(tmp)
        kube = Kube.connect(str(cp.kubeconfig))
        kube.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": NAMESPACE}}, field_manager="bench")
        git(root, "init", "-q", "--bare", "-b", "main", str(root / "remote.git"))
        git(root, "clone", "-q", str(root / "remote.git"), str(root / "work"))
        repo = (root / "remote.git").as_uri()
        commit(root / "work", names, "v1")
        config = root / "settings.yaml"
        config.write_text(yaml.safe_dump({
            "kubeconfig": str(cp.kubeconfig), "controlNamespace": NAMESPACE,
            "interval": "30m", "jitter": "0", "applications": [application(a, repo)
                                                               for a in names],
            "leaderElection": {"leaseDuration": f"{lease_duration}s",
                               "renewDeadline": f"{lease_duration * 2 / 3}s",
                               "retryPeriod": f"{lease_duration / 7.5}s"},
            "sharding": {"enabled": True, "shards": shards}}))
        replicas = [Replica(f"replica-{x}", config, root) for x in "abc"]
        try:
            return _measure(kube, root, repo, names, replicas, shards, lease_duration)
        finally:
            for r in replicas:
                r.stop()


def _measure(kube: Kube, root: Path, repo: str, names: list[str], replicas: list[Replica],
             shards: int, lease_duration: float) -> dict[str, Any]:
    wait(lambda: set(versions(kube).values()) == {"v1"} and len(versions(kube)) == len(names)
         and len(holders(kube, "gitops-ray")) == shards
         and len(set(holders(kube, "gitops-ray").values())) == 3, 600, "first sync")
    held = holders(kube, "gitops-ray")
    victim = max(replicas, key=lambda r: sum(1 for h in held.values() if h == r.identity))
    its_apps = [a for a in names if held[shard_of(a, shards)] == victim.identity]
    victim.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    killed_wall = time.time()
    victim.proc.wait()
    sha = commit(root / "work", names, "v2")
    pushed = next(r for r in replicas if r is not victim).push(repo, sha)
    wait(lambda: all(versions(kube).get(a) == "v2" for a in its_apps), 300, "takeover")
    seconds = time.monotonic() - killed
    wait(lambda: set(versions(kube).values()) == {"v2"}, 300, "every app at v2")
    by = {r.identity: intervals(r.log, killed_wall if r is victim else None)
          for r in replicas}
    return {"machine": machine_info(), "apps": len(names), "shards": shards, "replicas": 3,
            "lease_duration_s": lease_duration, "killed_shards": sum(
                1 for h in held.values() if h == victim.identity),
            "killed_apps": len(its_apps), "reconciled_again_s": round(seconds, 2),
            "target_s": lease_duration + 5, "met": seconds < lease_duration + 5,
            "forwarded_to": pushed.get("forwardedTo"),
            "syncs": sum(len(v) for v in by.values()), "overlapping_syncs": overlapping(by)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=30)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--lease-duration", type=float, default=15.0)
    args = parser.parse_args()
    result = run(apps=args.apps, shards=args.shards, lease_duration=args.lease_duration)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sharding.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
