"""What argocd-server and its CLI do to an Application gitops-ray runs, and what they wait for.

``argocd app sync`` and ``argocd app rollback`` never talk to a controller: argocd-server
writes ``.operation`` on the Application (``Server.Sync`` / ``Server.Rollback`` in argo-cd
v3.2.11's ``server/application/application.go``, both through ``argo.SetAppOperation``,
which refuses while ``.operation`` is set and clears ``status.operationState``), and the CLI
then watches the Application (``waitOnApplicationStatus`` in
``cmd/argocd/commands/app.go``). Here the test plays the product's part by hand
(:func:`record_operation`) to pin down that contract:

* the CLI returns once ``.operation`` is gone and ``status.operationState`` has
  ``finishedAt`` and ``status.reconciledAt`` is not before it; then it asks argocd-server
  for a refresh (``Get`` with ``refresh=normal``: it sets the annotation
  ``argocd.argoproj.io/refresh`` and waits until an update of the Application no longer
  carries it), prints the result and exits non-zero unless the phase is ``Succeeded``;
* the CLI looks only at watch events, and argocd-server's single-Application ``Watch``
  sends the informer's copy first and then subscribes to updates: an update that lands
  between the two is never sent, and the CLI waits for the next one. The tests record
  the end of an operation only once argocd-server has logged the CLI's ``Watch`` call
  (:func:`cli_watching`); a product should not rely on one final write either;
* resolving a branch or tag to a commit needs Argo CD's repo-server (none runs here): a
  sync to a 40-hex commit SHA (``--revision`` or ``targetRevision``) does not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import (
    APPLICATION,
    NEW_SHA,
    OLD_SHA,
    REFRESH,
    SOURCE,
    app_name,
    application,
    history_entry,
    synced_status,
)
from tests.harness import eventually

MERGE_PATCH = "application/merge-patch+json"


def get(kube: Kube, argocd: ArgoCD, name: str) -> Manifest:
    app = kube.get(*APPLICATION, name=name, namespace=argocd.namespace)
    assert app is not None
    return app


def pending_operation(kube: Kube, argocd: ArgoCD, name: str) -> Manifest:
    """The ``.operation`` argocd-server wrote, once it is there."""
    op: Manifest = eventually(lambda: get(kube, argocd, name).get("operation"),
                              message=f"argocd-server set .operation on {name}")
    return op


def record_operation(kube: Kube, argocd: ArgoCD, name: str, phase: str) -> None:
    """The product's part: run the pending operation (on paper) and record how it ended."""
    op = pending_operation(kube, argocd, name)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    revision = op["sync"]["revision"]
    state = {"operation": op, "phase": phase, "message": f"{phase} by the test",
             "startedAt": now, "finishedAt": now,
             "syncResult": {"revision": revision, "source": op["sync"]["source"]}}
    kube.patch(*APPLICATION, name=name, namespace=argocd.namespace, content_type=MERGE_PATCH,
               patch={"operation": None,
                      "status": {"operationState": state, "reconciledAt": now,
                                 "sync": {"status": "Synced", "revision": revision}}})


def finish_refresh(kube: Kube, argocd: ArgoCD, name: str) -> None:
    """The product's part of a refresh: drop the annotation, as Argo CD's controller does."""
    kube.patch(*APPLICATION, name=name, namespace=argocd.namespace, patch=[
        {"op": "remove", "path": "/metadata/annotations/" + REFRESH.replace("/", "~1")}])


def cli_watching(argocd: ArgoCD, name: str) -> bool:
    """Whether argocd-server has received a CLI's ``Watch`` of the Application ``name``."""
    log = (argocd.workdir / "argocd-server.log").read_text(errors="replace")
    return any("ApplicationService/Watch" in line and f'name:\\"{name}\\"' in line
               for line in log.splitlines())


def record_when_watched(kube: Kube, argocd: ArgoCD, name: str, phase: str) -> None:
    eventually(lambda: cli_watching(argocd, name), message="the CLI watches the Application")
    record_operation(kube, argocd, name, phase)


