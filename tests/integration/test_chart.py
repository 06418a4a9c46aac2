"""The Helm chart: lint-clean, renders with every values file, installs into the real API
server, and its RBAC lets the controller do its job and nothing more."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gitops_ray.kube import Kube
from gitops_ray.localcluster import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "gitops-ray"
VALUES = sorted((CHART / "ci").glob("*.yaml"))


def helm(helm_bin: Path, tmp: Path, *args: str, kubeconfig: Path | None = None) -> str:
    env = {**os.environ, "HOME": str(tmp), "XDG_CACHE_HOME": str(tmp / "cache"),
           "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_DATA_HOME": str(tmp / "data")}
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run([str(helm_bin), *args], env=env, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("values", [None, *VALUES], ids=lambda v: v.name if v else "default")
def test_lint_and_render(helm_bin: Path, tmp_path: Path, values: Path | None) -> None:
    extra = ["-f", str(values)] if values else []
    assert "0 chart(s) failed" in helm(helm_bin, tmp_path, "lint", str(CHART), *extra)
    docs = [d for d in yaml.safe_load_all(
        helm(helm_bin, tmp_path, "template", "gr", str(CHART), "-n", "gitops-ray", *extra)) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding", "ConfigMap",
            "Service"} <= kinds
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap"
                                 and "config.yaml" in d["data"])["data"]["config.yaml"])
    assert config["controlNamespace"] == "gitops-ray"
    assert config["leaderElection"]["enabled"] is (deployment["spec"]["replicas"] > 1)


def test_schema_rejects_typos(helm_bin: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    result = subprocess.run([str(helm_bin), "template", "gr", str(CHART), "--set",
                             "replicaCont=2"], env=env, capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0
    assert "replicaCont" in result.stderr


def _can(kube: Kube, sa: str, verb: str, resource: str, *, group: str = "",
         namespace: str = "", name: str = "") -> bool:
    review = kube.create({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": sa, "resourceAttributes": {
            "verb": verb, "group": group, "resource": resource, "namespace": namespace,
            "name": name}}}, field_manager="tests")
    return bool(review["status"].get("allowed"))


def _ns(kube: Kube, name: str) -> str:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
               field_manager="tests")
    return name


def test_install_and_rbac_cluster_wide(helm_bin: Path, tmp_path: Path, kube: Kube,
                                       control_plane: LocalControlPlane,
                                       namespace: str) -> None:
    helm(helm_bin, tmp_path, "install", "gr", str(CHART), "-n", namespace,
         "-f", str(CHART / "ci" / "ha-values.yaml"), "--set", "serviceMonitor.enabled=false",
         "--set", "rbac.createNamespaces=true", kubeconfig=control_plane.kubeconfig)
    assert kube.get("apps/v1", "Deployment", "gr-gitops-ray", namespace)["spec"]["replicas"] == 2
    sa = f"system:serviceaccount:{namespace}:gr-gitops-ray"
    other = _ns(kube, f"{namespace}-other")
    for verb in ("get", "list", "watch", "create", "patch", "delete"):
        assert _can(kube, sa, verb, "rayclusters", group="ray.io", namespace=other)
    assert _can(kube, sa, "create", "events", namespace=other)
    assert _can(kube, sa, "update", "leases", group="coordination.k8s.io", namespace=namespace)
    assert _can(kube, sa, "update", "configmaps", namespace=namespace)
    assert _can(kube, sa, "get", "secrets", namespace=namespace, name="acme-git")
    assert _can(kube, sa, "create", "namespaces")
    # ... and nothing more.
    assert not _can(kube, sa, "get", "secrets", namespace=namespace, name="other-secret")
    assert not _can(kube, sa, "list", "secrets", namespace=other)
    assert not _can(kube, sa, "delete", "pods", namespace=other)
    assert not _can(kube, sa, "update", "leases", group="coordination.k8s.io", namespace=other)
    assert not _can(kube, sa, "create", "clusterroles", group="rbac.authorization.k8s.io")
    assert not _can(kube, sa, "delete", "namespaces")


def test_install_and_rbac_namespaced(helm_bin: Path, tmp_path: Path, kube: Kube,
                                     control_plane: LocalControlPlane, namespace: str) -> None:
    prod, dev = _ns(kube, f"{namespace}-prod"), _ns(kube, f"{namespace}-dev")
    helm(helm_bin, tmp_path, "install", "gr", str(CHART), "-n", namespace,
         "--set", "rbac.clusterWide=false", "--set", f"rbac.namespaces={{{prod},{dev}}}",
         kubeconfig=control_plane.kubeconfig)
    sa = f"system:serviceaccount:{namespace}:gr-gitops-ray"
    assert _can(kube, sa, "patch", "rayclusters", group="ray.io", namespace=prod)
    assert _can(kube, sa, "delete", "configmaps", namespace=dev)
    assert not _can(kube, sa, "patch", "rayclusters", group="ray.io", namespace="default")
    assert not _can(kube, sa, "create", "namespaces")
    cms = {d["metadata"]["name"] for d in kube.list("v1", "ConfigMap", namespace)[0]}
    assert {"gr-gitops-ray", "instance-types", "patches"} <= cms
