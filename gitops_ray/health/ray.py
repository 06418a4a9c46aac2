"""Health of KubeRay objects (RayCluster, RayJob, RayService, RayCronJob), new to Argo CD.

The rules read what the KubeRay operator actually writes (``calculateStatus`` in
``ray-operator/controllers/ray/raycluster_controller.go`` of
https://github.com/ray-project/kuberay):

* a spec the operator rejects gets no (new) status, only a Warning Event
  (``InvalidRayClusterSpec``), the one way to tell "rejected" from "not reconciled yet";
  an Event counts only if it is not older than the last write of the spec;
* a RayCluster's ``status.observedGeneration`` lagging behind ``metadata.generation`` is
  no sign of work in progress: KubeRay (v1.6.1 checked end to end) writes its status
  only when another status field changes, so after an edit that changes none (a pod
  template, the autoscaler's ``workersToDelete`` cleanup) it lags for good. The status
  written last is the operator's current word (RayService still waits for it);
* conditions first (``ReplicaFailure`` has no ``RayCluster`` prefix;
  ``RayClusterProvisioned`` stays True once set), the deprecated ``status.state`` only for
  operators that run without status conditions;
* workers still pending while the autoscaler scales are normal: they show up in the
  message as ``ready/desired`` but never make a cluster Degraded;
* Pods on an older template (KubeRay rolls none unless ``upgradeStrategy`` says so, see
  :mod:`gitops_ray.health.rollout`) keep a ready cluster Healthy, with
  ``; rollout pending: group <g> <stale>/<total> pods on an older template`` appended.
  Not Progressing: in Argo CD's vocabulary that means "converging on its own", and
  nothing will converge here until someone deletes the Pods or scales; a Progressing
  that never ends would also block sync waves and ``argocd app wait --health`` forever.

``argocd/health/ray.io_*.lua`` implement the same rules with the same messages for Argo CD
(tests run both on the same fixtures); only the Event rule is Python-only, because Argo
CD's Lua sees the object alone.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from gitops_ray.health.rollout import pending_rollouts, rollout_message
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest

OPERATOR = "ray.io/kuberay-operator"
"""The only ``spec.managedBy`` value (besides none) under which KubeRay reconciles a cluster."""

REJECTION_REASONS = ("InvalidRayClusterSpec", "InvalidRayClusterMetadata")
"""Reasons of the Warning Events KubeRay emits instead of a status for an invalid cluster."""

JOB_FAILURES = ("Failed", "ValidationFailed")
"""``jobDeploymentStatus`` values that are final failures."""

SERVICE_OUTAGES = ("ZeroServeEndpoints", "InitializingTimeout")
"""Reasons of ``Ready=False`` meaning "serves nothing" (as opposed to "still initializing")."""

LEGACY_SERVICE_FAILURES = ("FailedToGetOrCreateRayCluster", "FailedToGetServeDeploymentStatus",
                           "FailedToUpdateServingPodLabel", "FailedToUpdateService")
"""``serviceStatus`` failures of KubeRay < 1.3 (later ones write only ``Running`` or nothing)."""


def raycluster_health(obj: Manifest, *, events: Sequence[Manifest] = (),
                      pods: Sequence[Manifest] = ()) -> Health:
    """Health of a RayCluster, with the rollouts its Pods still lack (if Healthy).

    ``events`` may hold Events about it, ``pods`` its Pods (``ray.io/cluster=<name>``);
    others are ignored.
    """
    verdict = _raycluster_health(obj, events)
    pending = rollout_message(pending_rollouts(obj, pods)) if pods else ""
    if pending and verdict.status == HealthStatus.HEALTHY:
        return Health(verdict.status, f"{verdict.message}; {pending}")
    return verdict


def _raycluster_health(obj: Manifest, events: Sequence[Manifest]) -> Health:
    owner = text(dig(obj, "spec", "managedBy"))
    if owner and owner != OPERATOR:
        return Health(HealthStatus.UNKNOWN,
                      f"RayCluster is managed by {owner}, not by the KubeRay operator")
    rejection = _rejection(obj, events) if awaits_operator(obj) else ""
    if rejection:
        return Health(HealthStatus.DEGRADED, rejection)
    if not status(obj):
        return _NO_STATUS
    if objects(status(obj).get("conditions")):
        return _cluster_conditions_health(obj)
    return _cluster_state_health(obj)


def awaits_operator(obj: Manifest) -> bool:
    """Whether a RayCluster's health depends on Events about it.

    That is while the operator has not reported on the current generation, which is also
    what a rejected spec looks like (the operator posts a Warning Event, writes no status).
    """
    return obj.get("kind") == "RayCluster" and _unobserved(obj) is not None


_NO_STATUS = Health(HealthStatus.PROGRESSING, "Waiting for the KubeRay operator to report status")


def _unobserved(obj: Manifest) -> Health | None:
    """Progressing while the operator has not reported on the current generation."""
    if not status(obj):
        return _NO_STATUS
    generation = number(dig(obj, "metadata", "generation"))
    observed = number(status(obj).get("observedGeneration"))
    if generation is not None and observed is not None and observed < generation:
        return Health(HealthStatus.PROGRESSING, "Waiting for the KubeRay operator to observe "
                      f"generation {generation} (observed {observed})")
    return None


def _cluster_conditions_health(obj: Manifest) -> Health:
    if is_true(condition(obj, "RayClusterSuspended")):
        return Health(HealthStatus.SUSPENDED, "RayCluster is suspended")
    if is_true(condition(obj, "RayClusterSuspending")):
        return Health(HealthStatus.PROGRESSING, "RayCluster is suspending")
    failure = condition(obj, "ReplicaFailure")
    if is_true(failure):
        return Health(HealthStatus.DEGRADED, describe(failure) or "ReplicaFailure")
    if not is_true(condition(obj, "RayClusterProvisioned")):
        return Health(HealthStatus.PROGRESSING,
                      "Waiting for all Ray pods to be running and ready" + _workers(obj))
    head = condition(obj, "HeadPodReady")
    if not is_true(head):
        return Health(HealthStatus.DEGRADED, _joined("Head pod is not ready", describe(head)))
    return Health(HealthStatus.HEALTHY, "RayCluster is ready" + _workers(obj))


def _cluster_state_health(obj: Manifest) -> Health:
    """Fallback for operators without status conditions: the deprecated ``status.state``."""
    state = text(status(obj).get("state"))
    if state == "suspended":
        return Health(HealthStatus.SUSPENDED, "RayCluster is suspended")
    if state == "ready":
        return Health(HealthStatus.HEALTHY, "RayCluster is ready" + _workers(obj))
    if state == "failed":
        return Health(HealthStatus.DEGRADED,
                      _joined("RayCluster failed", text(status(obj).get("reason"))))
    return Health(HealthStatus.PROGRESSING,
                  "Waiting for the RayCluster to become ready" + _workers(obj))


def _workers(obj: Manifest) -> str:
    """`` (ready/desired workers ready)`` when the operator reports a desired worker count."""
    desired = number(status(obj).get("desiredWorkerReplicas"))
    if desired is None or desired <= 0:
        return ""
    ready = number(status(obj).get("readyWorkerReplicas")) or 0
    return f" ({ready}/{desired} workers ready)"


def _joined(summary: str, detail: str) -> str:
    return f"{summary}: {detail}" if detail else summary


def _rejection(obj: Manifest, events: Sequence[Manifest]) -> str:
    """``"reason: message"`` of the latest Warning Event rejecting this cluster, or ``""``."""
    since = _spec_written(obj)
    latest = max((e for e in events if _rejects(e, obj) and _event_time(e)[:19] >= since),
                 key=_event_time, default=None)
    if latest is None:
        return ""
    return _joined(text(latest.get("reason")), text(latest.get("message") or latest.get("note")))


def _rejects(event: Manifest, obj: Manifest) -> bool:
    """A Warning rejecting ``obj`` (core/v1 ``involvedObject`` or events.k8s.io ``regarding``)."""
    about = mapping(event.get("involvedObject") or event.get("regarding"))
    meta = mapping(obj.get("metadata"))
    uids = (text(about.get("uid")), text(meta.get("uid")))
    return (event.get("type") == "Warning" and event.get("reason") in REJECTION_REASONS
            and about.get("kind") == "RayCluster" and about.get("name") == meta.get("name")
            and text(about.get("namespace")) == text(meta.get("namespace"))
            and (not all(uids) or uids[0] == uids[1]))


def _spec_written(obj: Manifest) -> str:
    """When the object (not its status) was last written, to the second, or ``""``.

    From ``managedFields``: an Event older than that is about an earlier spec. Both
    times have whole seconds, so an Event from the same second as the write counts (a
    rejection is never missed; a fix within that second shows Degraded until the next
    write of the spec or until the Event expires).
    """
    entries = objects(dig(obj, "metadata", "managedFields"))
    times = [text(e.get("time"))[:19] for e in entries if not text(e.get("subresource"))]
    return max(times, default="")


def _event_time(event: Manifest) -> str:
    """The event's time as an RFC 3339 UTC string; such strings sort by time (to the second)."""
    return text(event.get("eventTime") or event.get("lastTimestamp")
                or event.get("firstTimestamp") or dig(event, "metadata", "creationTimestamp"))


