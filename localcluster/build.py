"""Build the real Kubernetes tools that tests and the demo run: no fakes, no downloads.

kube-apiserver, kube-controller-manager and etcd are compiled from the Go module proxy by
the small module in ``hack/controlplane`` (see its go.mod for why every staging module is
replaced); helm v3 is ``go install``-ed. The opt-in Ray stack adds kube-scheduler (same
module), kwok (``hack/kwok``) and the KubeRay operator (``hack/kuberay``), so Pods get
scheduled onto fake nodes and reported Running, and a real operator acts on RayClusters.
Kueue's controller manager (``hack/kueue``) joins that stack on request
(:mod:`localcluster.kueue`). Argo CD's one binary (``hack/argocd``) is what the Argo CD
tests run as argocd-server,
its CLI and its application controller (:mod:`localcluster.argocd`).
Results go to a cache outside the checkout, ``~/.cache/gitops-ray`` (override:
``GITOPS_RAY_CACHE``), keyed by version, and are reused. A build runs in a temporary
directory and is renamed into place, so an interrupted build never leaves a half-written
binary that looks finished; each tool has its own lock, so different tools build in
side by side (:func:`build_all`, in lanes that let builds sharing packages reuse Go's build
cache) while two processes never build the same one twice.

The KubeRay CRDs every control plane installs come from the same pinned operator module:
``go mod download`` fetches its source (no build), which carries the generated CRDs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from gitops_ray.errors import ConfigError

_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

K8S_VERSION = "v1.36.3"
HELM_VERSION = "v3.19.0"
KWOK_VERSION = "v0.7.0"
KUBERAY_VERSION = "v1.6.2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
KUEUE_VERSION = "v0.17.0"
KUEUE_MODULE = "sigs.k8s.io/kueue"
ARGOCD_VERSION = "v3.6.1"
ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
SCHEDULER = "kube-scheduler"  # the Ray stack's; same module as BINARIES
REPO_ROOT = Path(__file__).resolve().parents[1]
MODULE_DIR = REPO_ROOT / "hack" / "controlplane"
KWOK_MODULE_DIR = REPO_ROOT / "hack" / "kwok"
KUBERAY_MODULE_DIR = REPO_ROOT / "hack" / "kuberay"
ARGOCD_MODULE_DIR = REPO_ROOT / "hack" / "argocd"
KUEUE_MODULE_DIR = REPO_ROOT / "hack" / "kueue"


@dataclass(frozen=True)
class RayStackTools:
    """Binaries of the opt-in Ray stack (see :mod:`localcluster.raystack`)."""

    scheduler: Path
    kwok: Path
    operator: Path


def cache_dir() -> Path:
    return Path(os.environ.get("GITOPS_RAY_CACHE", Path.home() / ".cache" / "gitops-ray"))


def controlplane_dir() -> Path:
    return cache_dir() / "controlplane" / K8S_VERSION


def helm_path() -> Path:
    return cache_dir() / "helm" / f"{HELM_VERSION}-kube{K8S_VERSION}" / "helm"


@contextmanager
def locked(name: str) -> Iterator[None]:
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


def _go_env() -> dict[str, str]:
    """The environment of a build: modules as go.mod says, and its ``toolchain`` line.

    ``GOTOOLCHAIN=auto``: a module whose go.mod asks for a newer Go than the one installed
    (``hack/argocd``: Argo CD v3.6 needs Go 1.27) gets that toolchain, which the go
    command fetches from the Go module proxy as the module ``golang.org/toolchain`` (kept
    in the module cache, so once per machine).
    """
    return {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "auto"}


def _version_ldflags() -> str:
    major, minor = K8S_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={K8S_VERSION}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean"]
    return " ".join(flags)


def ensure_controlplane() -> Path:
    """Return the directory holding etcd, kube-apiserver and kube-controller-manager."""
    return _controlplane(BINARIES)


def _controlplane(binaries: tuple[str, ...]) -> Path:
    """Build whichever of ``binaries`` (``cmd/`` names of hack/controlplane) are missing.

    One ``go build`` for all of them, under one lock: they share most of their packages,
    and two builds of one module side by side compile those packages twice.
    """
    target = controlplane_dir()
    if all((target / b).exists() for b in binaries):
        return target
    with locked("controlplane"):
        missing = [b for b in binaries if not (target / b).exists()]
        if not missing:
            return target
        _log(f"building {', '.join(missing)} {K8S_VERSION} from Go modules (first run only)")
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            subprocess.run(
                [_go(), "build", "-trimpath", "-ldflags", _version_ldflags(), "-o", tmp + "/",
                 *(f"./cmd/{b}" for b in missing)],
                cwd=MODULE_DIR, check=True, env={**os.environ, "GOFLAGS": "-mod=mod"})
            for binary in missing:  # one by one, each renamed into place whole
                os.rename(Path(tmp) / binary, target / binary)
    return target


def _build_one(target: Path, lock: str, what: str, argv: list[str], cwd: Path) -> Path:
    """Build one binary (``go build -o <tmp>/<name> …``) into ``target`` unless it is there."""
    if target.exists():
        return target
    with locked(lock):
        if target.exists():
            return target
        _log(f"building {what} from Go modules (first run only)")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            built = Path(tmp) / target.name
            subprocess.run([_go(), "build", "-trimpath", *argv[:-1], "-o", str(built), argv[-1]],
                           cwd=cwd, check=True, env=_go_env())
            os.rename(built, target)
    return target


def ensure_scheduler() -> Path:
    """kube-scheduler from ``hack/controlplane``, next to the other control-plane binaries."""
    return _controlplane((SCHEDULER,)) / SCHEDULER


def ensure_kwok() -> Path:
    """The kwok binary from ``hack/kwok``: keeps fake Nodes Ready and runs their Pods (on paper)."""
    return _build_one(cache_dir() / "kwok" / KWOK_VERSION / "kwok", "kwok",
                      f"kwok {KWOK_VERSION}",
                      ["-ldflags", "-s -w", "sigs.k8s.io/kwok/cmd/kwok"], KWOK_MODULE_DIR)


def ensure_kuberay_operator() -> Path:
    """The KubeRay operator from ``hack/kuberay``."""
    return _build_one(cache_dir() / "kuberay" / KUBERAY_VERSION / "kuberay-operator",
                      "kuberay", f"the KubeRay operator {KUBERAY_VERSION}",
                      ["-ldflags", "-s -w", KUBERAY_MODULE], KUBERAY_MODULE_DIR)


def ensure_kueue() -> Path:
    """Kueue's controller manager (``cmd/kueue``) from ``hack/kueue``."""
    return _build_one(cache_dir() / "kueue" / KUEUE_VERSION / "kueue", "kueue",
                      f"Kueue {KUEUE_VERSION}",
                      ["-ldflags", "-s -w", f"{KUEUE_MODULE}/cmd/kueue"], KUEUE_MODULE_DIR)


