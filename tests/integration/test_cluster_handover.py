"""Handing a whole cluster to gitops-ray (issue 39): the two annotations on its cluster Secret.

Argo CD >= 3.4 skips every Application whose destination cluster's Secret carries
``argocd.argoproj.io/skip-reconcile: "true"``; with ``gitops-ray.io/managed: "true"`` on
the same Secret, gitops-ray (``argocd.enabled``) takes every such Application, annotated
or not. The real API server with Argo CD's CRDs; the test namespace plays Argo CD's, and
its cluster Secret describes our own cluster (``https://kubernetes.default.svc``), as an
Argo CD installation's in-cluster Secret does.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from gitops_ray.types import MANAGED_ANNOTATION, SKIP_RECONCILE_ANNOTATION
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.integration.test_argocd_apps import (
    APP_API,
    RC_API,
    Start,
    app_object,
    application,
    rayclusters,
    start,
    status_when,
    sync_is,
)

HANDED_OVER = {MANAGED_ANNOTATION: "true", SKIP_RECONCILE_ANNOTATION: "true"}


def in_cluster_secret(namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    data = {"name": "in-cluster", "server": "https://kubernetes.default.svc",
            "config": json.dumps({"tlsClientConfig": {"insecure": False}})}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "cluster-in-cluster", "namespace": namespace,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster"},
                         "annotations": annotations},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def elsewhere(name: str, repo: GitRepo, namespace: str) -> dict[str, Any]:
    app = application(name, repo, namespace, annotations={})
    app["spec"]["destination"] = {"server": "https://gpu.example", "namespace": namespace}
    return app


@pytest.mark.usefixtures("argocd_crds")
def test_a_cluster_secret_with_both_annotations_hands_every_app_of_it_over(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    sha = git_repo.commit(rayclusters("2.9.0", namespace))
    kube.apply(in_cluster_secret(namespace, HANDED_OVER), field_manager="tests", force=True)
    kube.create(application("plain", git_repo, namespace, annotations={}),
                field_manager="tests")  # no annotation of its own
    kube.create(elsewhere("other", git_repo, namespace), field_manager="tests")
    start(start_controller, kube, namespace)
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace),
               message="the app of the handed-over cluster is synced")
    obj = status_when(kube, namespace, "plain", sync_is("Synced"), "its status written")
    assert obj["status"]["sync"]["revision"] == sha
    assert "status" not in app_object(kube, namespace, "other")  # another cluster's app

    kube.apply(in_cluster_secret(namespace, {SKIP_RECONCILE_ANNOTATION: "true"}),
               field_manager="tests", force=True)  # half: not handed over any more
    eventually(lambda: "plain" not in RecordStore(kube, namespace).list_apps(),
               message="the app handed back: gitops-ray's record goes")
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is not None
    assert kube.get(APP_API, "Application", name="plain", namespace=namespace) is not None
