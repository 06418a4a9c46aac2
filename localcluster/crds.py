"""The upstream KubeRay CRDs (RayCluster, RayJob, RayService; RayCronJob) for each cluster.

They are the generated CRDs of the KubeRay operator version the Ray stack runs
(:data:`localcluster.build.KUBERAY_VERSION`), taken from its Go module, so the API server
prunes, defaults and validates Ray objects exactly as a cluster with that KubeRay release
does (typed pod templates, ``workerGroupSpecs`` defaults, CEL rules such as the immutable
``managedBy``). A hand-made reconstruction drifted from upstream in ways tests could not see.
At ~1 MB each they are server-side applied (client-side apply's last-applied annotation
would exceed the size limit).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.build import kuberay_crds

FIELD_MANAGER = "gitops-ray-localcluster"


def ray_crds(*, cron: bool = False) -> list[Manifest]:
    """The upstream CRDs, in :data:`~localcluster.build.RAY_CRDS` order.

    RayCronJob's only with ``cron`` (:func:`localcluster.raystack.enable_raycronjobs`):
    its controller is alpha, and every other control plane keeps the three CRDs.
    """
    crds: list[Manifest] = json.loads(kuberay_crds().read_text())
    return [c for c in crds if cron or c["spec"]["names"]["kind"] != "RayCronJob"]


def install_ray_crds(kubeconfig: Path, *, cron: bool = False, timeout: float = 60.0) -> None:
    """Server-side apply the Ray CRDs and wait until they are Established."""
    install_crds(kubeconfig, ray_crds(cron=cron), timeout=timeout)


def install_crds(kubeconfig: Path, crds: list[Manifest], *, timeout: float = 60.0) -> None:
    """Server-side apply ``crds`` and wait until each is Established."""
    kube = Kube.connect(str(kubeconfig))
    for crd in crds:
        kube.apply(crd, field_manager=FIELD_MANAGER, force=True)
    deadline = time.monotonic() + timeout
    for crd in crds:
        name = str(crd["metadata"]["name"])
        while not _established(kube, name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {timeout}s")
            time.sleep(0.1)


def _established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name=name) or {}
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])
