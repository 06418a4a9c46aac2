"""The controller as the Helm chart's ServiceAccount, with exactly the RBAC the chart renders.

Why: the chart once granted less than the controller used (it read the control Namespace
before its first record), so every refresh failed with ``forbidden`` in any real install,
while every other test ran as cluster-admin. Here ``helm template`` renders the chart (the
default ``clusterWide: true``, and ``clusterWide: false`` with one team namespace); its
ServiceAccount, RBAC and ConfigMaps are applied as rendered; and the real controller
process runs with a token of that ServiceAccount and the ``config.yaml`` from the
rendered ConfigMap. There is no kubelet, so the local process stands in for the
Deployment's pod (the flags it adds only pick free local ports and a cache directory).

It must sync a RayCluster app, heal a manual edit (selfHeal), prune what left git,
announce each write with an Event (on the object, and on the app's record), and, in the
HA setup, hold the Lease, with no request denied on the way except the cluster-wide
watches it is designed to fall back from (debug logging shows even the denied Events,
which are otherwise best-effort and silent). And the same token must not be
able to write ConfigMaps in ``kube-system``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gitops_ray.kube import Forbidden, Invalid, Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.runtime.shards import GROUP_LABEL
from gitops_ray.sync.records import record_name
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import (
    SECRET,
    ControllerProcess,
    StartController,
    service_account_kubeconfig,
)
from tests.harness.runtime import application
from tests.integration.test_chart import CHART, _can, helm
from tests.samples import raycluster

RC_API = "ray.io/v1"
APPLIED_KINDS = {"ServiceAccount", "ConfigMap", "Role", "RoleBinding", "ClusterRole",
                 "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding",
                 "NetworkPolicy"}  # validated by the API server (no network plugin enforces it)
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding"}
REPLACED_KINDS = {"Deployment", "Service",  # the local process stands in for the pod
                  "PodDisruptionBudget"}  # so there is no pod for a budget to guard
# Requests the controller makes on purpose and handles: a kind is first watched
# cluster-wide and, where RBAC says no, per namespace (gitops_ray/runtime/watches.py).
EXPECTED_DENIALS = {"watch_forbidden"}


@pytest.fixture
def team(extra_namespace: Callable[[str], str]) -> str:
    """The apps' destination namespace (the control namespace is ``namespace``)."""
    return extra_namespace("team")


@pytest.fixture
def rendered(kube: Kube) -> Iterator[Callable[..., list[dict[str, Any]]]]:
    """Apply what ``helm template`` renders (minus Deployment/Service); clean up after."""
    applied: list[dict[str, Any]] = []

    def apply(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unknown = {d["kind"] for d in docs} - APPLIED_KINDS - REPLACED_KINDS
        assert not unknown, f"the chart renders {unknown}: apply them here, or say why not"
        for doc in docs:
            if doc["kind"] in APPLIED_KINDS:
                applied.append(kube.apply(doc, field_manager="helm-template-test"))
        return applied

    yield apply
    for obj in applied:
        if obj["kind"] in CLUSTER_KINDS:
            kube.delete(obj["apiVersion"], obj["kind"], name=obj["metadata"]["name"])


def _template(helm_bin: Path, tmp: Path, release: str, namespace: str,
              *values: str) -> list[dict[str, Any]]:
    text = helm(helm_bin, tmp, "template", release, str(CHART), "-n", namespace, *values)
    return [d for d in yaml.safe_load_all(text) if d]


def _as_chart(helm_bin: Path, tmp: Path, kube: Kube, control_plane: LocalControlPlane,
              namespace: str, rendered: Callable[..., list[dict[str, Any]]],
              *values: str) -> tuple[str, Path, dict[str, Any]]:
    """Apply the chart's RBAC as rendered with ``values``: (ServiceAccount name, a
    kubeconfig with its token, the controller settings of the rendered ConfigMap)."""
    release = f"r{secrets.token_hex(3)}"  # cluster-scoped names must not collide
    docs = _template(helm_bin, tmp, release, namespace, *values,
                     "--set", "config.log.level=debug")
    rendered(docs)
    sa_name = f"{release}-gitops-ray"
    kubeconfig = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                            name=sa_name, path=tmp / "sa.kubeconfig")
    config = next(d for d in docs if d["kind"] == "ConfigMap"
                  and "config.yaml" in d["data"])["data"]["config.yaml"]
    return sa_name, kubeconfig, yaml.safe_load(config)


def _webhook(ctl: ControllerProcess, repo: GitRepo, sha: str) -> None:
    body = json.dumps({"ref": "refs/heads/main", "after": sha,
                       "repository": {"clone_url": repo.url, "default_branch": "main"}}
                      ).encode()
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    response = requests.post(ctl.webhook_url, data=body, timeout=10, headers={
        "X-GitHub-Event": "push", "Content-Type": "application/json",
        "X-Hub-Signature-256": f"sha256={digest}"})
    assert response.status_code == 202, response.text


