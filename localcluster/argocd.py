"""Real Argo CD on a local control plane: argocd-server, its CLI and its application controller.

gitops-ray can be the sync engine of in-cluster Argo CD Applications that Argo CD itself
skips (``argocd.argoproj.io/skip-reconcile: "true"``), writing Argo CD's status back so
Argo CD's UI and CLI keep working. Whether they do is only known by running them, so this
runs Argo CD v3.6.1 (:func:`localcluster.build.ensure_argocd`, one binary whose
behaviour ``ARGOCD_BINARY_NAME`` picks) as local processes against a
:class:`~localcluster.controlplane.LocalControlPlane`:

* the CRDs from the argo-cd module, namespace ``argocd`` with the ConfigMaps and Secret
  Argo CD's settings manager reads (its informers select on the label
  ``app.kubernetes.io/part-of=argocd``: without it, "configmap argocd-cm not found") and
  the AppProject ``default`` that Argo CD's own install creates;
* Debian's ``redis-server`` on a free port, in memory only (argocd-server's cache);
* ``argocd-server --insecure --disable-auth`` on a free port; :meth:`ArgoCD.cli` runs the
  real ``argocd`` CLI against it (``--plaintext``, a config dir of its own);
* on request, ``argocd-application-controller`` out of cluster
  (:meth:`ArgoCD.application_controller`), ``argocd-repo-server``
  (:meth:`ArgoCD.start_repo_server`), ``argocd-applicationset-controller``
  (:meth:`ArgoCD.start_applicationset_controller`, progressive syncs on request) and
  ``argocd-notifications`` (:meth:`ArgoCD.start_notifications_controller`, with the
  stock triggers and templates of the same build).

Unless started, no repo-server runs: its address is a free port nobody listens on, so
everything that asks the repo-server (manifests, resolving a branch to a commit) fails, as
it would with the repo-server down. ``ARGOCD_FAKE_IN_CLUSTER=true`` with ``KUBECONFIG``
makes the in-cluster destination (``https://kubernetes.default.svc``) mean the local control plane
(``Cluster.RawRestConfig`` in argo-cd's ``pkg/apis/application/v1alpha1/types.go``).

Processes start in their own process group and die with the Python process that started
them (as the control plane's do); :meth:`ArgoCD.stop` terminates them. Logs are files in
:attr:`ArgoCD.workdir`, one per component (:meth:`ArgoCD.log`).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.build import (
    argocd_crds,
    argocd_notifications_catalog,
    ensure_argocd,
    require_redis,
)
from localcluster.controlplane import LocalControlPlane, _die_with_parent, free_port, terminate
from localcluster.crds import install_crds

FIELD_MANAGER = "gitops-ray-localcluster"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}
SETTINGS_CONFIGMAPS = ("argocd-cm", "argocd-rbac-cm", "argocd-cmd-params-cm")


class ArgoCDError(RuntimeError):
    """An Argo CD component did not come up; the message carries the tail of its log."""


def default_project(namespace: str) -> Manifest:
    """AppProject ``default`` as Argo CD creates it: any source, destination and kind."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
            "metadata": {"name": "default", "namespace": namespace},
            "spec": {"sourceRepos": ["*"],
                     "destinations": [{"server": "*", "namespace": "*"}],
                     "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}


def settings_objects(namespace: str) -> list[Manifest]:
    """Namespace, settings ConfigMaps and ``argocd-secret`` (a fresh ``server.secretkey``)."""
    meta = {"namespace": namespace, "labels": PART_OF}
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        *({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}
          for name in SETTINGS_CONFIGMAPS),
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "argocd-secret", **meta},
         "data": {"server.secretkey": base64.b64encode(key.encode()).decode()}},
    ]


def stock_notifications() -> dict[str, str]:
    """The data of Argo CD's stock ``argocd-notifications-cm``: its triggers and templates."""
    [catalog] = json.loads(argocd_notifications_catalog().read_text())
    return {str(k): str(v) for k, v in catalog["data"].items()}


def notifications_objects(namespace: str, data: Mapping[str, str]) -> list[Manifest]:
    """``argocd-notifications-cm`` holding ``data``, and an empty Secret."""
    meta = {"namespace": namespace, "labels": PART_OF}
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "argocd-notifications-cm", **meta}, "data": dict(data)},
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": "argocd-notifications-secret", **meta}}]


