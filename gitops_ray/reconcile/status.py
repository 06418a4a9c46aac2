"""App status as users see it (``gitops-ray status``), derived from a comparison.

The status mirrors ``argocd app list``: sync status, health, revision, plus the last
operation and a short history. It is persisted in the app's record ConfigMap by
:func:`save_status`, so ``status`` and ``wait`` work from any machine and a restarted
controller knows where it left off.
"""

from __future__ import annotations

import time
from typing import Any

from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.sync.engine import SyncResult
from gitops_ray.sync.records import AppRecord, RecordStore, push_history


def status_of(comparison: Comparison) -> dict[str, Any]:
    """The status fields a comparison determines."""
    health = comparison.health
    return {
        "revision": comparison.revision,
        "sync": comparison.diff.status,
        "health": health.status.value if health else "Unknown",
        "healthMessage": health.message if health else "",
        "resources": [{"key": str(r.key), "status": r.status, "reason": r.reason}
                      for r in comparison.diff.resources],
        "repoURL": comparison.app.source.repo_url,
        "path": comparison.app.source.path,
        "targetRevision": comparison.app.source.target_revision,
        "destinationNamespace": comparison.app.destination.namespace,
        "comparedAt": time.time(),
        "error": "",
        "renderWarnings": list(comparison.render_problems),
    }


def save_status(store: RecordStore, comparison: Comparison,
                result: SyncResult | None = None) -> None:
    """Persist the comparison's status (and the sync operation, when there was one)."""
    fields = status_of(comparison)

    def change(record: AppRecord) -> None:
        record.status.update(fields)
        if result is not None:
            push_history(record.status, result.as_operation())

    store.update(comparison.app.name, change)


def save_error(store: RecordStore, app: str, stage: str, message: str) -> None:
    """Record that the last pass of ``app`` failed, keeping everything else as it was."""

    def change(record: AppRecord) -> None:
        record.status.update({"sync": record.status.get("sync", "Unknown"),
                              "error": f"{stage}: {message}", "comparedAt": time.time()})

    store.update(app, change)