def ensure_argocd() -> Path:
    """Argo CD's one binary from ``hack/argocd``; ``ARGOCD_BINARY_NAME`` picks the component.

    One ``go build`` of the multi-call ``cmd`` (the components the tests run share all
    but ~30 of its ~2,060 packages), stripped, ``-trimpath``; cgo stays on (linking the
    200 MB binary takes ~30 s of CPU). Its version is stamped as Argo CD's Makefile does
    (``-X .../common.version``), so argocd-server's ``/api/version`` says
    ``v3.6.1+unknown`` (a release: ``v3.6.1``), not ``v99.99.99+unknown``: gitops-ray
    picks the Redis format it writes by that version. Next to it, on the components'
    PATH, the shell scripts Argo CD's image installs in ``/usr/local/bin``
    (:data:`ARGOCD_SCRIPTS`).
    """
    stamp = f"-X {ARGOCD_MODULE}/common.version={ARGOCD_VERSION.lstrip('v')}"
    binary = _build_one(cache_dir() / "argocd" / ARGOCD_VERSION / "stamped" / "argocd",
                        "argocd", f"Argo CD {ARGOCD_VERSION}",
                        ["-ldflags", f"-s -w {stamp}", f"{ARGOCD_MODULE}/cmd"],
                        ARGOCD_MODULE_DIR)
    _argocd_scripts(binary.parent)
    return binary


