"""A whole cluster handed to gitops-ray, seen through the real argocd-server (issue 39).

The in-cluster cluster Secret of Argo CD's namespace carries ``gitops-ray.io/managed`` and
``argocd.argoproj.io/skip-reconcile`` (Argo CD >= 3.4 skips every Application of such a
cluster): gitops-ray reconciles an Application of that cluster that carries neither
annotation itself, and ``argocd app get`` shows the status it wrote.

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
from tests.argocd.applications import app_name
from tests.argocd.test_gitops_ray_e2e import (
    application,
    compared,
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
