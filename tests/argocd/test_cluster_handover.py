"""A whole cluster handed to gitops-ray, seen through the real argocd-server (issue 39).

The in-cluster cluster Secret of Argo CD's namespace carries ``gitops-ray.io/managed`` and
``argocd.argoproj.io/skip-reconcile``: gitops-ray reconciles an Application of that
cluster that carries neither annotation itself, and ``argocd app get`` shows the status it
wrote. Argo CD >= 3.4 skips every Application of such a cluster (``isManagedShard`` in
argo-cd's ``controller/sharding/cache.go``, v3.6.1 here); next to gitops-ray, the real
application controller logs (debug) that it skips the cluster, never reconciles that app
(no status field of its own, no log line naming it), while it does reconcile an app of
a cluster nobody handed over (an unknown server: Argo CD's own ``InvalidSpecError``).

``argocd app resources`` (the UI's resource tree) is answered from Redis
(``app|resources-tree|<app>``), which gitops-ray fills for such an app as for one handed
over by its own annotations (``tests/argocd/test_ui_views.py`` has the rest of the views).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import MANAGED_ANNOTATION, SKIP_RECONCILE_ANNOTATION, Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import APPLICATION, app_name
from tests.argocd.test_gitops_ray_e2e import (
    application,
    compared,
    controller_lines,
    manifests,
    ray_version,
    status_when,
)
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller


@pytest.fixture
def handed_over_cluster(kube: Kube, argocd: ArgoCD) -> Iterator[None]:
    data = {"name": "in-cluster", "server": "https://kubernetes.default.svc",
            "config": json.dumps({"tlsClientConfig": {"insecure": False}})}
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "cluster-in-cluster-handover",
                             "namespace": argocd.namespace,
                             "labels": {"argocd.argoproj.io/secret-type": "cluster"},
                             "annotations": {MANAGED_ANNOTATION: "true",
                                             SKIP_RECONCILE_ANNOTATION: "true"}},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}},
               field_manager="tests", force=True)
    yield
    kube.delete("v1", "Secret", name="cluster-in-cluster-handover", namespace=argocd.namespace)


@pytest.mark.usefixtures("handed_over_cluster")
def test_every_app_of_a_handed_over_cluster_is_gitops_rays(
        kube: Kube, argocd: ArgoCD, gitops_ray: Controller,
        make_app: Callable[[Manifest], Manifest], git_repo: GitRepo, namespace: str) -> None:
    sha = git_repo.commit(manifests(namespace, demo="2.9.0"))
    name = app_name("cluster")
    make_app(application(name, git_repo, namespace, automated=True, annotations={}))
    eventually(lambda: ray_version(kube, namespace), message="synced by gitops-ray")
    status = status_when(argocd, name, compared(sha, "Synced"), "argocd app get: Synced")
    assert status["operationState"]["phase"] == "Succeeded"

    listed = [line.split() for line in argocd.cli("app", "resources", name).stdout.splitlines()]
    assert ["ray.io", "RayCluster", namespace, "demo", "No"] in listed, listed


CLUSTER_SKIPPED = ("Cluster https://kubernetes.default.svc has argocd.argoproj.io/"
                   "skip-reconcile annotation set, skipping")


def _status_managers(kube: Kube, argocd: ArgoCD, name: str) -> set[str]:
    """The field managers that wrote the Application's ``status``."""
    app = kube.get(*APPLICATION, name=name, namespace=argocd.namespace) or {}
    return {e["manager"] for e in app.get("metadata", {}).get("managedFields", [])
            if "f:status" in e.get("fieldsV1", {})}


def test_argo_cds_own_controller_skips_the_apps_of_a_handed_over_cluster(
        handed_over_cluster: None, argocd_controller: ArgoCD, kube: Kube,
        gitops_ray: Controller, make_app: Callable[[Manifest], Manifest],
        git_repo: GitRepo, namespace: str) -> None:
    argocd = argocd_controller
    sha = git_repo.commit(manifests(namespace, demo="2.9.0"))
    ours, theirs = app_name("cluster-ours"), app_name("cluster-theirs")
    make_app(application(ours, git_repo, namespace, automated=True, annotations={}))
    elsewhere = application(theirs, git_repo, namespace, annotations={})
    elsewhere["spec"]["destination"]["server"] = "https://nobody-handed-this-over.invalid"
    make_app(elsewhere)

    # (an unknown cluster: Argo CD writes its condition and stops, no reconciledAt)
    status_when(argocd, theirs, lambda s: "InvalidSpecError" in [
        c["type"] for c in s.get("conditions", [])],
        "Argo CD's controller reconciled the other cluster's app")
    status = status_when(argocd, ours, compared(sha, "Synced"), "gitops-ray synced ours")
    assert status["operationState"]["phase"] == "Succeeded"
    assert ray_version(kube, namespace) == "2.9.0"
    log = argocd.workdir / "argocd-application-controller.log"
    eventually(lambda: CLUSTER_SKIPPED in log.read_text(errors="replace"),
               message="Argo CD's controller logged that it skips the handed-over cluster")

    # Argo CD's controller wrote the other app's status, and nothing of ours.
    argo_cd = _status_managers(kube, argocd, theirs) - {"tests"}
    assert argo_cd, "the other app's status has Argo CD's controller as a field manager"
    assert not argo_cd & _status_managers(kube, argocd, ours)
    assert controller_lines(argocd, ours) == []
    assert controller_lines(argocd, theirs) != []
