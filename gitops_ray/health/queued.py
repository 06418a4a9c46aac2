"""Health of a Ray object waiting in a Kueue queue: Suspended, saying for what.

Kueue (``sigs.k8s.io/kueue`` v0.17.0) keeps a RayCluster or RayJob labelled
``kueue.x-k8s.io/queue-name`` suspended (``spec.suspend: true``) until its Workload is
admitted, then unsuspends it. While it waits, KubeRay reports a suspended cluster and
nothing says why; the why is on the Workload Kueue made for it (owned by it, a
controller ``ownerReference``): its ``QuotaReserved`` condition's message, such as
"couldn't assign flavors to pod set head: insufficient quota for cpu in flavor gpu-a100,
1 more needed". The verdict is Argo CD's word for a workload that waits on purpose,
Suspended (not Progressing forever: a sync wave or ``wait --health`` would then wait
without end), with "waiting for admission in LocalQueue Q (Workload W: <Kueue's
reason>)".

Argo CD's Lua checks (``argocd/health``) see the object alone: there the same object is
Suspended too, with the operator's "RayCluster is suspended" (as for the Event rule of
:mod:`gitops_ray.health.ray`, only the message differs).

Pure: the caller passes the Workloads it read (only ``gitops_ray.kube`` talks to the API
server); those not owned by the object are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitops_ray.health.fields import dig, is_true, mapping, objects, text
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
QUEUED_KINDS = ("RayCluster", "RayJob")
"""The Ray kinds whose ``spec.suspend`` Kueue's ray.io/raycluster and ray.io/rayjob
integrations drive."""
MAX_REASON = 300


def queue_of(obj: Manifest) -> str:
    """The LocalQueue a Ray object is queued in ("" when it is not Kueue's)."""
    if not (str(obj.get("apiVersion", "")).startswith("ray.io/")
            and obj.get("kind") in QUEUED_KINDS):
        return ""
    return text(mapping(dig(obj, "metadata", "labels")).get(QUEUE_LABEL))


def waits_for_admission(obj: Manifest) -> bool:
    """Whether ``obj`` is queued and suspended: its health reads its Workload."""
    return bool(queue_of(obj)) and dig(obj, "spec", "suspend") is True


def owned_workload(obj: Manifest, workloads: Sequence[Manifest]) -> Manifest | None:
    """The Workload Kueue made for ``obj`` (its controller owner is ``obj``), if any."""
    uid = text(dig(obj, "metadata", "uid"))
    for workload in workloads:
        for ref in objects(dig(workload, "metadata", "ownerReferences")):
            if uid and text(ref.get("uid")) == uid and ref.get("controller") is True:
                return workload
    return None


def queued_health(obj: Manifest, workloads: Sequence[Manifest]) -> Health | None:
    """The verdict on a queued, suspended Ray object; ``None`` when it is not waiting."""
    if not waits_for_admission(obj):
        return None
    queue = queue_of(obj)
    workload = owned_workload(obj, workloads)
    if workload is None:
        return Health(HealthStatus.SUSPENDED, f"waiting for admission in LocalQueue {queue} "
                                              "(Kueue has not made its Workload yet)")
    name = text(dig(workload, "metadata", "name"))
    conditions = objects(dig(workload, "status", "conditions"))
    admitted = next((c for c in conditions if c.get("type") == "Admitted"), None)
    if is_true(admitted):
        return Health(HealthStatus.PROGRESSING, f"admitted in LocalQueue {queue} (Workload "
                                                f"{name}); waiting for Kueue to start it")
    return Health(HealthStatus.SUSPENDED, f"waiting for admission in LocalQueue {queue} "
                                          f"(Workload {name}: {_reason(conditions)})")


def _reason(conditions: list[Manifest]) -> str:
    """Kueue's own word: why it evicted it, else why no quota is reserved (or admitted)."""
    wanted = (("Evicted", True), ("QuotaReserved", False), ("Admitted", False))
    for kind, state in wanted:
        found = next((c for c in conditions if c.get("type") == kind), None)
        said = text((found or {}).get("message")) or text((found or {}).get("reason"))
        if found is not None and said and is_true(found) is state:
            return said if len(said) <= MAX_REASON else said[:MAX_REASON] + "…"
    return "pending"
