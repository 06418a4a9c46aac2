"""Build the real Kubernetes tools that tests and the demo run: no fakes, no downloads.

kube-apiserver, kube-controller-manager and etcd are compiled from the Go module proxy by
the small module in ``hack/controlplane`` (see its go.mod for why every staging module is
replaced); helm v3 is ``go install``-ed. Results go to a cache outside the checkout,
``~/.cache/gitops-ray`` (override: ``GITOPS_RAY_CACHE``), keyed by version, and are reused.
A build runs in a temporary directory and is renamed into place, so an interrupted build
never leaves a half-written binary that looks finished.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitops_ray.errors import ConfigError

K8S_VERSION = "v1.36.3"
HELM_VERSION = "v3.19.0"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
REPO_ROOT = Path(__file__).resolve().parents[1]
MODULE_DIR = REPO_ROOT / "hack" / "controlplane"


def cache_dir() -> Path:
    return Path(os.environ.get("GITOPS_RAY_CACHE", Path.home() / ".cache" / "gitops-ray"))


def controlplane_dir() -> Path:
    return cache_dir() / "controlplane" / K8S_VERSION


def helm_path() -> Path:
    return cache_dir() / "helm" / f"{HELM_VERSION}-kube{K8S_VERSION}" / "helm"


@contextmanager
def _locked(name: str) -> Iterator[None]:
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise ConfigError("Go is required to build the test control plane; install Go >= 1.26")
    return go


def _version_ldflags() -> str:
    major, minor = K8S_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={K8S_VERSION}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean"]
    return " ".join(flags)


def ensure_controlplane() -> Path:
    """Return the directory holding etcd, kube-apiserver and kube-controller-manager."""
    target = controlplane_dir()
    if all((target / b).exists() for b in BINARIES):
        return target
    with _locked("controlplane"):
        if all((target / b).exists() for b in BINARIES):
            return target
        _log(f"building kube-apiserver {K8S_VERSION} and etcd from Go modules (first run only)")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            subprocess.run(
                [_go(), "build", "-trimpath", "-ldflags", _version_ldflags(), "-o", tmp + "/",
                 *(f"./cmd/{b}" for b in BINARIES)],
                cwd=MODULE_DIR, check=True, env={**os.environ, "GOFLAGS": "-mod=mod"})
            shutil.rmtree(target, ignore_errors=True)
            os.rename(tmp, target)
            os.chmod(target, 0o755)
    return target


def ensure_helm() -> Path:
    """Return the path of a helm v3 binary built from the Go module proxy."""
    target = helm_path()
    if target.exists():
        return target
    with _locked("helm"):
        if target.exists():
            return target
        _log(f"building helm {HELM_VERSION} from Go modules (first run only)")
        target.parent.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent.parent) as tmp:
            major, minor = K8S_VERSION.lstrip("v").split(".")[:2]
            chartutil = "helm.sh/helm/v3/pkg/chartutil"
            ldflags = (f"-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION} "
                       f"-X {chartutil}.k8sVersionMajor={major} "
                       f"-X {chartutil}.k8sVersionMinor={minor}")
            subprocess.run(
                [_go(), "install", "-trimpath", "-ldflags", ldflags,
                 f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
                check=True, env={**os.environ, "GOBIN": tmp, "GOFLAGS": ""})
            shutil.rmtree(target.parent, ignore_errors=True)
            os.rename(tmp, target.parent)
            os.chmod(target.parent, 0o755)
    return target


def require_kubectl() -> str:
    """Path of kubectl (for ``kubectl kustomize``); a clear error when it is missing."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise ConfigError("kubectl is required for Kustomize apps (`kubectl kustomize`); "
                          "install kubectl >= 1.27 and put it on PATH")
    return kubectl


def _log(message: str) -> None:
    print(f"gitops-ray: {message}", file=sys.stderr, flush=True)