ARGOCD_SCRIPTS = ("git-verify-wrapper.sh", "gpg-wrapper.sh")
"""``hack/`` scripts of argo-cd that its Dockerfile copies to ``/usr/local/bin``: v3.6's
repo-server runs ``git-verify-wrapper.sh`` on every manifest generation, GnuPG on or off
(``runRepoOperation`` in ``reposerver/repository/repository.go``; without it: "permission
denied")."""


def _argocd_scripts(target: Path) -> None:
    """Copy :data:`ARGOCD_SCRIPTS` from the pinned module's source into ``target``, 0755."""
    if all((target / name).exists() for name in ARGOCD_SCRIPTS):
        return
    with locked("argocd-scripts"):
        root = _module_dir(f"{ARGOCD_MODULE}@{ARGOCD_VERSION}", ARGOCD_MODULE_DIR)
        for name in ARGOCD_SCRIPTS:
            with tempfile.NamedTemporaryFile("wb", dir=target, delete=False) as tmp:
                tmp.write((root / "hack" / name).read_bytes())
            os.chmod(tmp.name, 0o755)  # the module cache's copy is read-only, not executable
            os.rename(tmp.name, target / name)


def ensure_ray_stack() -> RayStackTools:
    """Build (in parallel) whatever of the Ray stack is missing."""
    with ThreadPoolExecutor(3) as pool:
        scheduler, kwok, operator = (pool.submit(f) for f in (
            ensure_scheduler, ensure_kwok, ensure_kuberay_operator))
        return RayStackTools(scheduler.result(), kwok.result(), operator.result())


RAY_CRDS = ("rayclusters", "rayjobs", "rayservices", "raycronjobs")


def kuberay_crds() -> Path:
    """A JSON list of the pinned operator's RayCluster, RayJob, RayService and RayCronJob CRDs.

    They come from ``config/crd/bases`` of the module source (``go mod download``, no
    build). Converted once from YAML (~1 MB each, seconds to parse) to JSON in the cache.
    """
    return _module_crds(cache_dir() / "kuberay" / KUBERAY_VERSION / "crds.json", "kuberay-crds",
                        f"{KUBERAY_MODULE}@{KUBERAY_VERSION}", KUBERAY_MODULE_DIR,
                        [f"config/crd/bases/ray.io_{plural}.yaml" for plural in RAY_CRDS])


KUEUE_CRDS = ("admissionchecks", "clusterqueues", "cohorts", "localqueues",
              "multikueueclusters", "multikueueconfigs", "provisioningrequestconfigs",
              "resourceflavors", "topologies", "workloadpriorityclasses", "workloads")


def kueue_manifests() -> Path:
    """A JSON list of Kueue's CRDs and its webhook configurations (written for a Service).

    From ``config/components`` of the pinned kueue module source, as :func:`kuberay_crds`.
    """
    return _module_crds(cache_dir() / "kueue" / KUEUE_VERSION / "manifests.json",
                        "kueue-manifests", f"{KUEUE_MODULE}@{KUEUE_VERSION}", KUEUE_MODULE_DIR,
                        [*(f"config/components/crd/bases/kueue.x-k8s.io_{plural}.yaml"
                           for plural in KUEUE_CRDS),
                         "config/components/webhook/manifests.yaml"])


ARGOCD_CRDS = ("application", "appproject", "applicationset")


def argocd_crds() -> Path:
    """A JSON list of Argo CD's Application, AppProject and ApplicationSet CRDs.

    From ``manifests/crds`` of the pinned argo-cd module source, the same way as
    :func:`kuberay_crds`.
    """
    return _module_crds(cache_dir() / "argocd" / ARGOCD_VERSION / "crds.json", "argocd-crds",
                        f"{ARGOCD_MODULE}@{ARGOCD_VERSION}", ARGOCD_MODULE_DIR,
                        [f"manifests/crds/{name}-crd.yaml" for name in ARGOCD_CRDS])


