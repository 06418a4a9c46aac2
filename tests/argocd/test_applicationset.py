"""ApplicationSets whose template opts the Applications in: gitops-ray syncs what Argo CD made.

The real ``argocd-applicationset-controller`` (v3.6.1) runs out of cluster (fixture
``argocd_applicationset_controller``); a ``list`` generator needs no repo-server. Its
template carries gitops-ray's two annotations, so every Application it generates is
skipped by Argo CD's application controller and reconciled by gitops-ray (fixture
``gitops_ray``), which syncs each one from its real git repository.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import app_name
from tests.argocd.test_gitops_ray_e2e import OURS, app_status, manifests, ray_version
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller

APP_API = "argoproj.io/v1alpha1"


def applicationset(name: str, repo: GitRepo, namespace: str, elements: list[str]) -> Manifest:
    """A list generator, one Application per element (its path in the repo)."""
    return {
        "apiVersion": APP_API, "kind": "ApplicationSet",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "goTemplate": True,
            "generators": [{"list": {"elements": [{"cluster": e} for e in elements]}}],
            "template": {
                "metadata": {"name": f"{name}-{{{{.cluster}}}}", "annotations": dict(OURS)},
                "spec": {
                    "project": "default",
                    "source": {"repoURL": repo.url, "targetRevision": "HEAD",
                               "path": "{{.cluster}}"},
                    "destination": {"server": "https://kubernetes.default.svc",
                                    "namespace": namespace},
                    "syncPolicy": {"automated": {"prune": True}}}}}}


@pytest.fixture
def make_appset(kube: Kube, argocd: ArgoCD) -> Iterator[Callable[[Manifest], None]]:
    made: list[str] = []

    def make(manifest: Manifest) -> None:
        kube.create(manifest, field_manager="tests")
        made.append(str(manifest["metadata"]["name"]))

    yield make
    for name in made:
        kube.delete(APP_API, "ApplicationSet", name=name, namespace=argocd.namespace)
        # Its Applications would go with it (ownerReferences), but the garbage collector
        # picks up kinds installed after it started only at its next discovery resync.
        for app in kube.list(APP_API, "Application", argocd.namespace)[0]:
            if any(o.get("kind") == "ApplicationSet" and o.get("name") == name
                   for o in app["metadata"].get("ownerReferences") or ()):
                kube.delete(APP_API, "Application", name=app["metadata"]["name"],
                            namespace=argocd.namespace)


def test_applications_generated_by_an_applicationset_are_synced_by_gitops_ray(
        argocd_applicationset_controller: ArgoCD, kube: Kube, namespace: str,
        git_repo: GitRepo, gitops_ray: Controller,
        make_appset: Callable[[Manifest], None]) -> None:
    argocd = argocd_applicationset_controller
    files = {f"{group}/{k.split('/', 1)[1]}": v
             for group, rcs in (("east", {"east": "2.9.0"}), ("west", {"west": "2.10.0"}))
             for k, v in manifests(namespace, **rcs).items()}
    sha = git_repo.commit(files)
    name = app_name("set")
    make_appset(applicationset(name, git_repo, namespace, ["east", "west"]))

    for element, version in (("east", "2.9.0"), ("west", "2.10.0")):
        eventually(lambda e=element, v=version: ray_version(kube, namespace, e) == v,
                   message=f"the RayCluster of {name}-{element} synced")
        status = eventually(lambda e=element: (s := app_status(argocd, f"{name}-{e}")).get(
            "sync", {}).get("status") == "Synced" and s, message="Synced status")
        assert status["sync"]["revision"] == sha
        app = kube.get(APP_API, "Application", name=f"{name}-{element}",
                       namespace=argocd.namespace)
        assert app is not None
        [owner] = app["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("ApplicationSet", name)