class ArgoCD:
    """argocd-server (+ Redis, + optionally the application controller) on a control plane."""

    def __init__(self, control_plane: LocalControlPlane, *, workdir: Path | None = None,
                 namespace: str = "argocd", redis_password: str = "") -> None:
        self.control_plane = control_plane
        self.namespace = namespace
        self.redis_password = redis_password
        """Non-empty: Redis requires it, every component gets it as ``REDIS_PASSWORD``
        and the Secret ``argocd-redis`` holds it as ``auth``, as in Argo CD's install."""
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gitops-ray-argocd-"))
        self.binary = Path()
        self.port = self.redis_port = self.repo_server_port = 0
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    @property
    def server(self) -> str:
        """argocd-server's address, for ``argocd --server ADDR --plaintext``."""
        return f"127.0.0.1:{self.port}"

    @property
    def redis(self) -> str:
        return f"127.0.0.1:{self.redis_port}"

    @property
    def repo_server(self) -> str:
        """Where Argo CD looks for its repo-server (only :meth:`start_repo_server` listens)."""
        return f"127.0.0.1:{self.repo_server_port}"

    def __enter__(self) -> ArgoCD:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> None:
        """Install CRDs and settings, start Redis and argocd-server, wait until it serves."""
        self.binary = ensure_argocd()
        redis = require_redis()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            install_crds(self.control_plane.kubeconfig, _crds(), timeout=timeout)
            self._bootstrap()
            self._start_redis(redis)
            self._start_server(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate every component (SIGTERM, then SIGKILL); keep the logs of a given workdir."""
        for name in reversed(list(self.processes)):
            self.stop_component(name)
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_component(self, name: str) -> None:
        """Terminate one component (e.g. ``argocd-application-controller``) if it runs."""
        proc = self.processes.pop(name, None)
        if proc is not None:
            terminate(proc)

    def application_controller(self, *, log_level: str = "info", resync: int = 10,
                               args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                               timeout: float = 120.0) -> subprocess.Popen[bytes]:
        """Start ``argocd-application-controller`` out of cluster; return once it is healthy.

        It shares Redis with the server and points at the same absent repo-server, and
        resyncs every ``resync`` seconds (10; Argo CD's default is 180); ``args`` and ``env``
        add flags and environment (a benchmark's tuning). At ``log_level="debug"`` it logs
        each Application it skips
        (``canProcessApp`` in argo-cd's ``controller/appcontroller.go``).
        :meth:`stop_component` (``"argocd-application-controller"``) or :meth:`stop` ends it.
        """
        metrics = free_port()
        proc = self._spawn("argocd-application-controller", [
            *self._kube_flags(), f"--redis={self.redis}",
            f"--repo-server={self.repo_server}", "--repo-server-plaintext",
            f"--metrics-port={metrics}", "--logformat=text", f"--loglevel={log_level}",
            f"--app-resync={resync}", "--app-resync-jitter=0", *args], extra_env=env)
        self._wait("argocd-application-controller",
                   lambda: LocalControlPlane.http_ok(f"http://127.0.0.1:{metrics}/healthz"),
                   time.monotonic() + timeout)
        return proc

    def start_applicationset_controller(self, *, progressive: bool = False,
                                        timeout: float = 120.0) -> subprocess.Popen[bytes]:
        """Start ``argocd-applicationset-controller`` out of cluster; return once healthy.

        It watches ApplicationSets in :attr:`namespace` and creates, updates and deletes
        their Applications (policy ``sync``). Generators that need no repository (``list``,
        ``clusters``) work without a repo-server; SCM providers are off. No leader
        election; its metrics, probe and webhook listen on free local ports; it counts as
        up once its metrics are served (its health probe has no checks: 404).
        ``progressive``: ``--enable-progressive-syncs`` (RollingSync strategies run).
        :meth:`stop_component` (``"argocd-applicationset-controller"``) or :meth:`stop`
        ends it.
        """
        metrics = free_port()  # served once its manager runs (it registers no probes)
        proc = self._spawn("argocd-applicationset-controller", [
            *self._kube_flags(), f"--argocd-repo-server={self.repo_server}",
            "--repo-server-plaintext", f"--metrics-addr=127.0.0.1:{metrics}",
            f"--probe-addr=127.0.0.1:{free_port()}", f"--webhook-addr=127.0.0.1:{free_port()}",
            "--enable-scm-providers=false", "--logformat=text", "--loglevel=debug",
            *(["--enable-progressive-syncs"] if progressive else [])])
        self._wait("argocd-applicationset-controller",
                   lambda: LocalControlPlane.http_ok(f"http://127.0.0.1:{metrics}/metrics"),
                   time.monotonic() + timeout)
        return proc

    def start_notifications_controller(self, data: Mapping[str, str], *,
                                       timeout: float = 120.0) -> subprocess.Popen[bytes]:
        """Start ``argocd-notifications`` out of cluster; return once its metrics serve.

        Its ``argocd-notifications-cm`` holds ``data``: typically Argo CD's stock catalog
        of the same build (:func:`stock_notifications`, every trigger and template) plus
        services (``service.webhook.NAME``); ``argocd-notifications-secret`` is empty. It
        watches Applications in :attr:`namespace`; what it sends is decided by each Application's
        ``notifications.argoproj.io/subscribe.TRIGGER.SERVICE`` annotations.
        :meth:`stop_component` (``"argocd-notifications"``) or :meth:`stop` ends it.
        """
        kube = Kube.connect(str(self.control_plane.kubeconfig))
        for obj in notifications_objects(self.namespace, data):
            kube.apply(obj, field_manager=FIELD_MANAGER, force=True)
        metrics = free_port()
        proc = self._spawn("argocd-notifications", [
            *self._kube_flags(), f"--metrics-port={metrics}",
            f"--argocd-repo-server={self.repo_server}", "--argocd-repo-server-plaintext",
            "--logformat=text", "--loglevel=debug"])
        self._wait("argocd-notifications",
                   lambda: LocalControlPlane.http_ok(f"http://127.0.0.1:{metrics}/metrics"),
                   time.monotonic() + timeout)
        return proc

    def start_repo_server(self, *, timeout: float = 120.0) -> subprocess.Popen[bytes]:
        """Start ``argocd-repo-server`` (plaintext) on :attr:`repo_server`; return once healthy.

        With it, argocd-server resolves a branch to a commit (``argocd app sync NAME``
        without ``--revision``: ``resolveRevision`` in argo-cd's
        ``server/application/application.go``) by asking git itself, ``file://`` repositories
        included. GnuPG is off (``ARGOCD_GPG_ENABLED=false``: no keyring to set up).
        :meth:`stop_component` (``"argocd-repo-server"``) or :meth:`stop` ends it.
        """
        metrics = free_port()
        proc = self._spawn("argocd-repo-server", [
            "--address=127.0.0.1", f"--port={self.repo_server_port}", "--disable-tls",
            "--client-ca-path=",  # v3.6 refuses --disable-tls beside its default CA path
            f"--redis={self.redis}", "--metrics-address=127.0.0.1", f"--metrics-port={metrics}",
            "--logformat=text"], extra_env={"ARGOCD_GPG_ENABLED": "false"})
        self._wait("argocd-repo-server",
                   lambda: LocalControlPlane.http_ok(f"http://127.0.0.1:{metrics}/healthz"),
                   time.monotonic() + timeout)
        return proc

    # -- the CLI ---------------------------------------------------------------------

    def cli(self, *args: str, check: bool = True,
            timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``argocd ARGS --server ADDR --plaintext`` with a config dir of its own.

        ``check`` raises :class:`subprocess.CalledProcessError` on a non-zero exit (its
        ``stderr`` holds Argo CD's message); ``timeout`` is a liveness bound only.
        """
        return subprocess.run(self.cli_argv(*args), env=self.cli_env(), capture_output=True,
                              text=True, check=check, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def cli_process(self, *args: str) -> subprocess.Popen[str]:
        """Start the CLI without waiting (a blocking ``argocd app sync``, say); pipes for output."""
        return subprocess.Popen(self.cli_argv(*args), env=self.cli_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)

    def cli_argv(self, *args: str) -> list[str]:
        return [str(self.binary), *args, "--server", self.server, "--plaintext"]

    def cli_env(self) -> dict[str, str]:
        """The CLI's environment: its binary name and a HOME / config dir under the workdir."""
        home = self.workdir / "cli-home"
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARGOCD_")}
        return {**env, "ARGOCD_BINARY_NAME": "argocd", "HOME": str(home),
                "ARGOCD_CONFIG_DIR": str(home / ".config" / "argocd")}

    def usage(self) -> str:
        """How a human talks to this Argo CD (printed by ``python -m localcluster --argocd``)."""
        env = self.cli_env()
        return "\n".join([
            f"argocd-server: {self.server} (insecure, auth disabled; logs in {self.workdir})",
            f"alias argocd='env ARGOCD_BINARY_NAME=argocd HOME={env['HOME']} "
            f"{self.binary} --server {self.server} --plaintext'",
            "argocd app list   # Applications live in namespace "
            f"{self.namespace}; the web UI is not in the Go module, only the API and CLI"])

    # -- logs ------------------------------------------------------------------------

    def log_paths(self) -> list[Path]:
        """The log file of every component started so far."""
        return sorted(self.workdir.glob("*.log"))

    def log(self, name: str, lines: int = 40) -> str:
        """The last lines of a component's log (``argocd-server``, ``redis``, …)."""
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # -- pieces ----------------------------------------------------------------------

    def _bootstrap(self) -> None:
        kube = Kube.connect(str(self.control_plane.kubeconfig))
        for obj in [*settings_objects(self.namespace), default_project(self.namespace),
                    *self._redis_secret()]:
            kube.apply(obj, field_manager=FIELD_MANAGER, force=True)

    def _redis_secret(self) -> list[Manifest]:
        if not self.redis_password:
            return []
        auth = base64.b64encode(self.redis_password.encode()).decode()
        return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "argocd-redis", "namespace": self.namespace,
                              "labels": PART_OF},
                 "data": {"auth": auth}}]

    def _start_redis(self, redis: str) -> None:
        self.redis_port = free_port()
        self._spawn("redis", [
            redis, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.workdir), "--daemonize", "no",
            *(["--requirepass", self.redis_password] if self.redis_password else [])],
            component="")
        self._wait("redis", lambda: _redis_ping(self.redis_port, self.redis_password),
                   time.monotonic() + 30)

    def _start_server(self, deadline: float) -> None:
        self.port, self.repo_server_port = free_port(), free_port()
        self._spawn("argocd-server", [
            *self._kube_flags(), "--insecure", "--disable-auth", f"--port={self.port}",
            f"--redis={self.redis}", f"--repo-server={self.repo_server}",
            "--repo-server-plaintext", f"--metrics-port={free_port()}", "--logformat=text",
            "--staticassets", str(self.workdir / "no-ui")])
        self._wait("argocd-server", lambda: LocalControlPlane.http_ok(
            f"http://{self.server}/healthz?full=true"), deadline)

    def _kube_flags(self) -> list[str]:
        return [f"--kubeconfig={self.control_plane.kubeconfig}", f"--namespace={self.namespace}"]

    def _spawn(self, name: str, argv: list[str], component: str | None = None,
               extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argocd`` as ``component`` (default ``name``), or ``argv`` itself if ``""``."""
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        component = name if component is None else component
        command = [str(self.binary), *argv] if component else argv
        env = {**os.environ, "KUBECONFIG": str(self.control_plane.kubeconfig),
               "ARGOCD_FAKE_IN_CLUSTER": "true", "HOME": str(self.workdir),
               # the repo-server's git asks `argocd` (as argocd-git-ask-pass) for credentials
               "PATH": os.pathsep.join([str(self.binary.parent), os.environ.get("PATH", "")])}
        if component:
            env["ARGOCD_BINARY_NAME"] = component
        if component and self.redis_password:
            env["REDIS_PASSWORD"] = self.redis_password
        env.update(extra_env or {})
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=self.workdir,
                                preexec_fn=_die_with_parent)  # noqa: PLW1509
        self.processes[name] = proc
        return proc

    def _wait(self, name: str, ready: Callable[[], bool], deadline: float) -> None:
        while time.monotonic() < deadline:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise ArgoCDError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise ArgoCDError(f"{name} not ready:\n{self.log(name)}")


def _crds() -> list[Manifest]:
    crds: list[Manifest] = json.loads(argocd_crds().read_text())
    return crds


def _redis_ping(port: int, password: str = "") -> bool:
    auth = f"AUTH {password}\r\n".encode() if password else b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(auth + b"PING\r\n")
            got = b""
            while b"\r\n" not in got or (auth and got.count(b"\r\n") < 2):
                chunk = sock.recv(32)
                if not chunk:
                    break
                got += chunk
            return got.endswith(b"+PONG\r\n")
    except OSError:
        return False
