"""Real Flux on a local control plane: its source-controller and kustomize-controller.

The peer benchmark (``bench/peer.py``, issue 41) runs Flux beside Argo CD and gitops-ray
on the same RayClusters. Flux's two controllers that a git-to-cluster sync needs are built
from the Go module proxy (``hack/flux-source``, ``hack/flux-kustomize``: wrapper modules
that copy each controller's replace directives, which a dependency's go.mod does not
pass on) into ``~/.cache/gitops-ray/flux/<version>``, the way :mod:`localcluster.build`
builds the other tools: cached by version, built on first use only. They are not part of
``make tools``: only the benchmark runs them.

Both run out of cluster against a :class:`~localcluster.controlplane.LocalControlPlane`
(``KUBECONFIG``), without leader election, their probes and metrics on free local ports.
source-controller keeps its artifacts in a directory of the workdir and serves them over
HTTP on 127.0.0.1 (``--storage-adv-addr``), where kustomize-controller fetches them. The
CRDs come from the same modules' ``config/crd/bases``. No notification-controller runs:
a webhook is what its Receiver does with one, the annotation
``reconcile.fluxcd.io/requestedAt`` on the GitRepository (:func:`request_reconcile`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gitops_ray.kube import Kube
from localcluster.build import REPO_ROOT, _build_one, _module_crds, cache_dir
from localcluster.controlplane import LocalControlPlane, _die_with_parent, free_port, terminate
from localcluster.crds import install_crds

VERSION = "v1.9.6"  # both controllers' (they are released together)
SOURCE_VERSION = KUSTOMIZE_VERSION = VERSION
SOURCE_MODULE = "github.com/fluxcd/source-controller"
KUSTOMIZE_MODULE = "github.com/fluxcd/kustomize-controller"
SOURCE_MODULE_DIR = REPO_ROOT / "hack" / "flux-source"
KUSTOMIZE_MODULE_DIR = REPO_ROOT / "hack" / "flux-kustomize"
NAMESPACE = "flux-system"
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
SOURCE_CRDS = ("buckets", "externalartifacts", "gitrepositories", "helmcharts",
               "helmrepositories", "ocirepositories")


@dataclass(frozen=True)
class FluxTools:
    source_controller: Path
    kustomize_controller: Path


def flux_dir() -> Path:
    return cache_dir() / "flux" / VERSION


def ensure_flux() -> FluxTools:
    """Both controllers, built from the Go module proxy on first use."""
    return FluxTools(
        _build_one(flux_dir() / "source-controller", "flux-source",
                   f"Flux source-controller {SOURCE_VERSION}",
                   ["-ldflags", "-s -w", SOURCE_MODULE], SOURCE_MODULE_DIR),
        _build_one(flux_dir() / "kustomize-controller", "flux-kustomize",
                   f"Flux kustomize-controller {KUSTOMIZE_VERSION}",
                   ["-ldflags", "-s -w", KUSTOMIZE_MODULE], KUSTOMIZE_MODULE_DIR))


def flux_crds() -> list[dict[str, object]]:
    """source-controller's CRDs and the Kustomization CRD, from the pinned modules."""
    source = _module_crds(flux_dir() / "source-crds.json", "flux-source-crds",
                          f"{SOURCE_MODULE}@{SOURCE_VERSION}", SOURCE_MODULE_DIR,
                          [f"config/crd/bases/source.toolkit.fluxcd.io_{name}.yaml"
                           for name in SOURCE_CRDS])
    kustomize = _module_crds(flux_dir() / "kustomize-crds.json", "flux-kustomize-crds",
                             f"{KUSTOMIZE_MODULE}@{KUSTOMIZE_VERSION}", KUSTOMIZE_MODULE_DIR,
                             ["config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"])
    crds: list[dict[str, object]] = [*json.loads(source.read_text()),
                                     *json.loads(kustomize.read_text())]
    return crds


class FluxError(RuntimeError):
    """A Flux controller did not come up; the message carries the tail of its log."""


class Flux:
    """source-controller + kustomize-controller on a control plane; :meth:`stop` ends both."""

    def __init__(self, control_plane: LocalControlPlane, workdir: Path) -> None:
        self.control_plane = control_plane
        self.workdir = workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def install(self, timeout: float = 120.0) -> None:
        """The CRDs and namespace ``flux-system``; builds the controllers if need be."""
        ensure_flux()
        install_crds(self.control_plane.kubeconfig, flux_crds(), timeout=timeout)
        kube = Kube.connect(str(self.control_plane.kubeconfig))
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                   field_manager="gitops-ray-localcluster", force=True)

    def start(self, *, args: tuple[str, ...] = (), timeout: float = 120.0) -> None:
        """Start both controllers (``args`` for kustomize-controller); return once ready."""
        tools = ensure_flux()
        (self.workdir / "storage").mkdir(parents=True, exist_ok=True)  # it must exist
        storage = free_port()
        self._start("source-controller", tools.source_controller, [
            f"--storage-path={self.workdir / 'storage'}", f"--storage-addr=127.0.0.1:{storage}",
            f"--storage-adv-addr=127.0.0.1:{storage}"], timeout)
        self._start("kustomize-controller", tools.kustomize_controller, list(args), timeout)

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            terminate(self.processes.pop(name))
        for log in self._logs:
            log.close()
        self._logs.clear()

    def log(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _start(self, name: str, binary: Path, args: list[str], timeout: float) -> None:
        health = free_port()
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        env = {**os.environ, "KUBECONFIG": str(self.control_plane.kubeconfig),
               "RUNTIME_NAMESPACE": NAMESPACE, "HOME": str(self.workdir)}
        self.processes[name] = subprocess.Popen(
            [str(binary), f"--metrics-addr=127.0.0.1:{free_port()}",
             f"--health-addr=127.0.0.1:{health}", "--events-addr=", "--log-encoding=console",
             *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            cwd=self.workdir, preexec_fn=_die_with_parent)  # noqa: PLW1509
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise FluxError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            if LocalControlPlane.http_ok(f"http://127.0.0.1:{health}/readyz"):
                return
            time.sleep(0.2)
        raise FluxError(f"{name} not ready:\n{self.log(name)}")


def request_reconcile(kube: Kube, kind: str, name: str, namespace: str = NAMESPACE) -> None:
    """What Flux's webhook Receiver does with a delivery: annotate the source to reconcile."""
    api_version = ("source.toolkit.fluxcd.io/v1" if kind == "GitRepository"
                   else "kustomize.toolkit.fluxcd.io/v1")
    kube.patch(api_version, kind, name=name, namespace=namespace,
               patch={"metadata": {"annotations": {REQUESTED_AT: time.strftime(
                   "%Y-%m-%dT%H:%M:%S") + f".{time.time_ns() % 10**9:09d}Z"}}},
               content_type="application/merge-patch+json")