def refresh_requested(kube: Kube, argocd: ArgoCD, name: str) -> bool:
    return REFRESH in (get(kube, argocd, name)["metadata"].get("annotations") or {})


def test_sync_async_sets_the_operation(
        kube: Kube, argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))

    argocd.cli("app", "sync", name, "--async", "--revision", NEW_SHA, "--prune")

    app = get(kube, argocd, name)
    assert app["operation"]["sync"] == {"revision": NEW_SHA, "source": SOURCE, "prune": True,
                                        "syncStrategy": {"hook": {}}}
    assert "operationState" not in app["status"]  # SetAppOperation clears it
    assert [h["id"] for h in app["status"]["history"]] == [0, 1]


def test_sync_to_a_commit_target_revision_needs_no_repo_server(
        kube: Kube, argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    app = application(name, status=synced_status())
    app["spec"]["source"]["targetRevision"] = NEW_SHA
    make_app(app)

    argocd.cli("app", "sync", name, "--async")

    assert get(kube, argocd, name)["operation"]["sync"]["revision"] == NEW_SHA


def test_sync_to_a_branch_needs_the_repo_server(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))  # targetRevision: main

    failed = argocd.cli("app", "sync", name, "--async", check=False)

    assert failed.returncode != 0
    assert "error resolving repo revision" in failed.stderr


def test_second_operation_is_refused_while_one_is_pending(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))
    argocd.cli("app", "sync", name, "--async", "--revision", NEW_SHA)

    refused = argocd.cli("app", "sync", name, "--async", "--revision", NEW_SHA, check=False)

    assert refused.returncode != 0
    assert "another operation is already in progress" in refused.stderr


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_blocking_sync_returns_after_the_operation_and_a_refresh(
        kube: Kube, argocd: ArgoCD, make_app: Callable[[Manifest], Manifest],
        phase: str) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))
    sync = argocd.cli_process("app", "sync", name, "--revision", NEW_SHA, "--timeout", "300")
    try:
        record_when_watched(kube, argocd, name, phase)
        eventually(lambda: refresh_requested(kube, argocd, name),
                   message="the CLI asked argocd-server for a refresh")
        assert sync.poll() is None  # argocd-server answers once the refresh is done
        finish_refresh(kube, argocd, name)
        out, err = sync.communicate(timeout=120)
    finally:
        sync.kill()
    assert f"Phase:              {phase}" in out
    if phase == "Succeeded":
        assert sync.returncode == 0, err
    else:
        assert sync.returncode != 0 and "Operation has completed with phase: Failed" in err


def test_rollback_syncs_a_history_entry_with_the_apply_strategy(
        kube: Kube, argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status()))
    rollback = argocd.cli_process("app", "rollback", name, "0", "--timeout", "300")
    try:
        op = pending_operation(kube, argocd, name)
        assert op["sync"] == {"revision": OLD_SHA, "source": SOURCE,
                              "syncStrategy": {"apply": {}}}
        record_when_watched(kube, argocd, name, "Succeeded")
        eventually(lambda: refresh_requested(kube, argocd, name),
                   message="the CLI asked argocd-server for a refresh")
        finish_refresh(kube, argocd, name)
        _, err = rollback.communicate(timeout=120)
    finally:
        rollback.kill()
    assert rollback.returncode == 0, err


def test_rollback_is_refused_with_auto_sync(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status=synced_status(), sync_policy={"automated": {}}))

    refused = argocd.cli("app", "rollback", name, "0", check=False)

    assert refused.returncode != 0
    assert "rollback cannot be initiated when auto-sync is enabled" in refused.stderr


def test_rollback_without_an_id_needs_two_history_entries(
        argocd: ArgoCD, make_app: Callable[[Manifest], Manifest]) -> None:
    name = app_name()
    make_app(application(name, status={**synced_status(),
                                       "history": [history_entry(0, OLD_SHA, 20)]}))

    refused = argocd.cli("app", "rollback", name, check=False)

    assert refused.returncode != 0
    assert "should have at least two successful deployments" in refused.stderr
    assert json.loads(argocd.cli("app", "get", name, "-o", "json").stdout).get(
        "operation") is None
