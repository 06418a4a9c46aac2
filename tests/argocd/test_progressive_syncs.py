"""Tools that drive syncs through ``.operation``: ApplicationSet RollingSync and Kargo.

**RollingSync.** The real ``argocd-applicationset-controller`` runs with
``--enable-progressive-syncs``; an ApplicationSet generates three Ray apps (gitops-ray's
two annotations in the template) in three RollingSync steps. The ApplicationSet
controller removes ``automated`` from the apps it rolls out and syncs a step's apps by
writing ``.operation`` (``initiatedBy.username: applicationset-controller``, an ``info``
reason, ``retry.limit: 5``: ``syncApplication`` in argo-cd's
``applicationset/controllers/applicationset_controller.go``); it moves on once each app
of the step is Healthy, Synced and its operation Succeeded (``isApplicationHealthy``),
all read from the status gitops-ray writes. No KubeRay operator runs: the test plays it,
reporting each RayCluster ready, so a step becomes Healthy exactly when the test says.

**Kargo.** Kargo's ``argocd-update`` promotion step (``internal/promotion/runner/builtin/
argocd_updater.go``) sets the source's ``targetRevision``, asks for a hard refresh,
clears ``status.operationState`` and writes ``.operation`` with ``initiatedBy``
(``kargo-controller``, automated), ``info`` (a reason and ``kargo.akuity.io/promotion``)
and ``sync.revisions``; it then waits until ``status.operationState.operation.info``
names its promotion, the phase is completed and ``syncResult.revision`` (or
``revisions``) is the promoted commit. The test writes exactly that patch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import APPLICATION, app_name
from tests.argocd.test_applicationset import APP_API, applicationset, make_appset
from tests.argocd.test_gitops_ray_e2e import OURS, application, manifests
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller

MERGE_PATCH = "application/merge-patch+json"
STEPS = ("alpha", "beta", "gamma")
PROMOTION = "kargo.akuity.io/promotion"
FIXTURES = (make_appset,)  # imported so pytest finds it here


@pytest.fixture
def progressive(argocd: ArgoCD) -> Iterator[ArgoCD]:
    """The ApplicationSet controller with ``--enable-progressive-syncs``."""
    argocd.start_applicationset_controller(progressive=True)
    yield argocd
    argocd.stop_component("argocd-applicationset-controller")


def rolling(manifest: Manifest) -> Manifest:
    """``manifest`` with one RollingSync step per element (label ``element``)."""
    spec = manifest["spec"]
    spec["template"]["metadata"]["labels"] = {"element": "{{.cluster}}"}
    spec["strategy"] = {"type": "RollingSync", "rollingSync": {"steps": [
        {"matchExpressions": [{"key": "element", "operator": "In", "values": [e]}]}
        for e in STEPS]}}
    return manifest


def report_ready(kube: Kube, namespace: str, name: str) -> None:
    """Write the RayCluster's status as the KubeRay operator would."""
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=namespace)
    assert live is not None
    live["status"] = {"state": "ready", "observedGeneration": live["metadata"]["generation"]}
    kube.replace(live, field_manager="kuberay-operator", subresource="status")


def step_status(kube: Kube, argocd: ArgoCD, appset: str) -> dict[str, str]:
    live = kube.get(APP_API, "ApplicationSet", name=appset, namespace=argocd.namespace) or {}
    return {s["application"]: s["status"]
            for s in (live.get("status") or {}).get("applicationStatus") or ()}


def test_rolling_sync_moves_a_step_only_once_gitops_ray_reports_it_healthy(
        progressive: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_appset: Callable[[Manifest], None]) -> None:
    argocd = progressive
    files = {f"{e}/{e}.yaml": v for e in STEPS
             for v in manifests(namespace, **{e: "2.9.0"}).values()}
    git_repo.commit(files)
    name = app_name("roll")
    make_appset(rolling(applicationset(name, git_repo, namespace, list(STEPS))))

    def rc(element: str) -> Manifest | None:
        return kube.get("ray.io/v1", "RayCluster", name=element, namespace=namespace)

    for i, element in enumerate(STEPS):
        app = f"{name}-{element}"
        eventually(lambda e=element: rc(e) is not None, timeout=120,
                   message=f"step {i + 1}: {app} synced by gitops-ray")
        eventually(lambda a=app: step_status(kube, argocd, name).get(a) == "Progressing",
                   timeout=120, message=f"the ApplicationSet saw {app}'s sync succeed")
        live = kube.get(*APPLICATION, name=app, namespace=argocd.namespace)
        assert live is not None
        assert live["status"]["operationState"]["operation"]["initiatedBy"]["username"] == \
            "applicationset-controller"
        later = STEPS[i + 1:]
        statuses = step_status(kube, argocd, name)
        assert all(rc(e) is None for e in later), "a later step synced before this one"
        assert all(statuses.get(f"{name}-{e}") == "Waiting" for e in later), statuses
        report_ready(kube, namespace, element)
        eventually(lambda a=app: step_status(kube, argocd, name).get(a) == "Healthy",
                   timeout=120, message=f"{app} Healthy for the ApplicationSet")


def kargo_patch(revision: str, promotion: str) -> dict[str, Any]:
    """What Kargo's ``argocd-update`` step writes on a single-source Application."""
    return {
        "metadata": {"annotations": {"argocd.argoproj.io/refresh": "hard"}},
        "spec": {"source": {"targetRevision": revision}},
        "operation": {
            "initiatedBy": {"username": "kargo-controller", "automated": True},
            "info": [{"name": "Reason",
                      "value": "Promotion triggered a sync of this Application resource."},
                     {"name": PROMOTION, "value": promotion}],
            "sync": {"revisions": [revision]}},
        "status": {"operationState": None}}


def test_a_kargo_promotion_completes_with_the_fields_kargo_waits_on(
        argocd: ArgoCD, kube: Kube, namespace: str, git_repo: GitRepo,
        gitops_ray: Controller, make_app: Callable[[Manifest], Manifest]) -> None:
    old = git_repo.commit(manifests(namespace, demo="2.9.0"))
    name = app_name("kargo")
    app = application(name, git_repo, namespace, annotations=dict(OURS))
    app["spec"]["source"]["targetRevision"] = old
    make_app(app)
    eventually(lambda: ((kube.get(*APPLICATION, name=name, namespace=argocd.namespace) or {})
                        .get("status") or {}).get("sync", {}).get("revision") == old,
               message="compared at the old commit")
    new = git_repo.commit(manifests(namespace, demo="2.10.0"))
    promotion = "test.01abc.promotion"
    kube.patch(*APPLICATION, name=name, namespace=argocd.namespace, content_type=MERGE_PATCH,
               patch=kargo_patch(new, promotion))

    def done() -> Manifest | None:
        live = kube.get(*APPLICATION, name=name, namespace=argocd.namespace) or {}
        state = (live.get("status") or {}).get("operationState") or {}
        return state if state.get("phase") in ("Succeeded", "Failed", "Error") and \
            not live.get("operation") else None

    state = eventually(done, timeout=120, message="the promotion's operation completed")
    assert state["phase"] == "Succeeded", state.get("message")
    info = {i["name"]: i["value"] for i in state["operation"].get("info") or ()}
    assert info[PROMOTION] == promotion  # Kargo's isKargoInitiatedOperation / its promotion
    assert state["operation"]["initiatedBy"]["username"] == "kargo-controller"
    result = state["syncResult"]
    assert (result.get("revisions") or [result["revision"]]) == [new]
    live = kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace)
    assert live is not None and live["spec"]["rayVersion"] == "2.10.0"
