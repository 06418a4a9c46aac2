"""Kubernetes Events on managed objects: applied, pruned, failed.

``kubectl describe raycluster x`` is where users look first, so every write we make to an
object is announced there, with the revision. Events are best-effort (the API calls them
"informative, supplemental"): a failure to post one is logged and never fails a sync.
Messages are redacted (:func:`gitops_ray.redact.redact`) before they leave the process:
anyone who may list Events in a namespace reads them.
"""

from __future__ import annotations

import datetime
import secrets

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import Kube, KubeError
from gitops_ray.redact import redact
from gitops_ray.types import Manifest

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


def post_event(kube: Kube, obj: Manifest, *, reason: str, message: str,
               warning: bool = False) -> None:
    """Post an Event about ``obj``; never raises."""
    try:
        kube.create(event_for(obj, reason=reason, message=message, warning=warning),
                    field_manager=FIELD_MANAGER)
    except KubeError as e:
        log.debug("event_not_posted", reason=reason, error=str(e))
