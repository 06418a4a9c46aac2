"""Start and stop a real local Kubernetes control plane: etcd, kube-apiserver, controllers.

This is what every integration test and the demo run against. It is a real API server
(server-side apply, managedFields, CRD structural pruning and defaulting, the status
subresource, resourceVersion conflicts, watches), plus the namespace and garbage-collector
controllers so deletions with propagation policies behave as on a real cluster. There is
no scheduler and no kubelet: Pods stay Pending, which the reconciler never needs, unless
``kuberay=True`` adds the Ray stack (:mod:`localcluster.raystack`: kube-scheduler, kwok
fake nodes, the KubeRay operator), and ``kueue=True`` Kueue on top of it
(:mod:`localcluster.kueue`). Every control plane has the upstream KubeRay CRDs.

Processes are started in their own process group with ``PR_SET_PDEATHSIG`` so that they
die with the Python process that started them, even when it is killed; :meth:`stop`
terminates them (then kills them) and removes the data directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

import yaml

from localcluster.build import ensure_controlplane
from localcluster.pki import write_pki

CONTROLLERS = "namespace-controller,garbage-collector-controller"
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                "omitStages": ["RequestReceived"], "rules": [{"level": "Metadata"}]}
"""With ``audit=True``: one line per request (who, user agent, verb, resource), no bodies."""
RAY_STACK_CONTROLLERS = "deployment-controller,replicaset-controller"
"""With the Ray stack (a scheduler and kwok nodes), Deployments roll out too: the Helm
chart's controller Deployment does in tests/e2e/test_docs_install.py."""
STOP_GRACE = 3.0  # seconds each process has to exit on SIGTERM in stop() before SIGKILL
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message carries the tail of its logs."""


LISTEN_PORTS = range(20000, 32000)
"""Where :func:`free_port` looks: below Linux's ephemeral range (32768-60999 by default),
so no outgoing connection can take a port between choosing it and the server binding it
(with ``bind(0)`` one did, on a busy machine)."""


def free_port() -> int:
    """A port nothing listens on now, outside the kernel's ephemeral range if possible."""
    low = _ephemeral_low()
    candidates = [p for p in random.sample(LISTEN_PORTS, 64) if p < low]
    for port in candidates:
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    with socket.socket() as s:  # an unusual range: let the kernel choose
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default if unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _die_with_parent() -> None:  # runs in the child between fork and exec
    os.setsid()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop a component's process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class LocalControlPlane:
    """A running etcd + kube-apiserver + kube-controller-manager on loopback."""

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gitops-ray-cp-")))
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    port: int = 0
    kuberay: bool = False
    kueue: bool = False  # with kuberay: Kueue's controller manager too (localcluster.kueue)
    audit: bool = False  # the API server logs every request to audit_log (benchmarks)
    seeded: bool = True  # etcd starts from a copy of localcluster.seed's data (CRDs in)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        """Where the API server logs each request when started with ``audit=True``."""
        return self.workdir / "audit.log"

    @property
    def _controllers(self) -> str:
        return f"{CONTROLLERS},{RAY_STACK_CONTROLLERS}" if self.kuberay else CONTROLLERS

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values()]

    def __enter__(self) -> LocalControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> None:
        """Start everything, wait for ``/readyz``, install the Ray CRDs (and the Ray stack)."""
        from localcluster.crds import install_ray_crds

        bin_dir = ensure_controlplane()
        try:
            write_pki(self.workdir)
            (self.workdir / "tokens.csv").write_text(
                f'{self.token},admin,admin-uid,"system:masters"\n')
            if self.seeded:
                from localcluster.seed import copy_seed

                copy_seed(self.workdir / "etcd")
            etcd_url = self._start_etcd(bin_dir)
            self.port = free_port()
            self._write_kubeconfig()
            self._start_apiserver(bin_dir, etcd_url)
            self._wait_ready(timeout)
            self.spawn("kube-controller-manager", [
                str(bin_dir / "kube-controller-manager"), f"--kubeconfig={self.kubeconfig}",
                f"--controllers={self._controllers}", "--leader-elect=false", "--secure-port=0",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                "--concurrent-gc-syncs=5", "--v=0"])
            install_ray_crds(self.kubeconfig, timeout=timeout)
            if self.kuberay:
                from localcluster.raystack import start_ray_stack

                start_ray_stack(self, timeout=timeout)
            if self.kuberay and self.kueue:
                from localcluster.kueue import start_kueue

                start_kueue(self, timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate every process (SIGTERM, then SIGKILL) and remove the work directory.

        One at a time, the last started first, each gone (or killed after ``STOP_GRACE``)
        before the next is asked. Told all at once, the API server's drain waited on an
        etcd that was going away and every stop took 10 s and a SIGKILL; an API server
        that a client still holds connections to drains for longer than that too. Its
        data is deleted next, so nothing is lost by not waiting (localcluster.seed stops
        its own plane in order before it copies etcd's data).
        """
        for proc in reversed(list(self.processes.values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    @contextlib.contextmanager
    def job_controller(self) -> Iterator[subprocess.Popen[bytes]]:
        """kube-controller-manager's Job controller, for as long as the block runs.

        Not among :data:`CONTROLLERS`: on the Ray stack (kube-scheduler and kwok) a Job's
        Pods are scheduled onto fake nodes and kwok's ``pod-complete`` stage (its default
        for Pods a Job owns) makes them succeed, which would change what KubeRay's RayJob
        submitter Jobs do in every other test. Without a scheduler its Pods stay Pending.
        """
        proc = self.spawn("job-controller", [
            str(ensure_controlplane() / "kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}", "--controllers=job-controller",
            "--leader-elect=false", "--secure-port=0", "--v=0"])
        try:
            yield proc
        finally:
            self.processes.pop("job-controller", None)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()

    # -- pieces ----------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a component that dies with us and is stopped by :meth:`stop`."""
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                preexec_fn=_die_with_parent)  # noqa: PLW1509
        self.processes[name] = proc
        return proc

    def wait_for(self, name: str, ready: Callable[[], bool], deadline: float,
                 what: str) -> None:
        """Poll ``ready`` until ``deadline`` (monotonic) while component ``name`` lives."""
        self._poll(ready, name, max(0.0, deadline - time.monotonic()), what)

    @staticmethod
    def free_port() -> int:
        return free_port()

    @staticmethod
    def http_ok(url: str) -> bool:
        return _http_ok(url, None)

    def _start_etcd(self, bin_dir: Path) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        self.spawn("etcd", [
            str(bin_dir / "etcd"), "--name=local", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=local=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level=error", "--quota-backend-bytes=8589934592"])
        self._poll(lambda: _http_ok(f"{url}/health", None), "etcd", 30)
        return url

    def _start_apiserver(self, bin_dir: Path, etcd_url: str) -> None:
        d = self.workdir
        self.spawn("kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}", f"--cert-dir={d}",
            f"--tls-cert-file={d / 'serving.crt'}", f"--tls-private-key-file={d / 'serving.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            "--service-cluster-ip-range=10.0.0.0/24", f"--service-account-issuer={self.url}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--authorization-mode=RBAC", f"--token-auth-file={d / 'tokens.csv'}",
            "--allow-privileged=true", "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false",
            "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
            "--watch-cache=true", "--v=0", *self._audit_flags()])

    def _audit_flags(self) -> list[str]:
        """Counting requests by client needs the API server's own record of each one."""
        if not self.audit:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json", "--audit-log-maxsize=0"]

    def _wait_ready(self, timeout: float) -> None:
        ctx = ssl.create_default_context(cafile=str(self.workdir / "ca.crt"))
        self._poll(lambda: _http_ok(f"{self.url}/readyz", self.token, ctx),
                   "kube-apiserver", timeout)

    def _poll(self, ready: object, name: str, timeout: float, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            if callable(ready) and ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what or name} not ready after {timeout:.0f}s:\n"
                                f"{self.log(name)}")

    def log(self, name: str, lines: int = 30) -> str:
        """The last lines of a component's log."""
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "local",
            "clusters": [{"name": "local", "cluster": {
                "server": self.url, "certificate-authority": str(self.workdir / "ca.crt")}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)


def _http_ok(url: str, token: str | None, ctx: ssl.SSLContext | None = None) -> bool:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    """``python -m localcluster [--kuberay [--kueue]] [--argocd]``: run one until Ctrl-C."""
    args = set(argv or [])
    if not args <= {"--kuberay", "--kueue", "--argocd"} or len(args) != len(argv or []) \
            or ("--kueue" in args and "--kuberay" not in args):
        raise SystemExit("usage: python -m localcluster "
                         "[build | --kuberay [--kueue] | --argocd]")
    with LocalControlPlane(kuberay="--kuberay" in args, kueue="--kueue" in args) as cp, \
            contextlib.ExitStack() as stack:
        print(json.dumps({"kubeconfig": str(cp.kubeconfig), "server": cp.url}), flush=True)
        print(f"export KUBECONFIG={cp.kubeconfig}   # Ctrl-C stops the control plane",
              flush=True)
        if "--argocd" in args:
            from localcluster.argocd import ArgoCD

            argocd = stack.enter_context(ArgoCD(cp))
            print(argocd.usage(), flush=True)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                signal.pause()