def argocd_notifications_catalog() -> Path:
    """A JSON list holding Argo CD's stock notifications ``argocd-notifications-cm``.

    ``notifications_catalog/install.yaml`` of the pinned argo-cd module source: the
    triggers (``trigger.on-sync-succeeded``, ...) and templates Argo CD ships.
    """
    return _module_crds(cache_dir() / "argocd" / ARGOCD_VERSION / "notifications.json",
                        "argocd-notifications", f"{ARGOCD_MODULE}@{ARGOCD_VERSION}",
                        ARGOCD_MODULE_DIR, ["notifications_catalog/install.yaml"])


def _module_crds(target: Path, lock: str, module: str, cwd: Path, files: list[str]) -> Path:
    """Convert ``files`` of a downloaded module's source to one JSON list at ``target``."""
    if target.exists():
        return target
    with locked(lock):
        if target.exists():
            return target
        root = _module_dir(module, cwd)
        crds = [doc for rel in files
                for doc in yaml.load_all((root / rel).read_text(), Loader=_YamlLoader) if doc]
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False) as tmp:
            json.dump(crds, tmp)
        os.chmod(tmp.name, 0o644)
        os.rename(tmp.name, target)
    return target


def _module_dir(module: str, cwd: Path) -> Path:
    """The source directory of ``module`` (``path@version``) in Go's module cache."""
    out = subprocess.run([_go(), "mod", "download", "-json", module], cwd=cwd, check=True,
                         capture_output=True, text=True, env=_go_env()).stdout
    return Path(json.loads(out)["Dir"])


def build_all() -> list[str]:
    """Everything ``make test`` needs, in three lanes side by side.

    A cold build is CPU-bound (two cores in CI), so what counts is the compile work, not
    how many builds overlap: the lanes share little Go's build cache could reuse (each
    pins its own k8s.io; Argo CD v3.6 is compiled by its own Go 1.27 toolchain, standard
    library included), and three keep both cores busy while one lane downloads modules
    or links. Argo CD, the biggest single build (~2,300 packages, 122 MB of Go source),
    starts first in a lane of its own; the control plane's four commands (one
    invocation) then helm, and the Ray stack ending with Kueue, are the other two lanes,
    of about the same size (DEVELOPMENT.md, "Build times", has the figures).
    """
    lanes: list[list[Callable[[], object]]] = [
        [ensure_argocd, argocd_crds],
        [_controlplane_and_scheduler, ensure_helm],
        [kuberay_crds, ensure_kuberay_operator, ensure_kwok, kueue_manifests, ensure_kueue]]
    with ThreadPoolExecutor(len(lanes)) as pool:
        futures = [pool.submit(_run_lane, lane) for lane in lanes]
        built = [path for f in futures for path in f.result()]
    return [*built, require_kubectl(), require_redis()]


def _controlplane_and_scheduler() -> Path:
    return _controlplane((*BINARIES, SCHEDULER))


def _run_lane(jobs: list[Callable[[], object]]) -> list[str]:
    return [str(job()) for job in jobs]


def ensure_helm() -> Path:
    """Return the path of a helm v3 binary built from the Go module proxy."""
    target = helm_path()
    if target.exists():
        return target
    with locked("helm"):
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


def require_redis() -> str:
    """Path of ``redis-server`` (argocd-server's cache); a clear error when it is missing."""
    redis = shutil.which("redis-server")
    if not redis:
        raise ConfigError("redis-server is required for the Argo CD tests (argocd-server's "
                          "cache); `make tools` installs Debian's redis-server package, or "
                          "run `apt-get install -y redis-server`")
    return redis


def _log(message: str) -> None:
    sys.stderr.write(f"gitops-ray: {message}\n")  # one write: lanes log from threads
    sys.stderr.flush()