def _denials(ctl: ControllerProcess) -> list[dict[str, Any]]:
    """Log records that report a request RBAC refused (other than the designed fallbacks)."""
    return [r for r in ctl.records()
            if "forbidden" in json.dumps(r).lower() and r.get("event") not in EXPECTED_DENIALS]


def _ray_version(kube: Kube, namespace: str, name: str) -> str | None:
    live = kube.get(RC_API, "RayCluster", name=name, namespace=namespace)
    return live["spec"]["rayVersion"] if live else None


def _events(kube: Kube, namespace: str, name: str) -> set[str]:
    items, _ = kube.list("v1", "Event", namespace)
    return {e["reason"] for e in items if e["involvedObject"].get("name") == name
            and (e.get("source") or {}).get("component") == "gitops-ray"}


@pytest.mark.parametrize("variant", ["cluster-wide", "namespaced"])
def test_chart_service_account_syncs_heals_and_prunes(
        variant: str, helm_bin: Path, tmp_path: Path, kube: Kube,
        control_plane: LocalControlPlane, namespace: str, team: str, git_repo: GitRepo,
        rendered: Callable[..., list[dict[str, Any]]],
        controller_process: StartController) -> None:
    # cluster-wide runs as the chart's HA setup (leader election on, so the Lease too), its
    # Pods read in the apps' namespace only (rbac.namespaces)
    rbac = (["--set", "replicaCount=2", "--set", f"rbac.namespaces={{{team}}}"]
            if variant == "cluster-wide" else
            ["--set", "rbac.clusterWide=false", "--set", f"rbac.namespaces={{{team}}}"])
    sa_name, kubeconfig, config = _as_chart(
        helm_bin, tmp_path, kube, control_plane, namespace, rendered, *rbac,
        "--set", f"config.appSources[0].repo={git_repo.url}",
        "--set", "config.appSources[0].path=apps")

    rc = raycluster("rc")
    git_repo.commit({"apps/app.yaml": application("app", git_repo.url, team, self_heal=True),
                     "manifests/rc.yaml": rc})
    ctl = controller_process("chart-sa", config,
                             env={"GITOPS_RAY_KUBECONFIG": str(kubeconfig)},
                             args=(f"--helm={helm_bin}",))

    # sync
    eventually(lambda: _ray_version(kube, team, "rc") == "2.52.0", timeout=120,
               message="first sync as the chart's ServiceAccount")
    eventually(lambda: "SyncSucceeded" in _events(kube, namespace, record_name("app")),
               message="the app's Event in the control namespace")
    if variant == "cluster-wide":  # the only replica holds its membership and every shard
        leases, _ = kube.list(LEASE_API, "Lease", namespace,
                              label_selector=f"{GROUP_LABEL}={sa_name}")
        assert {lease["metadata"]["name"] for lease in leases} >= {f"{sa_name}-member-chart-sa",
                                                                   f"{sa_name}-shard-0"}
        assert {lease["spec"]["holderIdentity"] for lease in leases} == {"chart-sa"}
    # heal: a manual edit is reverted through the watch
    kube.patch(RC_API, "RayCluster", name="rc",
               namespace=team, patch={"spec": {"rayVersion": "2.0.0"}},
               content_type="application/merge-patch+json", field_manager="kubectl-edit")
    eventually(lambda: _ray_version(kube, team, "rc") == "2.52.0", message="self-heal")
    eventually(lambda: "ResourceConfigured" in _events(kube, team, "rc"), message="Event")
    # prune: the RayCluster leaves git
    sha = git_repo.commit({"manifests/rc.yaml": None,
                           "manifests/keep.yaml": raycluster("keep")})
    _webhook(ctl, git_repo, sha)
    eventually(lambda: kube.get(RC_API, "RayCluster", name="rc",
                                namespace=team) is None, message="prune")
    eventually(lambda: _ray_version(kube, team, "keep") == "2.52.0", message="second sync")

    assert ctl.alive()
    assert _denials(ctl) == []
    # least privilege: this token cannot write ConfigMaps outside the control namespace
    sa = f"system:serviceaccount:{namespace}:{sa_name}"
    for verb in ("create", "update", "patch", "delete"):
        assert not _can(kube, sa, verb, "configmaps", namespace="kube-system")
    assert not _can(kube, sa, "get", "namespaces", name=namespace)
    as_sa = Kube.connect(str(kubeconfig))
    with pytest.raises(Forbidden):
        as_sa.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": f"{sa_name}-probe", "namespace": "kube-system"}},
                     field_manager="tests")
    # Pods are read in the apps' namespace only; its own settings it cannot rewrite
    assert _can(kube, sa, "watch", "pods", namespace=team)
    assert not _can(kube, sa, "watch", "pods", namespace="kube-system")
    settings = next(cm for cm in kube.list("v1", "ConfigMap", namespace)[0]
                    if "config.yaml" in (cm.get("data") or {}))
    assert settings["immutable"] is True
    with pytest.raises(Invalid, match="immutable"):  # update, the verb its records need
        as_sa.replace({**settings, "data": {"config.yaml": "interval: 1s\n"}},
                      field_manager="tests")
    # ... nor delete and recreate it (delete is a verb its records need too): the chart's
    # ValidatingAdmissionPolicy lets it write only its records among these ConfigMaps
    _only_records_writable(as_sa, namespace, settings)


