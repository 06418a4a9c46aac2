"""Argo CD Application objects for tests, with hand-written Argo-schema status.

The tests in this directory check what Argo CD's own server, CLI and controller do with an
Application whose status someone else writes (gitops-ray, in the product). The fields are
those of the Application CRD (``manifests/crds/application-crd.yaml`` of argo-cd v3.2.11).
"""

from __future__ import annotations

import secrets
from typing import Any

from gitops_ray.types import Manifest

APPLICATION = ("argoproj.io/v1alpha1", "Application")  # apiVersion, kind for Kube calls
SKIP_RECONCILE = "argocd.argoproj.io/skip-reconcile"
MANAGED = "gitops-ray.io/managed"
REFRESH = "argocd.argoproj.io/refresh"
# Nothing serves this repository: Argo CD's repo-server is not running either.
SOURCE = {"repoURL": "https://git.example.invalid/config.git", "path": "apps/demo",
          "targetRevision": "main"}
DESTINATION = {"server": "https://kubernetes.default.svc", "namespace": "demo"}
OLD_SHA, SHA, NEW_SHA = ("a" * 40, "b" * 40, "c" * 40)


def app_name(prefix: str = "app") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def application(name: str, *, namespace: str = "argocd", skip_reconcile: bool = True,
                status: Manifest | None = None, sync_policy: Manifest | None = None
                ) -> Manifest:
    """An Application of project ``default``; opted out of Argo CD unless told otherwise."""
    annotations = {SKIP_RECONCILE: "true", MANAGED: "true"} if skip_reconcile else {}
    spec: dict[str, Any] = {"project": "default", "source": dict(SOURCE),
                            "destination": dict(DESTINATION)}
    if sync_policy is not None:
        spec["syncPolicy"] = sync_policy
    obj: Manifest = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                     "metadata": {"name": name, "namespace": namespace,
                                  "annotations": annotations},
                     "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def history_entry(entry_id: int, revision: str, day: int) -> Manifest:
    return {"id": entry_id, "revision": revision, "source": dict(SOURCE),
            "deployStartedAt": f"2026-11-{day:02d}T09:59:58Z",
            "deployedAt": f"2026-11-{day:02d}T10:00:00Z"}


def synced_status() -> Manifest:
    """Synced to :data:`SHA`, Healthy, two resource rows, two deployments in history."""
    return {
        "sync": {"status": "Synced", "revision": SHA,
                 "comparedTo": {"source": dict(SOURCE), "destination": dict(DESTINATION)}},
        "health": {"status": "Healthy"},
        "resources": [
            {"group": "ray.io", "version": "v1", "kind": "RayCluster", "namespace": "demo",
             "name": "train", "status": "Synced", "health": {"status": "Healthy"}},
            {"version": "v1", "kind": "ConfigMap", "namespace": "demo", "name": "settings",
             "status": "OutOfSync", "requiresPruning": True}],
        "history": [history_entry(0, OLD_SHA, 20), history_entry(1, SHA, 21)],
        "reconciledAt": "2026-11-21T10:00:05Z",
        "operationState": {
            "operation": {"sync": {"revision": SHA}}, "phase": "Succeeded",
            "message": "successfully synced", "startedAt": "2026-11-21T09:59:58Z",
            "finishedAt": "2026-11-21T10:00:00Z",
            "syncResult": {"revision": SHA, "source": dict(SOURCE), "resources": []}},
        "sourceType": "Directory",
    }