def raycronjob_health(obj: Manifest) -> Health:
    """Health of a RayCronJob (KubeRay's alpha ``RayCronJob`` feature gate).

    ``argocd/health/ray.io_RayCronJob.lua`` gives the same verdicts. Its controller
    (``raycronjob_controller.go``) writes one status field,
    ``lastScheduleTime``, when it creates a RayJob; a spec it refuses
    (``ValidateRayCronJobSpec``) gets an ``InvalidRayCronJobSpec`` Warning Event and no
    status (a sync refuses such a change first: :mod:`gitops_ray.diff.refusals` checks
    the job template as the RayJob it becomes). Suspended stops new RayJobs; the RayJobs
    it made have their own health. Healthy otherwise: a schedule that has not fired yet
    is not work in progress.
    """
    schedule = text(dig(obj, "spec", "schedule"))
    if dig(obj, "spec", "suspend") is True:
        return Health(HealthStatus.SUSPENDED, "RayCronJob is suspended: no new RayJobs")
    last = text(status(obj).get("lastScheduleTime"))
    return Health(HealthStatus.HEALTHY,
                  f"RayCronJob on schedule '{schedule}': "
                  + (f"last RayJob created at {last}" if last else "no RayJob created yet"))


def rayjob_health(obj: Manifest) -> Health:
    """Health of a RayJob from ``status.jobDeploymentStatus``.

    Complete (the Ray job SUCCEEDED or was STOPPED) is Healthy, Failed and ValidationFailed
    are Degraded, Suspended is Suspended, everything else is on its way.
    """
    phase = text(status(obj).get("jobDeploymentStatus"))
    if not phase:
        return Health(HealthStatus.PROGRESSING, "Waiting for the KubeRay operator to start the job")
    message = _job_message(obj, phase)
    if phase == "Complete":
        return Health(HealthStatus.HEALTHY, message)
    if phase in JOB_FAILURES:
        return Health(HealthStatus.DEGRADED, message)
    if phase == "Suspended":
        return Health(HealthStatus.SUSPENDED, message)
    return Health(HealthStatus.PROGRESSING, message)


