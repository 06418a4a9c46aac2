"""Health of a bare Pod, with gitops-engine's rules.

Pods matter to a GitOps app mostly as hooks and one-off tasks, which is why the rules
depend on ``restartPolicy``: a pod that restarts forever is Degraded as soon as a container
is stuck in an error or back-off state, while a run-to-completion pod (``Never`` or
``OnFailure``) stays Progressing until it succeeds or fails, so that a hook is not failed
early by a transient image pull error. ``argocd.argoproj.io/ignore-restart-policy`` judges
a run-to-completion pod like a long-running one, as in Argo CD.
"""

from __future__ import annotations

from gitops_ray.health.fields import dig, mapping, number, objects, status, text
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest

IGNORE_RESTART_POLICY = "argocd.argoproj.io/ignore-restart-policy"


def pod_health(obj: Manifest) -> Health:
    """Phase first; a restart-forever pod with a container in error is Degraded at once."""
    restart = text(dig(obj, "spec", "restartPolicy")) or "Always"
    stuck = _stuck_messages(obj) if restart == "Always" else None
    if stuck is not None:
        return Health(HealthStatus.DEGRADED, ", ".join(stuck))
    phase, message = text(status(obj).get("phase")), text(status(obj).get("message"))
    if phase == "Pending":
        return Health(HealthStatus.PROGRESSING, message)
    if phase == "Succeeded":
        return Health(HealthStatus.HEALTHY, message)
    if phase == "Failed":
        return Health(HealthStatus.DEGRADED, message or _failure_message(obj))
    if phase == "Running":
        return _running_health(obj, restart, message)
    return Health(HealthStatus.UNKNOWN, message)


def _stuck_messages(obj: Manifest) -> list[str] | None:
    """Messages of containers waiting on an error (``Err*``, ``*Error``, ``*BackOff``)."""
    waiting = [mapping(dig(c, "state", "waiting")) for c in _containers(obj, "containerStatuses")]
    stuck = [w for w in waiting if _is_error(text(w.get("reason")))]
    return [text(w.get("message")) for w in stuck] if stuck else None


def _is_error(reason: str) -> bool:
    return reason.startswith("Err") or reason.endswith(("Error", "BackOff"))


def _containers(obj: Manifest, key: str) -> list[Manifest]:
    return objects(status(obj).get(key))


def _failure_message(obj: Manifest) -> str:
    """The first terminated container's explanation, init containers first."""
    statuses = _containers(obj, "initContainerStatuses") + _containers(obj, "containerStatuses")
    return next((m for m in map(_terminated_message, statuses) if m), "")


def _terminated_message(container: Manifest) -> str:
    terminated = dig(container, "state", "terminated")
    if not isinstance(terminated, dict):
        return ""
    code = number(terminated.get("exitCode")) or 0
    if text(terminated.get("message")):
        return text(terminated.get("message"))
    if terminated.get("reason") == "OOMKilled":
        return "OOMKilled"
    return f'container "{text(container.get("name"))}" failed with exit code {code}' if code else ""


def _running_health(obj: Manifest, restart: str, message: str) -> Health:
    annotations = mapping(dig(obj, "metadata", "annotations"))
    if restart != "Always" and IGNORE_RESTART_POLICY not in annotations:
        return Health(HealthStatus.PROGRESSING, message)
    if _is_ready(obj):
        return Health(HealthStatus.HEALTHY, message)
    restarted = any(isinstance(dig(c, "lastState", "terminated"), dict)
                    for c in _containers(obj, "containerStatuses"))
    return Health(HealthStatus.DEGRADED if restarted else HealthStatus.PROGRESSING, message)


def _is_ready(obj: Manifest) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in objects(status(obj).get("conditions")))
