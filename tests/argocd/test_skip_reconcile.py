"""Argo CD's own application controller leaves opted-out Applications alone.

gitops-ray takes over Applications annotated ``argocd.argoproj.io/skip-reconcile: "true"``
and relies on Argo CD's controller neither reconciling them (no status written) nor
running their operations. Here the real ``argocd-application-controller`` (v3.6.1) runs
out of cluster next to one opted-out and one ordinary Application, both pointing at a
repository nobody serves (no repo-server runs either).

What is observable without a repo-server: the ordinary Application gets a status
(``reconciledAt``, a ``ComparisonError`` condition), and an ``.operation`` set on it is
picked up (``status.operationState`` with ``startedAt``/``finishedAt``, phase ``Error``,
``.operation`` cleared) although it fails to fetch manifests. For the opted-out one the
controller logs (debug) that it skips it, on its creation and again on the update that set
its ``.operation`` (``canProcessApp`` in argo-cd's ``controller/appcontroller.go`` gates both
the refresh and the operation queue). "Never" is not observable; the test asserts that once
the controller has logged the skip of that very update and has finished the other
Application's operation, the opted-out one still has no status and its ``.operation``
untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import APPLICATION, NEW_SHA, SOURCE, app_name, application
from tests.harness import eventually

CONTROLLER = "argocd-application-controller"
MERGE_PATCH = "application/merge-patch+json"
SYNC_OPERATION = {"sync": {"revision": NEW_SHA, "source": SOURCE,
                           "syncStrategy": {"hook": {}}},
                  "initiatedBy": {"username": "tests"}}


def skips_logged(argocd: ArgoCD, name: str) -> int:
    text = (argocd.workdir / f"{CONTROLLER}.log").read_text(errors="replace")
    return sum(1 for line in text.splitlines()
               if "Skipping Application reconcile" in line and f"application={name} " in line)


def get(kube: Kube, argocd: ArgoCD, name: str) -> Manifest:
    app = kube.get(*APPLICATION, name=name, namespace=argocd.namespace)
    assert app is not None
    return app


def set_operation(kube: Kube, argocd: ArgoCD, name: str) -> None:
    kube.patch(*APPLICATION, name=name, namespace=argocd.namespace,
               patch={"operation": SYNC_OPERATION}, content_type=MERGE_PATCH)


def test_controller_reconciles_only_the_application_without_the_annotation(
        kube: Kube, argocd_controller: ArgoCD,
        make_app: Callable[[Manifest], Manifest]) -> None:
    argocd = argocd_controller
    skipped, ordinary = app_name("skipped"), app_name("ordinary")
    make_app(application(skipped, skip_reconcile=True))
    make_app(application(ordinary, skip_reconcile=False))

    def reconciled() -> Manifest | None:
        status: Manifest = get(kube, argocd, ordinary).get("status", {})
        return status if status.get("reconciledAt") else None

    status = eventually(reconciled, message="Argo CD's controller reconciled the ordinary app")
    assert "ComparisonError" in [c["type"] for c in status.get("conditions", [])]
    eventually(lambda: skips_logged(argocd, skipped) >= 1,
               message="the controller logged that it skips the annotated Application")
    assert "status" not in get(kube, argocd, skipped)


def test_controller_runs_operations_only_of_the_application_without_the_annotation(
        kube: Kube, argocd_controller: ArgoCD,
        make_app: Callable[[Manifest], Manifest]) -> None:
    argocd = argocd_controller
    skipped, ordinary = app_name("skipped"), app_name("ordinary")
    make_app(application(skipped, skip_reconcile=True))
    make_app(application(ordinary, skip_reconcile=False))
    eventually(lambda: skips_logged(argocd, skipped) >= 1, message="skip of the creation")
    before = skips_logged(argocd, skipped)

    set_operation(kube, argocd, skipped)
    set_operation(kube, argocd, ordinary)

    def finished() -> Manifest | None:
        app = get(kube, argocd, ordinary)
        state = app.get("status", {}).get("operationState") or {}
        return app if state.get("finishedAt") and "operation" not in app else None

    state = eventually(finished, message="the ordinary Application's operation ran")[
        "status"]["operationState"]
    assert state["phase"] in ("Error", "Failed")
    assert state["operation"]["sync"]["revision"] == NEW_SHA
    eventually(lambda: skips_logged(argocd, skipped) > before,
               message="the controller logged that it skips the update setting .operation")
    untouched = get(kube, argocd, skipped)
    assert untouched["operation"] == SYNC_OPERATION
    assert "status" not in untouched
