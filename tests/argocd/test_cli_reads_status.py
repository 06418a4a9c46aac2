"""Argo CD's CLI shows an Application's status that someone other than Argo CD wrote.

This is the premise of gitops-ray writing Argo CD's status back: argocd-server serves the
Application object as stored, so ``argocd app list`` / ``app get`` render whatever
Argo-schema status is there (sync, health, revision, the ``status.resources`` rows).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import SHA, SOURCE, app_name, application, synced_status
from tests.harness import eventually


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def listed_row(argocd: ArgoCD, qualified_name: str) -> tuple[list[str], list[str]] | None:
    listed = rows(argocd.cli("app", "list").stdout)
    found = [r for r in listed[1:] if r[0] == qualified_name]
    return (listed[0], found[0]) if found else None


def test_list_and_get_render_a_hand_written_status(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))

    # `app list` reads argocd-server's informer, which sees the new object a moment later.
    header, row_values = eventually(lambda: listed_row(argocd, f"argocd/{name}"),
                                    message="the Application in `argocd app list`")
    row = dict(zip(header, row_values, strict=True))
    assert (row["STATUS"], row["HEALTH"], row["SYNCPOLICY"]) == ("Synced", "Healthy", "Manual")
    assert (row["REPO"], row["TARGET"]) == (SOURCE["repoURL"], SOURCE["targetRevision"])

    got = argocd.cli("app", "get", name).stdout
    assert f"Sync Status:        Synced to main ({SHA[:7]})" in got
    assert "Health Status:      Healthy" in got
    assert ["ray.io", "RayCluster", "demo", "train", "Synced", "Healthy"] in rows(got)
    assert ["ConfigMap", "demo", "settings", "OutOfSync"] in rows(got)


def test_get_json_returns_the_status(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))

    status = json.loads(argocd.cli("app", "get", name, "-o", "json").stdout)["status"]

    assert status["sync"]["status"] == "Synced" and status["sync"]["revision"] == SHA
    assert status["health"]["status"] == "Healthy"
    assert [r["name"] for r in status["resources"]] == ["train", "settings"]
    assert [h["id"] for h in status["history"]] == [0, 1]
    assert status["operationState"]["phase"] == "Succeeded"


def test_history_lists_the_written_deployments(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))

    assert argocd.cli("app", "history", name, "-o", "id").stdout.split() == ["0", "1"]
    assert ["1", "2026-11-21", "10:00:00", "+0000", "UTC", "main", f"({SHA[:7]})"] in rows(
        argocd.cli("app", "history", name).stdout)
