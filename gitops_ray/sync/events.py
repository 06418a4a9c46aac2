"""Kubernetes Events: what a sync did, per app, and per object where it matters.

Events are best-effort (the API calls them "informative, supplemental"): a failure to
post one is logged and never fails a sync. They are also writes, and one per object
would double what a cold sync costs the API server, so:

* one Event per app and sync step that changed or failed something (:func:`post_summary`):
  about the app's record ConfigMap in the control namespace (reason ``SyncSucceeded``,
  ``SyncRunning`` or ``SyncFailed``, as the controller's own), its message the counts
  ("app a at revision 0123456789ab: 20 created, 3 configured, 77 unchanged", then the
  step's message). The one-shot commands post it; the controller posts its own.
  ``kubectl get events -n <control namespace>`` lists the syncs; a step that changed
  nothing posts nothing;
* one Event per object only where ``kubectl describe <object>`` is where users look
  (:func:`post_event`): an object we *configured* (changed something that existed), one
  we pruned, and one whose apply failed (Warning). A created object needs none: its
  ``managedFields`` and creation time say who made it and when, and the app's Event
  counts it.

Messages are redacted (:func:`gitops_ray.redact.redact`) before they leave the process:
anyone who may list Events in a namespace reads them. The controller posts them from a
background thread per cluster (:mod:`gitops_ray.kube.outbox`), so no sync waits for one.
"""

from __future__ import annotations

import datetime
import secrets
from collections import Counter

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import Kube, KubeError
from gitops_ray.redact import redact
from gitops_ray.sync.records import record_name
from gitops_ray.types import Manifest, OperationPhase, ResourceAction

COMPONENT = "gitops-ray"
log = structlog.get_logger(__name__)


def event_for(obj: Manifest, *, reason: str, message: str, warning: bool = False) -> Manifest:
    """A ``core/v1`` Event about ``obj`` (pure; see :func:`post_event`)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}",
                     "namespace": namespace},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "name": meta.get("name"), "namespace": meta.get("namespace"),
                           "uid": meta.get("uid"),
                           "resourceVersion": meta.get("resourceVersion")},
        "reason": reason, "message": redact(message)[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT, "firstTimestamp": now, "lastTimestamp": now,
        "count": 1,
    }


SUMMARISED = (ResourceAction.CREATED, ResourceAction.CONFIGURED, ResourceAction.PRUNED,
              ResourceAction.DELETING, ResourceAction.FAILED)
"""The actions a sync step's Event counts; a step with none of them posts no Event."""
_REASONS = {OperationPhase.FAILED: "SyncFailed", OperationPhase.RUNNING: "SyncRunning"}
"""As the controller's own Event of a sync (runtime/controller.py): SyncSucceeded/Failed."""


def summary(*, app: str, revision: str, phase: OperationPhase, message: str,
            actions: list[ResourceAction]) -> tuple[str, str] | None:
    """The Event reason and message of one sync step, or ``None``: nothing to say (pure)."""
    counts = Counter(actions)
    if phase != OperationPhase.FAILED and not any(counts[a] for a in SUMMARISED):
        return None
    said = ", ".join(f"{n} {a.value}" for a, n in sorted(counts.items(), key=_by_weight))
    text = f"app {app} at revision {revision[:12]}: {said or 'nothing applied'}"
    return _REASONS.get(phase, "SyncSucceeded"), text + (f"; {message}" if message else "")


def _by_weight(item: tuple[ResourceAction, int]) -> tuple[int, str]:
    action = item[0]
    return (SUMMARISED.index(action) if action in SUMMARISED else len(SUMMARISED),
            action.value)


def post_summary(kube: Kube, namespace: str, *, app: str, revision: str,
                 phase: OperationPhase, message: str, actions: list[ResourceAction]) -> None:
    """Post the app's Event of one sync step (see the module docstring); never raises."""
    said = summary(app=app, revision=revision, phase=phase, message=message, actions=actions)
    if said is None:
        return
    record = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": record_name(app), "namespace": namespace}}
    post_event(kube, record, reason=said[0], message=said[1],
               warning=phase == OperationPhase.FAILED)


def post_event(kube: Kube, obj: Manifest, *, reason: str, message: str,
               warning: bool = False) -> None:
    """Post an Event about ``obj``; never raises.

    Through the client's outbox when it has one (the controller's: the worker does not
    wait for it, :mod:`gitops_ray.kube.outbox`), else at once (the one-shot commands).
    """
    event = event_for(obj, reason=reason, message=message, warning=warning)
    if kube.outbox is not None:
        kube.outbox.put(lambda: kube.create(event, field_manager=FIELD_MANAGER),
                        f"Event {reason}")
        return
    try:
        kube.create(event, field_manager=FIELD_MANAGER)
    except KubeError as e:
        log.debug("event_not_posted", reason=reason, error=str(e))
