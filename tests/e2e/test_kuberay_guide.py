"""The KubeRay guide "Deploying Ray clusters with Argo CD", its three Applications as written.

Only the URLs point at local servers: a git repository holding ``helm-chart/`` (the CRDs
directory and an operator chart) tagged ``v1.5.1``, and a static Helm repository built
with ``helm package`` + ``helm repo index`` (what GitHub Pages serves for kuberay-helm),
holding the project's RayCluster-shaped chart (``tests/testdata/charts/ray-cluster``). On
the real stack (API server, scheduler, kwok nodes, the KubeRay operator): the CRDs app
syncs with ``Replace=true``, the operator app with ``helm.skipCrds`` and its Deployment
becomes available, the RayCluster app from the Helm repository syncs three worker groups
that the operator reports ready, ``gitops-ray wait --sync --health`` agrees, and the
autoscaler's ``replicas`` survive a sync and a self-heal pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.sync.tracking import TRACKING_ANNOTATION
from localcluster import LocalControlPlane
from localcluster.crds import ray_crds
from tests.chartservers import Served, helm_repository, serve_directory
from tests.e2e.raycluster import live_status, operator_ready, wait
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, metric_value

TIMEOUT = 180.0
CHART = Path(__file__).resolve().parents[1] / "testdata" / "charts" / "ray-cluster"
CLUSTER = "raycluster-kuberay"

OPERATOR_CHART = {
    "helm-chart/kuberay-operator/Chart.yaml": (
        "apiVersion: v2\nname: kuberay-operator\nversion: 1.5.1\nappVersion: v1.5.1\n"),
    "helm-chart/kuberay-operator/values.yaml": (
        "image:\n  repository: quay.io/kuberay/operator\n  tag: v1.5.1\n"),
    "helm-chart/kuberay-operator/templates/deployment.yaml": """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app.kubernetes.io/name: kuberay-operator}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: kuberay-operator}
  template:
    metadata:
      labels: {app.kubernetes.io/name: kuberay-operator}
    spec:
      serviceAccountName: {{ .Release.Name }}
      containers:
        - name: kuberay-operator
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
""",
}


def guide_applications(git_url: str, chart_url: str, namespace: str) -> list[dict[str, Any]]:
    """The guide's three Applications; only repoURL and the namespace are ours."""
    destination = {"server": "https://kubernetes.default.svc", "namespace": namespace}
    automated = {"automated": {"prune": True, "selfHeal": True}}
    return [
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
         "metadata": {"name": "ray-operator-crds", "namespace": "argocd"},
         "spec": {"project": "default", "destination": destination,
                  "source": {"repoURL": git_url, "targetRevision": "v1.5.1",
                             "path": "helm-chart/kuberay-operator/crds"},
                  "syncPolicy": {"syncOptions": ["Replace=true"], **automated}}},
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
         "metadata": {"name": "ray-operator", "namespace": "argocd"},
         "spec": {"project": "default", "destination": destination,
                  "source": {"repoURL": git_url, "targetRevision": "v1.5.1",
                             "path": "helm-chart/kuberay-operator",
                             "helm": {"skipCrds": True}},
                  "syncPolicy": {"syncOptions": ["CreateNamespace=true"], **automated}}},
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
         "metadata": {"name": "raycluster", "namespace": "argocd"},
         "spec": {"project": "default", "destination": destination,
                  "ignoreDifferences": [{"group": "ray.io", "kind": "RayCluster",
                                         "jqPathExpressions": [
                                             ".spec.workerGroupSpecs[].replicas"]}],
                  "source": {"repoURL": chart_url, "chart": "ray-cluster",
                             "targetRevision": "1.5.1",
                             "helm": {"releaseName": "raycluster", "valuesObject": VALUES}},
                  "syncPolicy": {"syncOptions": ["CreateNamespace=true",
                                                 "ServerSideApply=true"], **automated}}},
    ]


VALUES: dict[str, Any] = {
    "nameOverride": "kuberay",
    "image": {"tag": "2.52.0"},
    "head": {"rayStartParams": {"num-cpus": "0"}, "enableInTreeAutoscaling": True,
             "autoscalerOptions": {"version": "v2", "upscalingMode": "Default",
                                   "idleTimeoutSeconds": 600}},
    "worker": {"groupName": "standard-worker", "replicas": 1, "minReplicas": 1,
               "maxReplicas": 200,
               "rayStartParams": {"resources": '"{\\"standard-worker\\": 1}"'},
               "resources": {"requests": {"cpu": "1", "memory": "1G"}}},
    "additionalWorkerGroups": {
        name: {"disabled": False, "replicas": 1, "minReplicas": 1, "maxReplicas": 30,
               "rayStartParams": {"resources": f'"{{\\"{name}\\": 1}}"'},
               "resources": {"requests": {"cpu": "1", "memory": "1G"}}}
        for name in ("additional-worker-group1", "additional-worker-group2")},
}


