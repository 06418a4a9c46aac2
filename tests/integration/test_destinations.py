"""An app meant for another cluster is refused, never synced into this one.

gitops-ray syncs only the cluster it is connected to. Before this test, an Application
whose ``destination.name``/``server`` named another cluster was synced here with a
warning: a ConfigMap meant for cluster ``far`` landed in the local cluster. Now the app
gets Argo CD's ``InvalidSpecError`` condition and nothing is applied, with or without
AppProjects, from the controller and from the CLI; its neighbours sync as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.conftest import GitRepo
from tests.integration.test_cli_sync import Cli, configmap
from tests.integration.test_controller import Controller, application, start_controller

__all__ = ["start_controller"]
from tests.waiting import eventually

REMOTE = [{"name": "far"}, {"server": "https://far.example:6443"}]


def remote_app(name: str, repo: str, namespace: str, destination: dict[str, str]
               ) -> dict[str, Any]:
    app = application(name, repo, namespace, path=name)
    app["spec"]["destination"] = {**destination, "namespace": namespace}
    return app


@pytest.mark.parametrize("destination", REMOTE, ids=["name", "server"])
def test_the_controller_refuses_another_cluster_and_syncs_the_rest(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, destination: dict[str, str]) -> None:
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace, destination),
                     "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
                     "far/cm.yaml": configmap("for-far"), "here/cm.yaml": configmap("for-here")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: kube.get("v1", "ConfigMap", name="for-here", namespace=namespace),
               message="the in-cluster app synced")
    status = eventually(lambda: ctl.status("far").get("conditions"), message="a condition")
    assert status[0]["type"] == "InvalidSpecError"
    assert "is not the cluster gitops-ray syncs to" in status[0]["message"]
    assert ctl.status("far")["sync"] == "Unknown"
    assert kube.get("v1", "ConfigMap", name="for-far", namespace=namespace) is None


def test_the_cli_refuses_another_cluster(control_plane: LocalControlPlane, kube: Kube,
                                         namespace: str, git_repo: GitRepo,
                                         tmp_path: Path) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace, REMOTE[0]),
                     "far/cm.yaml": configmap("for-far")})
    result = cli.sync("--repo", git_repo.url, "--apps", "apps")
    assert result.exit_code != 0
    assert "InvalidSpecError" in result.output and "'far'" in result.output
    assert kube.get("v1", "ConfigMap", name="for-far", namespace=namespace) is None
    diff = cli("diff", *cli.kube_args, "--cache-dir", str(cli.cache), "--repo", git_repo.url,
               "--apps", "apps", "-o", "json")
    (shown,) = json.loads(diff.stdout)
    assert (diff.exit_code, shown["status"], shown["resources"]) == (2, "Unknown", [])
    assert shown["conditions"][0]["type"] == "InvalidSpecError"
