"""Health of built-in Kubernetes kinds, with gitops-engine's rules.

A RayCluster app rarely ships only RayClusters: Services, Ingresses, PVCs, Jobs and the
odd Deployment come along, and app health is the worst of them. These checks follow
``argoproj/gitops-engine:pkg/health`` rule for rule (the rollout rules are borrowed from
``kubectl rollout status``), so an app has the same health here and in Argo CD. Kinds Argo
CD has no check for (ConfigMap, Secret, ServiceAccount, RBAC, ...) have none here either.
Messages are phrased for this tool; verdicts are Argo CD's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gitops_ray.health.fields import (
    condition,
    describe,
    dig,
    is_true,
    mapping,
    number,
    objects,
    status,
    text,
)
from gitops_ray.health.pod import pod_health
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest

HEALTHY = HealthStatus.HEALTHY
PROGRESSING = HealthStatus.PROGRESSING
DEGRADED = HealthStatus.DEGRADED


def _generation_observed(obj: Manifest) -> bool:
    """Whether the controller has seen the latest spec (``generation <= observedGeneration``)."""
    return (number(dig(obj, "metadata", "generation")) or 0) <= \
        (number(status(obj).get("observedGeneration")) or 0)


def _count(obj: Manifest, key: str) -> int:
    return number(status(obj).get(key)) or 0


def deployment_health(obj: Manifest) -> Health:
    """Paused is Suspended; otherwise the rollout must be observed, updated and available."""
    if dig(obj, "spec", "paused") is True:
        return Health(HealthStatus.SUSPENDED, "Deployment is paused")
    if not _generation_observed(obj):
        return Health(PROGRESSING, "Waiting for rollout to finish: "
                      "observed deployment generation is older than the desired generation")
    if text(dig(condition(obj, "Progressing"), "reason")) == "ProgressDeadlineExceeded":
        name = text(dig(obj, "metadata", "name"))
        return Health(DEGRADED, f'Deployment "{name}" exceeded its progress deadline')
    return _rollout_health(obj)


def _rollout_health(obj: Manifest) -> Health:
    wanted = number(dig(obj, "spec", "replicas"))
    replicas, updated = _count(obj, "replicas"), _count(obj, "updatedReplicas")
    available = _count(obj, "availableReplicas")
    if wanted is not None and updated < wanted:
        return Health(PROGRESSING, f"Waiting for rollout to finish: {updated} out of {wanted} "
                      "new replicas have been updated...")
    if replicas > updated:
        return Health(PROGRESSING, f"Waiting for rollout to finish: {replicas - updated} old "
                      "replicas are pending termination...")
    if available < updated:
        return Health(PROGRESSING, f"Waiting for rollout to finish: {available} of {updated} "
                      "updated replicas are available...")
    return Health(HEALTHY)


def statefulset_health(obj: Manifest) -> Health:
    """Observed, enough ready pods, then the update strategy's own notion of done."""
    observed = number(status(obj).get("observedGeneration")) or 0
    if observed == 0 or not _generation_observed(obj):
        return Health(PROGRESSING, "Waiting for statefulset spec update to be observed...")
    wanted, ready = number(dig(obj, "spec", "replicas")), _count(obj, "readyReplicas")
    if wanted is not None and ready < wanted:
        return Health(PROGRESSING, f"Waiting for {wanted - ready} pods to be ready...")
    strategy = mapping(dig(obj, "spec", "updateStrategy"))
    kind = text(strategy.get("type")) or "RollingUpdate"
    if kind == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        partition = number(dig(strategy, "rollingUpdate", "partition"))
        return _partitioned_health(obj, wanted, partition)
    if kind == "OnDelete":
        return Health(HEALTHY, f"statefulset has {ready} ready pods")
    return _revision_health(obj)


def _partitioned_health(obj: Manifest, wanted: int | None, partition: int | None) -> Health:
    updated = _count(obj, "updatedReplicas")
    if wanted is not None and partition is not None and updated < wanted - partition:
        return Health(PROGRESSING, "Waiting for partitioned roll out to finish: "
                      f"{updated} out of {wanted - partition} new pods have been updated...")
    return Health(HEALTHY,
                  f"partitioned roll out complete: {updated} new pods have been updated...")


def _revision_health(obj: Manifest) -> Health:
    current = text(status(obj).get("currentRevision"))
    update = text(status(obj).get("updateRevision"))
    if update != current:
        return Health(PROGRESSING, "waiting for statefulset rolling update to complete "
                      f"{_count(obj, 'updatedReplicas')} pods at revision {update}...")
    return Health(HEALTHY, "statefulset rolling update complete "
                  f"{_count(obj, 'currentReplicas')} pods at revision {current}...")


