"""Features wired through their seams: from what the user writes to what the cluster shows.

Each test starts at the user's input (a chart in git, an Event the operator posts) and
ends at the observable effect (a live object, a recorded health), with the real API
server, real git and the real helm in between.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Capabilities, Kube
from gitops_ray.reconcile import facts as facts_module
from gitops_ray.reconcile.pipeline import Pipeline, RenderTools
from gitops_ray.render import application_from_flags
from gitops_ray.render.apps import Application
from gitops_ray.source import GitSource
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.samples import raycluster

CAPABILITIES_CHART = {
    "chart/Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
    "chart/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
        "  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        "  hasRayApi: {{ .Capabilities.APIVersions.Has \"ray.io/v1\" | quote }}\n"
        "  hasRayClusterKind: {{ .Capabilities.APIVersions.Has \"ray.io/v1/RayCluster\""
        " | quote }}\n"
        "  hasMadeUpApi: {{ .Capabilities.APIVersions.Has \"made.up/v9\" | quote }}\n"),
}


def test_helm_capabilities_come_from_the_target_cluster(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, helm_bin: Path) -> None:
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
           "metadata": {"name": "caps", "namespace": "argocd"},
           "spec": {"destination": {"namespace": namespace},
                    "source": {"repoURL": git_repo.url, "path": "chart",
                               "targetRevision": "main"}}}
    git_repo.commit({**CAPABILITIES_CHART, "apps/caps.yaml": yaml.safe_dump(app)})
    result = CliRunner().invoke(main, [
        "sync", "--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
        namespace, "--cache-dir", str(tmp_path / "cache"), "--helm", str(helm_bin),
        "--repo", git_repo.url, "--apps", "apps"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    live = kube.get("v1", "ConfigMap", name="caps", namespace=namespace)
    assert live is not None
    server = kube.call("GET", "/version")["gitVersion"]
    assert live["data"] == {"kubeVersion": server, "hasRayApi": "true",
                            "hasRayClusterKind": "true", "hasMadeUpApi": "false"}


def test_capabilities_due_are_refreshed_once_while_the_workers_go_on(
        kube: Kube, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight workers find the cluster's facts due at once: one asks the API server, the
    others render with the last facts meanwhile (they all asked, 24 requests, before)."""
    pipeline = Pipeline(kube, GitSource(tmp_path / "cache"), RecordStore(kube, namespace))
    first = pipeline.capabilities()
    asked, others_done = [], threading.Event()
    real = kube.capabilities

    def slow_capabilities() -> Capabilities:
        asked.append(1)
        assert others_done.wait(60)  # the other workers return while this one asks
        return real()

    monkeypatch.setattr(kube, "capabilities", slow_capabilities)
    monkeypatch.setattr(facts_module, "CAPABILITIES_TTL", 0.0)  # due from now on
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        refreshing = pool.submit(pipeline.capabilities)
        eventually(lambda: asked == [1])
        others = [pool.submit(pipeline.capabilities) for _ in range(7)]
        assert [f.result(timeout=60) for f in others] == [first] * 7
        others_done.set()
        assert refreshing.result(timeout=60) == first
    assert asked == [1]


def test_only_a_chart_asks_for_the_clusters_apis(
        kube: Kube, namespace: str, git_repo: GitRepo, tmp_path: Path, helm_bin: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Helm's ``.Capabilities`` are asked of the API server for a chart's render and its
    reuse; a plain directory's render never depends on them, so reusing it asks nothing
    (a no-op cycle of plain apps sent discovery requests whenever they came due)."""
    git_repo.commit({**CAPABILITIES_CHART, "plain/cm.yaml": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}})
    pipeline = Pipeline(kube, GitSource(tmp_path / "cache"), RecordStore(kube, namespace),
                        tools=RenderTools(helm_bin=str(helm_bin)))
    plain = application_from_flags(name="plain", repo_url=git_repo.url, path="plain",
                                   dest_namespace=namespace)
    chart = application_from_flags(name="chart", repo_url=git_repo.url, path="chart",
                                   dest_namespace=namespace)
    monkeypatch.setattr(facts_module, "CAPABILITIES_TTL", 0.0)  # always due

    def discovery_after(app: Application) -> int:
        before = kube.stats[("discovery", 200)]
        pipeline.desired(app)
        return kube.stats[("discovery", 200)] - before

    assert [discovery_after(plain), discovery_after(plain)] == [0, 0]
    assert discovery_after(chart) > 0  # its render
    assert discovery_after(chart) > 0  # its reuse checks the APIs it was rendered with


def rejection_event(live: dict, message: str) -> dict:
    """The Warning the KubeRay operator posts when it rejects a spec (and writes no status)."""
    meta = live["metadata"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.rejected", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                               "name": meta["name"], "namespace": meta["namespace"],
                               "uid": meta["uid"]},
            "type": "Warning", "reason": "InvalidRayClusterSpec", "message": message,
            "source": {"component": "raycluster-controller"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1}


def test_a_rejected_raycluster_is_degraded_with_the_operators_reason(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("bad")})
    controller = start_controller({"applications": [
        application("rejected", git_repo.url, namespace)]})
    eventually(lambda: controller.status("rejected").get("health") == "Progressing",
               message="synced, waiting for the operator")
    live = controller.live("bad")
    assert live is not None
    kube.create(rejection_event(live, "workerGroupSpecs[0]: maxReplicas must be >= "
                                      "minReplicas"), field_manager="tests")
    # The Event alone (the RayCluster does not change) turns the app Degraded.
    eventually(lambda: controller.status("rejected").get("health") == "Degraded",
               message="Degraded from the operator's Event")
    message = controller.status("rejected")["healthMessage"]
    assert "InvalidRayClusterSpec" in message and "maxReplicas" in message
