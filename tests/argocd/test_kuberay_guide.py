"""The KubeRay guide's three Applications in ``--argocd`` mode, driven through argocd-server.

The same Applications as ``tests/e2e/test_kuberay_guide.py`` (URLs pointed at a local git
repository tagged ``v1.5.1`` and a local Helm repository), created in Argo CD's namespace
with the opt-in annotations, synced with ``argocd app sync`` and waited on with
``argocd app wait`` through the real argocd-server, which resolves each revision through
its repo-server. The Helm repository wants basic auth: its credentials are an Argo CD
repository Secret, which argocd-server's repo-server and gitops-ray both use. This tier
runs no KubeRay operator and no nodes, so health is not asked for here (the e2e tier
shows the operator's view of the same RayCluster).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.test_gitops_ray_e2e import OURS, app_status, cli_ok
from tests.chartservers import Served, helm_repository, serve_directory
from tests.e2e.test_kuberay_guide import (
    CHART,
    CLUSTER,
    OPERATOR_CHART,
    crd_files,
    groups,
    guide_applications,
)
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller

PASSWORD = "guide-pa55"


@pytest.fixture
def chart_repo(helm_bin: Path, tmp_path: Path) -> Iterator[Served]:
    repo = helm_repository(helm_bin, tmp_path / "helmrepo", CHART, versions=("1.5.1",))
    with serve_directory(repo.parent, username="guide", password=PASSWORD) as served:
        yield served


@pytest.mark.usefixtures("argocd_repo_server")
def test_the_guide_synced_and_waited_on_through_argocd_server(
        argocd: ArgoCD, gitops_ray: Controller, make_app: Callable[[Manifest], Manifest],
        git_repo: GitRepo, chart_repo: Served, kube: Kube, namespace: str) -> None:
    git_repo.commit({**OPERATOR_CHART, **crd_files()})
    git_repo.git("tag", "v1.5.1")
    git_repo.git("push", "-q", "origin", "v1.5.1")
    secret = kube.create({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "guide-charts", "namespace": argocd.namespace,
                     "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "stringData": {"type": "helm", "name": "guide", "url": chart_repo.url,
                       "username": "guide", "password": PASSWORD}}, field_manager="tests")
    try:
        for app in guide_applications(git_repo.url, chart_repo.url, namespace):
            app["metadata"].update(namespace=argocd.namespace, annotations=OURS)
            del app["spec"]["syncPolicy"]["automated"]  # synced by argocd app sync below
            make_app(app)
        for name in ("ray-operator-crds", "ray-operator", "raycluster"):
            cli_ok(argocd, "app", "sync", name, "--timeout", "150")
            cli_ok(argocd, "app", "wait", name, "--sync", "--timeout", "150")
        status = app_status(argocd, "raycluster")
        assert status["sync"]["status"] == "Synced"
        assert status["sync"]["revision"] == "1.5.1"
        assert status["history"][-1]["revision"] == "1.5.1"
        assert groups(kube, namespace) == {"standard-worker": 1, "additional-worker-group1": 1,
                                           "additional-worker-group2": 1}
        listed = json.loads(cli_ok(argocd, "app", "get", "raycluster", "-o", "json"))
        assert listed["spec"]["source"]["chart"] == "ray-cluster"
        eventually(lambda: kube.get("apps/v1", "Deployment", name="ray-operator",
                                    namespace=namespace), message="the operator's Deployment")
        assert kube.get("ray.io/v1", "RayCluster", name=CLUSTER, namespace=namespace)
    finally:
        kube.delete("v1", "Secret", name=secret["metadata"]["name"],
                    namespace=argocd.namespace)
    assert PASSWORD not in json.dumps(app_status(argocd, "raycluster"))