def _job_message(obj: Manifest, phase: str) -> str:
    """``RayJob is <phase>[, Ray job <jobStatus>][: <message or reason>]``.

    ``Running`` without a ``jobStatus`` says so: the operator is Running as soon as the
    cluster is up and the submitter created, and learns the Ray job's status only from the
    head's dashboard (KubeRay v1.6.1, seen in tests/e2e), so "RayJob is Running" alone
    would claim a job that may not even have been submitted.
    """
    job = text(status(obj).get("jobStatus"))
    detail = f", Ray job {job}" if job else (
        ", Ray job status not reported yet" if phase == "Running" else "")
    summary = f"RayJob is {phase}{detail}"
    return _joined(summary, text(status(obj).get("message")) or text(status(obj).get("reason")))


def rayservice_health(obj: Manifest) -> Health:
    """Health of a RayService: its conditions, else the older ``serviceStatus``."""
    pending = _unobserved(obj)
    if pending is not None:
        return pending
    if objects(status(obj).get("conditions")):
        return _service_conditions_health(obj)
    return _service_status_health(obj)


def _service_conditions_health(obj: Manifest) -> Health:
    if is_true(condition(obj, "Suspended")):
        return Health(HealthStatus.SUSPENDED, "RayService is suspended")
    if is_true(condition(obj, "Suspending")):
        return Health(HealthStatus.PROGRESSING, "RayService is suspending")
    ready = condition(obj, "Ready")
    if not is_true(ready) and text(dig(ready, "reason")) in SERVICE_OUTAGES:
        return Health(HealthStatus.DEGRADED, _joined("RayService is not serving", describe(ready)))
    for kind, summary in (("UpgradeInProgress", "Upgrade in progress"),
                          ("RollbackInProgress", "Rollback in progress")):
        change = condition(obj, kind)
        if is_true(change):
            return Health(HealthStatus.PROGRESSING, _joined(summary, describe(change)))
    if is_true(ready):
        return Health(HealthStatus.HEALTHY, "RayService is ready" + _endpoints(obj))
    return Health(HealthStatus.PROGRESSING,
                  _joined("Waiting for the RayService to be ready", describe(ready)))


def _service_status_health(obj: Manifest) -> Health:
    """Fallback for operators before conditions (KubeRay < 1.3): ``serviceStatus``."""
    service = text(status(obj).get("serviceStatus"))
    if service == "Running":
        return Health(HealthStatus.HEALTHY, "RayService is ready" + _endpoints(obj))
    if service in LEGACY_SERVICE_FAILURES:
        return Health(HealthStatus.DEGRADED, f"RayService is {service}")
    return Health(HealthStatus.PROGRESSING,
                  _joined("Waiting for the RayService to be ready", service))


def _endpoints(obj: Manifest) -> str:
    count = number(status(obj).get("numServeEndpoints"))
    if count is None or count <= 0:
        return ""
    return f" ({count} serve endpoint{'' if count == 1 else 's'})"
