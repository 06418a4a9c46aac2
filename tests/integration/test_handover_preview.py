"""``gitops-ray diff --argocd-app NS/NAME`` (issue 39): preview a hand-over before it happens.

An Application in the cluster (Argo CD's CRD, the test namespace as Argo CD's, its
AppProject ``default``), not handed over, read by the CLI: its first sync's diff on
stdout, each field gitops-ray would not honour on stderr, and exit code 2 when there is
one (1 when there are only differences).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitops_ray.kube import Kube
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.integration.test_argocd_apps import OPEN, application, appproject, rayclusters


def create(kube: Kube, namespace: str, repo: GitRepo, name: str, **spec: Any) -> None:
    app = application(name, repo, namespace, annotations={})
    app["spec"].update(spec)
    kube.create(app, field_manager="tests")


@pytest.mark.usefixtures("argocd_crds")
def test_the_preview_lists_what_gitops_ray_would_not_honour(
        kube: Kube, namespace: str, git_repo: GitRepo, cli: Cli) -> None:
    git_repo.commit(rayclusters("2.9.0", namespace))
    appproject(kube, namespace, "default", OPEN)
    create(kube, namespace, git_repo, "risky",
           syncPolicy={"automated": {}, "retry": {"limit": 3},
                       "managedNamespaceMetadata": {"labels": {"team": "ray"}}})
    create(kube, namespace, git_repo, "clean")

    result = cli("diff", "--argocd-app", f"{namespace}/risky")
    assert result.exit_code == 2, result.output
    assert "kind: RayCluster" in result.stdout and "+  name: demo" in result.stdout
    assert "app risky: not honoured after the hand-over: Application " \
           f"{namespace}/risky: spec.syncPolicy.retry is ignored" in result.stderr
    assert "spec.syncPolicy.managedNamespaceMetadata is ignored (namespace metadata is " \
           "not managed" in result.stderr

    clean = cli("diff", "--argocd-app", f"{namespace}/clean")
    assert clean.exit_code == 1, clean.output  # differences only: the RayCluster is new
    assert "app clean: gitops-ray honours every field of it" in clean.stderr

    report = json.loads(cli("diff", "-o", "json", "--argocd-app", f"{namespace}/risky",
                            "--argocd-app", f"{namespace}/clean").stdout)
    fields = {entry["app"]: entry["notHonoured"] for entry in report}
    assert len(fields["risky"]) == 2 and fields["clean"] == []
    assert kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace) is None


def test_an_unknown_application_is_an_error(namespace: str, cli: Cli) -> None:
    result = cli("diff", "--argocd-app", f"{namespace}/nothing")
    assert result.exit_code == 2
    assert f"Application {namespace}/nothing not found" in result.output
    assert cli("diff", "--argocd-app", "no-slash").exit_code == 2