def daemonset_health(obj: Manifest) -> Health:
    """Observed, every scheduled pod updated and available (OnDelete: observed is enough)."""
    if not _generation_observed(obj):
        return Health(PROGRESSING, "Waiting for rollout to finish: "
                      "observed daemon set generation is older than the desired generation")
    desired = _count(obj, "desiredNumberScheduled")
    updated = _count(obj, "updatedNumberScheduled")
    if dig(obj, "spec", "updateStrategy", "type") == "OnDelete":
        return Health(HEALTHY, f"daemon set {updated} out of {desired} new pods have been updated")
    name = text(dig(obj, "metadata", "name"))
    if updated < desired:
        return Health(PROGRESSING, f'Waiting for daemon set "{name}" rollout to finish: '
                      f"{updated} out of {desired} new pods have been updated...")
    available = _count(obj, "numberAvailable")
    if available < desired:
        return Health(PROGRESSING, f'Waiting for daemon set "{name}" rollout to finish: '
                      f"{available} of {desired} updated pods are available...")
    return Health(HEALTHY)


def replicaset_health(obj: Manifest) -> Health:
    """Observed, no ReplicaFailure, and every wanted replica available."""
    if not _generation_observed(obj):
        return Health(PROGRESSING, "Waiting for rollout to finish: "
                      "observed replica set generation is older than the desired generation")
    failure = condition(obj, "ReplicaFailure")
    if is_true(failure):
        return Health(DEGRADED, text(dig(failure, "message")))
    wanted, available = number(dig(obj, "spec", "replicas")), _count(obj, "availableReplicas")
    if wanted is not None and available < wanted:
        return Health(PROGRESSING, f"Waiting for rollout to finish: {available} out of {wanted} "
                      "new replicas are available...")
    return Health(HEALTHY)


def service_health(obj: Manifest) -> Health:
    """A LoadBalancer Service is Progressing until the cloud assigns it an address."""
    if dig(obj, "spec", "type") == "LoadBalancer" and not _lb_ingress(obj):
        return Health(PROGRESSING, "Waiting for the load balancer to get an address")
    return Health(HEALTHY)


def ingress_health(obj: Manifest) -> Health:
    """An Ingress is Progressing until its controller publishes an address."""
    if not _lb_ingress(obj):
        return Health(PROGRESSING, "Waiting for the ingress controller to publish an address")
    return Health(HEALTHY)


def _lb_ingress(obj: Manifest) -> list[Manifest]:
    return objects(dig(obj, "status", "loadBalancer", "ingress"))


_PVC_PHASES = {"Bound": HEALTHY, "Pending": PROGRESSING, "Lost": DEGRADED}


def pvc_health(obj: Manifest) -> Health:
    """Bound is Healthy, Pending Progressing, Lost Degraded, anything else Unknown."""
    phase = text(status(obj).get("phase"))
    verdict = _PVC_PHASES.get(phase, HealthStatus.UNKNOWN)
    return Health(verdict, "" if verdict is HEALTHY else f"Claim is {phase or 'without a phase'}")


def namespace_health(obj: Manifest) -> Health:
    """Active is Healthy; Terminating (or not yet Active) is Progressing."""
    phase = text(status(obj).get("phase"))
    if phase == "Active":
        return Health(HEALTHY)
    return Health(PROGRESSING, f"Namespace is {phase or 'not yet Active'}")


def job_health(obj: Manifest) -> Health:
    """Failed is Degraded, Suspended Suspended, Complete Healthy, else still running.

    Unlike gitops-engine, a condition counts only when its status is "True": a Job resumed
    after a suspension (``Suspended=False``) is running again, not Healthy.
    """
    failed, suspended = condition(obj, "Failed"), condition(obj, "Suspended")
    complete = condition(obj, "Complete")
    if is_true(failed):
        return Health(DEGRADED, text(dig(failed, "message")) or "Job failed")
    if is_true(suspended):
        return Health(HealthStatus.SUSPENDED, text(dig(suspended, "message")) or "Job suspended")
    if is_true(complete):
        return Health(HEALTHY, text(dig(complete, "message")))
    return Health(PROGRESSING, "Job is running")


def apiservice_health(obj: Manifest) -> Health:
    """Available=True is Healthy; anything else is still being processed."""
    available = condition(obj, "Available")
    if available is None:
        return Health(PROGRESSING, "Waiting to be processed")
    return Health(HEALTHY if is_true(available) else PROGRESSING, describe(available))


CHECKS: Mapping[tuple[str, str], Callable[[Manifest], Health]] = {
    ("apps", "Deployment"): deployment_health,
    ("apps", "StatefulSet"): statefulset_health,
    ("apps", "DaemonSet"): daemonset_health,
    ("apps", "ReplicaSet"): replicaset_health,
    ("", "Service"): service_health,
    ("", "PersistentVolumeClaim"): pvc_health,
    ("", "Pod"): pod_health,
    ("", "Namespace"): namespace_health,
    ("networking.k8s.io", "Ingress"): ingress_health,
    ("extensions", "Ingress"): ingress_health,
    ("batch", "Job"): job_health,
    ("apiregistration.k8s.io", "APIService"): apiservice_health,
}
"""Built-in checks by (API group, kind); a kind not listed has no health check."""