@pytest.fixture
def chart_repo(helm_bin: Path, tmp_path: Path) -> Iterator[Served]:
    repo = helm_repository(helm_bin, tmp_path / "helmrepo", CHART, versions=("1.5.0", "1.5.1"))
    with serve_directory(repo.parent) as served:
        yield served


def crd_files() -> dict[str, str]:
    return {f"helm-chart/kuberay-operator/crds/{crd['metadata']['name']}.yaml":
            yaml.safe_dump(crd) for crd in ray_crds()}


def groups(kube: Kube, namespace: str) -> dict[str, int]:
    live = kube.get(RC_API, "RayCluster", name=CLUSTER, namespace=namespace) or {}
    return {g["groupName"]: g.get("replicas", 0)
            for g in live.get("spec", {}).get("workerGroupSpecs", [])}


@pytest.mark.timeout(900)  # three apps, a 3 MB CRD directory and the operator, on a slow machine
def test_the_kuberay_guide_applications_as_written(
        start_controller: Callable[..., Controller], git_repo: GitRepo, chart_repo: Served,
        kube: Kube, namespace: str, control_plane: LocalControlPlane, helm_bin: Path,
        tmp_path: Path) -> None:
    apps = guide_applications(git_repo.url, chart_repo.url, namespace)
    git_repo.commit({**OPERATOR_CHART, **crd_files(),
                     **{f"apps/{a['metadata']['name']}.yaml": a for a in apps}})
    git_repo.git("tag", "v1.5.1")
    git_repo.git("push", "-q", "origin", "v1.5.1")
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           interval="2s")

    def state(name: str) -> tuple[str, str, str]:
        status = ctl.status(name)
        return (str(status.get("sync")), str(status.get("health")), str(status.get("error")))

    for name in ("ray-operator-crds", "ray-operator", "raycluster"):
        wait(lambda n=name: state(n)[0] == "Synced", lambda n=name: state(n), TIMEOUT,
             f"{name} Synced")
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                   name="rayclusters.ray.io")
    assert crd is not None and TRACKING_ANNOTATION in crd["metadata"]["annotations"]
    deployment = eventually(lambda: (d := kube.get("apps/v1", "Deployment",
                                                   name="ray-operator", namespace=namespace))
                            and d.get("status", {}).get("availableReplicas") == 1 and d,
                            TIMEOUT, "the operator's Deployment available")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("v1.5.1")

    assert groups(kube, namespace) == {"standard-worker": 1, "additional-worker-group1": 1,
                                       "additional-worker-group2": 1}
    assert ctl.status("raycluster")["revision"] == "1.5.1"
    wait(lambda: operator_ready(kube, namespace, CLUSTER),
         lambda: live_status(kube, namespace, CLUSTER), TIMEOUT, "the operator: ready")
    cli = ["--kubeconfig", str(control_plane.kubeconfig), "--control-namespace", namespace]
    waited = CliRunner().invoke(main, ["wait", *cli, "--sync", "--health", "--timeout",
                                       str(TIMEOUT), "raycluster", "ray-operator"])
    assert waited.exit_code == 0, waited.output

    # The autoscaler scales a group; a sync and a self-heal pass keep its replicas.
    kube.patch(RC_API, "RayCluster", name=CLUSTER, namespace=namespace,
               patch=[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                       "value": 3}],
               content_type="application/json-patch+json", field_manager="autoscaler")
    synced = CliRunner().invoke(main, [
        "sync", *cli, "--cache-dir", str(tmp_path / "cli-cache"), "--helm", str(helm_bin),
        "--repo", git_repo.url, "--apps", "apps", "--app", "raycluster"], catch_exceptions=False)
    assert synced.exit_code == 0, synced.output
    before = len(ctl.status("raycluster").get("history") or [])
    series = 'gitops_ray_reconcile_total{app="raycluster",result="success"}'
    passes = metric_value(ctl.metrics(), series)
    eventually(lambda: metric_value(ctl.metrics(), series) >= passes + 2, TIMEOUT,
               "two more refreshes (self-heal passes: selfHeal is on)")
    assert ctl.status("raycluster").get("sync") == "Synced"
    assert groups(kube, namespace)["standard-worker"] == 3
    assert len(ctl.status("raycluster").get("history") or []) == before  # no revert sync
    got = CliRunner().invoke(main, ["get", *cli, "raycluster", "-o", "json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.output)["revision"] == "1.5.1"