def _only_records_writable(as_sa: Kube, namespace: str, settings: dict[str, Any]) -> None:
    """The controller's token may write records in its namespace, and no other ConfigMap."""
    name = settings["metadata"]["name"]

    def refused() -> bool:  # the API server loads a new policy asynchronously
        try:
            as_sa.delete("v1", "ConfigMap", name=name, namespace=namespace, dry_run=True)
        except Forbidden as err:
            assert "only its app records" in str(err)
            return True
        return False

    eventually(refused, message="the policy in force (a dry-run delete refused)")
    with pytest.raises(Forbidden, match="only its app records"):
        as_sa.delete("v1", "ConfigMap", name=name, namespace=namespace)
    forged = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": f"{name}x", "namespace": namespace},
              "data": {"config.yaml": "interval: 1s\n"}}
    with pytest.raises(Forbidden, match="only its app records"):
        as_sa.create(forged, field_manager="tests")
    for other in ("instance-types", "patches"):
        shapes = settings["metadata"]["name"].split("-config-")[0] + f"-{other}"
        live = as_sa.get("v1", "ConfigMap", name=shapes, namespace=namespace)
        assert live is not None
        with pytest.raises(Forbidden, match="only its app records"):
            as_sa.replace({**live, "data": {"version": "v2"}}, field_manager="tests")
    probe = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": record_name("probe"), "namespace": namespace}}
    as_sa.create(probe, field_manager="tests")  # its records: create, update, delete
    as_sa.delete("v1", "ConfigMap", name=record_name("probe"), namespace=namespace)


@pytest.mark.usefixtures("argocd_crds")
def test_chart_service_account_reconciles_argo_cd_applications(
        helm_bin: Path, tmp_path: Path, kube: Kube, control_plane: LocalControlPlane,
        namespace: str, team: str, extra_namespace: Callable[[str], str], git_repo: GitRepo,
        rendered: Callable[..., list[dict[str, Any]]],
        controller_process: StartController) -> None:
    """``config.argocd.enabled``: the chart's RBAC is enough to run Argo CD's Applications.

    An annotated Application in Argo CD's namespace is synced, its status written, and an
    ``.operation`` (as ``argocd app sync`` sets it) executed and cleared, with no request
    refused; the token still cannot write Applications elsewhere.
    """
    argo = extra_namespace("argo")
    sa_name, kubeconfig, config = _as_chart(
        helm_bin, tmp_path, kube, control_plane, namespace, rendered,
        "--set", "rbac.clusterWide=false", "--set", f"rbac.namespaces={{{team}}}",
        "--set", "config.argocd.enabled=true", "--set", f"config.argocd.namespace={argo}")
    kube.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "default", "namespace": argo},
                "spec": {"sourceRepos": ["*"],
                         "destinations": [{"server": "*", "namespace": "*"}]}},
               field_manager="tests", force=True)
    git_repo.commit({"manifests/rc.yaml": raycluster("rc")})
    app = application("ray", git_repo.url, team)
    app["metadata"] = {"name": "ray", "namespace": argo, "annotations": {
        "gitops-ray.io/managed": "true", "argocd.argoproj.io/skip-reconcile": "true"}}
    del app["spec"]["syncPolicy"]
    kube.create(app, field_manager="tests")
    ctl = controller_process("chart-argocd", config,
                             env={"GITOPS_RAY_KUBECONFIG": str(kubeconfig)},
                             args=(f"--helm={helm_bin}",))

    def application_status() -> dict[str, Any]:
        obj = kube.get("argoproj.io/v1alpha1", "Application", name="ray", namespace=argo)
        return (obj or {}).get("status") or {}

    eventually(lambda: application_status().get("sync", {}).get("status") == "OutOfSync",
               timeout=120, message="the Application's status, written as the chart's SA")
    kube.patch("argoproj.io/v1alpha1", "Application", name="ray", namespace=argo,
               patch={"operation": {"sync": {"prune": True},
                                    "initiatedBy": {"username": "admin"}}},
               content_type="application/merge-patch+json")
    eventually(lambda: _ray_version(kube, team, "rc") == "2.52.0", message="operation synced")
    eventually(lambda: application_status().get("operationState", {}).get("phase")
               == "Succeeded", message="operationState written")
    assert ctl.alive()
    assert _denials(ctl) == []
    sa = f"system:serviceaccount:{namespace}:{sa_name}"
    assert _can(kube, sa, "patch", "applications", group="argoproj.io", namespace=argo)
    assert not _can(kube, sa, "patch", "applications", group="argoproj.io", namespace=team)
    assert not _can(kube, sa, "patch", "appprojects", group="argoproj.io", namespace=argo)
