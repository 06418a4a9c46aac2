"""Kueue's Workloads in a namespace: what a queued Ray object's health is explained by.

Kueue (``kueue.x-k8s.io/v1beta2``) makes one Workload per queued job, owned by it, and
writes there why it is not admitted yet. Health is pure (:mod:`gitops_ray.health.queued`),
so its callers read the Workloads here and pass them in, only for objects that wait for
admission. A cluster without Kueue, or a client not allowed to list Workloads, reads none:
the health then says the Workload is not known, nothing fails.
"""

from __future__ import annotations

from gitops_ray.kube.client import Kube
from gitops_ray.kube.errors import KubeError
from gitops_ray.types import Manifest

WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
MAX_WORKLOADS = 2000
"""Workloads read per namespace at most (the first pages); an owner beyond is not found."""


def workloads_in(kube: Kube, namespace: str) -> list[Manifest]:
    """The Workloads of ``namespace`` (none when Kueue is absent or they cannot be read)."""
    out: list[Manifest] = []
    try:
        for page, _ in kube.list_pages(WORKLOAD_API, "Workload", namespace or None):
            out.extend(page)
            if len(out) >= MAX_WORKLOADS:
                break
    except KubeError:  # UnknownKind (no Kueue) included
        return []
    return out[:MAX_WORKLOADS]
