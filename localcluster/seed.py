"""A control plane's etcd data, made once with the Ray CRDs already Established.

Installing the upstream KubeRay CRDs is most of what a control plane costs to start: on 2
cores the API server spends about 4 CPU-seconds to reach ``/readyz`` and 11 more to take
in the three CRDs (their structural schemas, CEL rules and OpenAPI, rebuilt after each
one), 14 s of wall clock in all. Started on etcd data that already holds them, the same
API server loads them in one go: about 10-11 CPU-seconds and 9-10 s. The suite starts some
twenty control planes, so each starts from a copy of one seed instead.

The seed is a real control plane's etcd directory, copied after etcd stopped cleanly,
kept in the build cache under a key of everything that goes into it (the Kubernetes
binaries, the CRD bytes, :data:`SEED_FORMAT`). A plane started from it still applies
the CRDs (:func:`localcluster.crds.install_ray_crds`, a no-op when they are the same)
and waits until each is Established, so a stale seed is corrected, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

from localcluster.build import cache_dir, controlplane_dir, kuberay_crds, locked

# Bump when what a plane stores at start changes (flags that reach etcd, the CRD set).
SEED_FORMAT = "1"
# etcd's processes stopped in this order: no writer is left when etcd flushes its data.
_STOP_ORDER = ("kube-controller-manager", "kube-apiserver", "etcd")


def seed_key() -> str:
    """What the seed is made of: the binaries' build, the CRDs' bytes, the format."""
    digest = hashlib.sha256(SEED_FORMAT.encode())
    digest.update(str(controlplane_dir()).encode())
    for name in ("etcd", "kube-apiserver"):
        digest.update(str((controlplane_dir() / name).stat().st_mtime_ns).encode())
    digest.update(kuberay_crds().read_bytes())
    return digest.hexdigest()[:16]


def copy_seed(etcd_dir: Path) -> None:
    """Put a copy of the seed (made first if missing) where etcd will keep its data."""
    shutil.copytree(ensure_seed(), etcd_dir)


def ensure_seed() -> Path:
    """The seed's directory; the first caller (of any process) makes it, the rest wait."""
    target = cache_dir() / "etcd-seed" / seed_key()
    if target.exists():
        return target
    with locked("etcd-seed"):
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            _make_seed(target)
            for old in target.parent.iterdir():  # seeds of other builds: ~70 MB each
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
    return target


def _make_seed(target: Path) -> None:
    """Start an unseeded plane, stop it cleanly, and rename its etcd data into place."""
    from localcluster.controlplane import LocalControlPlane

    cp = LocalControlPlane(seeded=False)
    try:
        cp.start()
        for name in _STOP_ORDER:
            proc = cp.processes.pop(name)
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            shutil.copytree(cp.workdir / "etcd", Path(tmp) / "etcd")
            os.rename(Path(tmp) / "etcd", target)  # whole, or not at all
    finally:
        cp.stop()
