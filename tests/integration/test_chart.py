"""The Helm chart: lint-clean (``--strict``), renders with every values file, installs into
the real API server (twice in one namespace, with a ServiceMonitor asked for where its CRD
is missing), rejects bad ``config`` before anything is created, and its RBAC lets the
controller do its job and nothing more. The controller running as the chart's
ServiceAccount is in tests/faults/test_chart_rbac.py."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.kube import Invalid, Kube
from localcluster import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "gitops-ray"
VALUES = sorted((CHART / "ci").glob("*.yaml"))


def run_helm(helm_bin: Path, tmp: Path, *args: str,
             kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp), "XDG_CACHE_HOME": str(tmp / "cache"),
           "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_DATA_HOME": str(tmp / "data")}
    env.pop("KUBECONFIG", None)
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([str(helm_bin), *args], env=env, capture_output=True, text=True,
                          check=False)


def helm(helm_bin: Path, tmp: Path, *args: str, kubeconfig: Path | None = None) -> str:
    result = run_helm(helm_bin, tmp, *args, kubeconfig=kubeconfig)
    assert result.returncode == 0, result.stderr
    return result.stdout


def template(helm_bin: Path, tmp: Path, *args: str) -> list[dict[str, Any]]:
    text = helm(helm_bin, tmp, "template", "gr", str(CHART), "-n", "gitops-ray", *args)
    return [d for d in yaml.safe_load_all(text) if d]


Install = Callable[..., str]


@pytest.fixture
def install(helm_bin: Path, tmp_path: Path, control_plane: LocalControlPlane,
            namespace: str) -> Iterator[Install]:
    """``install(release, *args) -> NOTES``: ``helm install`` into ``namespace``; every
    release is uninstalled after the test (its ClusterRoles outlive the namespace)."""
    releases: list[str] = []

    def run(release: str, *args: str) -> str:
        out = helm(helm_bin, tmp_path, "install", release, str(CHART), "-n", namespace,
                   *args, kubeconfig=control_plane.kubeconfig)
        releases.append(release)
        return out

    yield run
    for release in releases:
        helm(helm_bin, tmp_path, "uninstall", release, "-n", namespace, "--wait",
             kubeconfig=control_plane.kubeconfig)


def unique(prefix: str = "gr") -> str:
    return f"{prefix}{secrets.token_hex(3)}"


@pytest.mark.parametrize("values", [None, *VALUES], ids=lambda v: v.name if v else "default")
def test_lint_and_render(helm_bin: Path, tmp_path: Path, values: Path | None) -> None:
    extra = ["-f", str(values)] if values else []
    assert "0 chart(s) failed" in helm(helm_bin, tmp_path, "lint", "--strict", str(CHART),
                                       *extra)
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
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    scratch = [v for v in volumes if "emptyDir" in v]
    assert scratch and all(v["emptyDir"].get("sizeLimit") for v in scratch)
    assert "NetworkPolicy" in kinds


@pytest.mark.parametrize(("setting", "named"), [
    ("replicaCont=2", "replicaCont"),
    ("config.appSource[0].repo=https://example.com/x.git", "appSource"),
    ("config.interval=2x", "interval"),
    ("config.jitter=-5s", "jitter"),
    ("config.log.level=verbose", "level"),
    ("config.workers=0", "workers"),
    ("config.selfHeal.backof.initial=2s", "backof"),
    ("config.appSources[0].path=apps", "repo"),  # an app source needs its repo
    ("config.controlNamespace=elsewhere", "controlNamespace"),  # the chart sets it
    ("config.leaderElection.identity=fixed", "identity"),  # one identity for all pods
    ("config.sharding.enabled=true", "enabled"),  # replicaCount and sharding.enabled decide
    ("config.sharding.shards=0", "shards"),
    ("sharding.enable=false", "enable"),
], ids=lambda v: v.split("=")[0] if "=" in v else None)
def test_schema_rejects_config_typos(helm_bin: Path, tmp_path: Path, setting: str,
                                     named: str) -> None:
    for command in ("template", "lint"):
        args = ("gr",) if command == "template" else ()
        result = run_helm(helm_bin, tmp_path, command, *args, str(CHART), "--set", setting)
        assert result.returncode != 0, result.stdout
        assert named in result.stderr + result.stdout


def test_schema_accepts_what_the_controller_accepts(helm_bin: Path, tmp_path: Path) -> None:
    docs = template(helm_bin, tmp_path, "--set", "config.interval=90",
                    "--set", "config.jitter=0", "--set", "config.workers=4",
                    "--set", "config.leaderElection.leaseDuration=30s",
                    "--set", "config.selfHeal.backoff.cap=10m", "--set", "replicaCount=2",
                    "--set", "config.applications[0].kind=Application")
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap"
                                 and "config.yaml" in d["data"])["data"]["config.yaml"])
    assert config["interval"] == 90
    assert config["leaderElection"] == {"enabled": True, "leaseName": "gr-gitops-ray",
                                        "leaseDuration": "30s"}


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap"
                                    and "config.yaml" in d["data"])["data"]["config.yaml"]))


def test_several_replicas_shard_with_a_budget_and_spread(helm_bin: Path, tmp_path: Path) -> None:
    docs = template(helm_bin, tmp_path, "--set", "replicaCount=3",
                    "--set", "config.sharding.shards=32")
    assert _config(docs)["sharding"] == {"enabled": True, "shards": 32}
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    labels = deployment["spec"]["selector"]["matchLabels"]
    budget = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
    spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term == {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": labels}}
    env = {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "GITOPS_RAY_WEBHOOK_ADVERTISE_URL" in env  # where the others forward webhooks
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith(
        "-control"))
    leases = next(r for r in role["rules"] if r["resources"] == ["leases"])
    assert {"list", "watch"} <= set(leases["verbs"])

    standby = template(helm_bin, tmp_path, "--set", "replicaCount=3",
                       "--set", "sharding.enabled=false")
    assert _config(standby)["sharding"] == {"enabled": False}
    assert _config(standby)["leaderElection"]["enabled"] is True

    single = template(helm_bin, tmp_path)
    assert _config(single)["sharding"] == {"enabled": False}
    assert "PodDisruptionBudget" not in {d["kind"] for d in single}
    assert "affinity" not in next(d for d in single if d["kind"] == "Deployment"
                                  )["spec"]["template"]["spec"]


def test_cluster_wide_false_without_namespaces_fails(helm_bin: Path, tmp_path: Path) -> None:
    result = run_helm(helm_bin, tmp_path, "template", "gr", str(CHART),
                      "--set", "rbac.clusterWide=false")
    assert result.returncode != 0
    assert "rbac.namespaces" in result.stderr
    # ... unless the chart creates no RBAC at all
    template(helm_bin, tmp_path, "--set", "rbac.clusterWide=false", "--set", "rbac.create=false")


def test_the_control_namespace_guard_needs_kubernetes_1_30(helm_bin: Path,
                                                            tmp_path: Path) -> None:
    kinds = {d["kind"] for d in template(helm_bin, tmp_path)}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    old = run_helm(helm_bin, tmp_path, "template", "gr", str(CHART), "--kube-version", "1.29.0")
    assert old.returncode != 0
    assert "rbac.guardControlNamespace=false" in old.stderr  # named, not silently dropped
    off = template(helm_bin, tmp_path, "--kube-version", "1.29.0",
                   "--set", "rbac.guardControlNamespace=false")
    assert "ValidatingAdmissionPolicy" not in {d["kind"] for d in off}


def test_service_monitor_only_where_its_crd_is(helm_bin: Path, tmp_path: Path) -> None:
    def monitors(*args: str) -> list[dict[str, Any]]:
        docs = template(helm_bin, tmp_path, "--set", "serviceMonitor.enabled=true", *args)
        return [d for d in docs if d["kind"] == "ServiceMonitor"]

    assert monitors() == []
    [monitor] = monitors("--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_install_with_service_monitor_but_no_crd(install: Install, kube: Kube,
                                                 namespace: str) -> None:
    release = unique()
    notes = install(release, "--set", "serviceMonitor.enabled=true")
    assert kube.get("apps/v1", "Deployment", name=f"{release}-gitops-ray", namespace=namespace)
    assert "no ServiceMonitor CRD" in notes


def test_two_releases_in_one_namespace(install: Install, kube: Kube, namespace: str) -> None:
    first, second = unique(), unique()
    install(first)
    notes = install(second, "--set", "instanceTypes[0].name=8CPU-32GB")
    cms = {d["metadata"]["name"] for d in kube.list("v1", "ConfigMap", namespace)[0]}
    for release in (first, second):
        assert {f"{release}-gitops-ray-instance-types", f"{release}-gitops-ray-patches"} <= cms
        assert [cm for cm in cms if cm.startswith(f"{release}-gitops-ray-config-")]
    assert "instance-types" not in cms and "patches" not in cms
    # NOTES promise nothing that is not true yet, and say which command shows what
    assert "is running" not in notes and "rollout status" in notes
    assert f"gitops-ray status --control-namespace {namespace}" in notes
    assert "/metrics" in notes


def settings_configmap(kube: Kube, namespace: str, release: str) -> dict[str, Any]:
    """The release's settings ConfigMap (named after its content)."""
    return next(cm for cm in kube.list("v1", "ConfigMap", namespace)[0]
                if cm["metadata"]["name"].startswith(f"{release}-gitops-ray-config-"))


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


def test_install_and_rbac_cluster_wide(install: Install, kube: Kube, namespace: str) -> None:
    release = unique()
    install(release, "-f", str(CHART / "ci" / "ha-values.yaml"),
            "--set", "rbac.createNamespaces=true")
    name = f"{release}-gitops-ray"
    assert kube.get("apps/v1", "Deployment", name=name,
                    namespace=namespace)["spec"]["replicas"] == 2
    budget = kube.get("policy/v1", "PodDisruptionBudget", name=name, namespace=namespace)
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    sa = f"system:serviceaccount:{namespace}:{name}"
    other = _ns(kube, f"{namespace}-other")
    for verb in ("get", "list", "watch", "create", "patch", "delete"):
        assert _can(kube, sa, verb, "rayclusters", group="ray.io", namespace=other)
    assert _can(kube, sa, "create", "events", namespace=other)
    assert _can(kube, sa, "watch", "pods", namespace=other)  # rollout pending
    assert not _can(kube, sa, "delete", "pods", namespace=other)
    assert _can(kube, sa, "update", "leases", group="coordination.k8s.io", namespace=namespace)
    assert _can(kube, sa, "list", "leases", group="coordination.k8s.io", namespace=namespace)
    assert _can(kube, sa, "watch", "leases", group="coordination.k8s.io", namespace=namespace)
    assert _can(kube, sa, "update", "configmaps", namespace=namespace)
    assert _can(kube, sa, "get", "secrets", namespace=namespace, name="acme-git")
    assert _can(kube, sa, "create", "namespaces")
    # ... and nothing more.
    assert not _can(kube, sa, "get", "secrets", namespace=namespace, name="other-secret")
    assert not _can(kube, sa, "list", "secrets", namespace=other)
    assert not _can(kube, sa, "delete", "pods", namespace=other)
    assert not _can(kube, sa, "update", "leases", group="coordination.k8s.io", namespace=other)
    assert not _can(kube, sa, "delete", "leases", group="coordination.k8s.io", namespace=other)
    assert not _can(kube, sa, "create", "clusterroles", group="rbac.authorization.k8s.io")
    assert not _can(kube, sa, "delete", "namespaces")
    # the default managed kinds are the Ray kinds: no ConfigMaps outside its namespace
    for verb in ("create", "update", "patch", "delete"):
        assert not _can(kube, sa, verb, "configmaps", namespace="kube-system")
        assert not _can(kube, sa, verb, "configmaps", namespace=other)
    # its own records: an app that left git (or Argo CD) has its record deleted
    assert _can(kube, sa, "delete", "configmaps", namespace=namespace)
    kube.delete("v1", "Namespace", name=other)


def test_install_and_rbac_namespaced(install: Install, kube: Kube, namespace: str,
                                     tmp_path: Path) -> None:
    prod, dev = _ns(kube, f"{namespace}-prod"), _ns(kube, f"{namespace}-dev")
    release = unique()
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"rbac": {
        "clusterWide": False, "namespaces": [prod, dev],
        "managedResources": [{"apiGroups": ["ray.io"], "resources": ["rayclusters"]},
                             {"apiGroups": [""], "resources": ["configmaps"]}]}}))
    install(release, "-f", str(values))
    sa = f"system:serviceaccount:{namespace}:{release}-gitops-ray"
    assert _can(kube, sa, "patch", "rayclusters", group="ray.io", namespace=prod)
    assert _can(kube, sa, "delete", "configmaps", namespace=dev)  # widened, in dev only
    assert not _can(kube, sa, "delete", "configmaps", namespace="kube-system")
    assert not _can(kube, sa, "patch", "rayclusters", group="ray.io", namespace="default")
    assert not _can(kube, sa, "patch", "rayjobs", group="ray.io", namespace=prod)
    assert not _can(kube, sa, "create", "namespaces")
    assert not _can(kube, sa, "get", "namespaces", name=namespace)
    for ns in (prod, dev):
        kube.delete("v1", "Namespace", name=ns)


def test_argocd_enabled_grants_what_argo_cd_integration_needs_there_only(
        helm_bin: Path, tmp_path: Path) -> None:
    assert not [d for d in template(helm_bin, tmp_path) if d["metadata"]["name"].endswith(
        "-argocd")]
    docs = template(helm_bin, tmp_path, "--set", "config.argocd.enabled=true",
                    "--set", "config.argocd.namespace=ops-argocd",
                    "--set", "config.argocd.applicationNamespaces=team-a\\, ops-argocd")
    roles = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "Role"
             and d["metadata"]["name"].endswith("-argocd")}
    assert sorted(roles) == ["ops-argocd", "team-a"]
    applications = {"apiGroups": ["argoproj.io"], "resources": ["applications"],
                    "verbs": ["get", "list", "watch", "patch"]}
    events = {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
    assert roles["team-a"]["rules"] == [applications, events]
    assert roles["ops-argocd"]["rules"] == [
        applications, events,
        {"apiGroups": ["argoproj.io"], "resources": ["appprojects"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["argocd-cm"],
         "verbs": ["get", "list", "watch"]},
        # Argo CD's repository Secrets (credentials of every source kind) and repos' CAs
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["argocd-tls-certs-cm"], "verbs": ["get"]}]
    bindings = [d for d in docs if d["kind"] == "RoleBinding"
                and d["metadata"]["name"].endswith("-argocd")]
    assert len(bindings) == 2
    assert all(b["subjects"][0]["namespace"] == "gitops-ray" for b in bindings)


def test_web_page_actions_grant_the_reviews_only_when_enabled(install: Install, kube: Kube,
                                                              namespace: str) -> None:
    """The page is on by default (Services read for its tree), its actions off; turning them
    on adds create on tokenreviews and subjectaccessreviews, nothing else."""
    plain, acting = unique(), unique()
    install(plain)
    install(acting, "--set", "ui.actions.enabled=true")
    reviews = (("tokenreviews", "authentication.k8s.io"),
               ("subjectaccessreviews", "authorization.k8s.io"))
    for release, allowed in ((plain, False), (acting, True)):
        sa = f"system:serviceaccount:{namespace}:{release}-gitops-ray"
        for resource, group in reviews:
            assert _can(kube, sa, "create", resource, group=group) is allowed
        assert _can(kube, sa, "watch", "services", namespace="default")
        assert not _can(kube, sa, "get", "services", namespace="default")
        assert not _can(kube, sa, "sync", "configmaps", namespace=namespace)
        cm = settings_configmap(kube, namespace, release)
        assert yaml.safe_load(cm["data"]["config.yaml"])["ui"] == {
            "enabled": True, "actions": allowed, "tokenAudience": "gitops-ray"}


def test_destination_clusters_grant_secret_reads_only_when_enabled(
        install: Install, kube: Kube, namespace: str) -> None:
    """The cluster Secrets can be listed (hence other clusters used) only when asked for."""
    off, on = unique(), unique()
    install(off)
    install(on, "--set", "destinationClusters.enabled=true")
    for release, allowed in ((off, False), (on, True)):
        sa = f"system:serviceaccount:{namespace}:{release}-gitops-ray"
        for verb in ("list", "watch"):
            assert _can(kube, sa, verb, "secrets", namespace=namespace) is allowed
        assert not _can(kube, sa, "list", "secrets", namespace="kube-system")


@pytest.mark.parametrize("clusters", ["true", "false"])
def test_argo_cd_mode_reads_argo_cd_namespace_secrets_only(
        helm_bin: Path, tmp_path: Path, clusters: str) -> None:
    """Repository Secrets (and, asked for, cluster Secrets) in Argo CD's namespace only."""
    docs = template(helm_bin, tmp_path, "--set", "config.argocd.enabled=true",
                    "--set", "config.argocd.namespace=ops-argocd",
                    "--set", f"destinationClusters.enabled={clusters}")
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"].rsplit("-", 1)[-1]): d["rules"]
             for d in docs if d["kind"] == "Role"}
    assert secrets in roles[("ops-argocd", "argocd")]
    assert all(secrets not in rules for (ns, _), rules in roles.items() if ns != "ops-argocd")


# -- issue 36, item 11: the chart's network and volume edges ------------------------------

def _network_policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "NetworkPolicy")


def _ports(rule: dict[str, Any]) -> set[Any]:
    return {p["port"] for p in rule["ports"]}


def test_a_network_policy_by_default_lets_in_only_the_webhook_and_the_page(
        helm_bin: Path, tmp_path: Path) -> None:
    policy = _network_policy(template(helm_bin, tmp_path))["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    webhook, page = policy["ingress"]
    assert (_ports(webhook), "from" not in webhook) == ({"webhook"}, True)  # from anyone
    assert (_ports(page), page["from"]) == ({"metrics"}, [{"namespaceSelector": {}}])
    api, dns, git = policy["egress"]
    assert _ports(api) == {443, 6443} and "to" not in api  # no cluster to look it up in
    assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert _ports(git) == {443, 22}

    peer = {"ipBlock": {"cidr": "192.0.2.0/24"}}
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "replicaCount": 2,
        "config": {"appSources": [{"repo": "https://git.example:8443/team/config.git"},
                                  {"repo": "git@git.example:team/other.git"}]},
        "networkPolicy": {"webhookFrom": [peer], "metricsFrom": [],
                          "egress": {"git": [peer], "apiServer": [peer],
                                     "extra": [{"to": [peer], "ports": [{"port": 7000}]}]}}}))
    policy = _network_policy(template(helm_bin, tmp_path, "-f", str(values)))["spec"]
    webhook, page, replicas = policy["ingress"]
    assert webhook["from"] == [peer] and "from" not in page
    assert replicas["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "gr"
    api, _, git, forwarding, extra = policy["egress"]
    assert api["to"] == [peer] and git["to"] == [peer]
    assert _ports(git) == {443, 22, 8443}  # the repository URLs' ports are added
    assert _ports(forwarding) == {9292} and extra == {"to": [peer], "ports": [{"port": 7000}]}

    off = template(helm_bin, tmp_path, "--set", "networkPolicy.enabled=false")
    assert "NetworkPolicy" not in {d["kind"] for d in off}


def test_in_argo_cd_mode_the_network_policy_lets_the_views_reach_argo_cds_redis(
        helm_bin: Path, tmp_path: Path) -> None:
    policy = _network_policy(template(helm_bin, tmp_path, "--set", "config.argocd.enabled=true",
                                      "--set", "config.argocd.namespace=gitops"))["spec"]
    argocd = policy["egress"][-1]
    assert _ports(argocd) == {6379, 8080}  # Redis; argocd-server's /api/version
    [peer] = argocd["to"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "gitops"}}
    assert peer["podSelector"]["matchExpressions"][0]["values"] == [
        "argocd-redis", "argocd-redis-ha-haproxy", "argocd-server"]
    off = _network_policy(template(helm_bin, tmp_path, "--set", "config.argocd.enabled=true",
                                   "--set", "config.argocd.views=false"))["spec"]
    assert all(6379 not in _ports(rule) for rule in off["egress"])


def test_the_webhook_has_its_own_service_apart_from_the_page(helm_bin: Path,
                                                             tmp_path: Path) -> None:
    docs = template(helm_bin, tmp_path, "--set", "webhookService.type=LoadBalancer",
                    "--set", "serviceMonitor.enabled=true",
                    "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    page, webhook = services["gr-gitops-ray"], services["gr-gitops-ray-webhook"]
    assert page["spec"]["type"] == "ClusterIP"
    assert [p["name"] for p in page["spec"]["ports"]] == ["metrics"]
    assert webhook["spec"]["type"] == "LoadBalancer"
    assert [p["name"] for p in webhook["spec"]["ports"]] == ["webhook"]
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    component = monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
    assert component == page["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"


def test_the_settings_configmap_is_immutable_and_named_after_its_content(
        helm_bin: Path, tmp_path: Path) -> None:
    def settings(*args: str) -> dict[str, Any]:
        docs = template(helm_bin, tmp_path, *args)
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d["data"])
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        mounted = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        assert mounted["config"]["configMap"]["name"] == cm["metadata"]["name"]
        return cm

    first, again, changed = settings(), settings(), settings("--set", "config.interval=5m")
    assert first["immutable"] is True
    assert first["metadata"]["name"] == again["metadata"]["name"]
    assert first["metadata"]["name"] != changed["metadata"]["name"]


def test_install_scopes_pod_reads_and_finds_the_api_server(
        install: Install, kube: Kube, namespace: str) -> None:
    """On the real API server: the NetworkPolicy is valid and names the API server Helm
    looked up; Pods are read only in rbac.namespaces when it is given; the settings
    ConfigMap cannot be changed, by the controller's token or anyone."""
    team = _ns(kube, f"{namespace}-team")
    scoped, everywhere = unique(), unique()
    install(scoped, "--set", f"rbac.namespaces={{{team}}}")
    install(everywhere)
    policy = kube.get("networking.k8s.io/v1", "NetworkPolicy", name=f"{scoped}-gitops-ray",
                      namespace=namespace)
    assert policy is not None
    api = policy["spec"]["egress"][0]
    service = kube.get("v1", "Service", name="kubernetes", namespace="default")
    expected = [{"ipBlock": {"cidr": f"{service['spec']['clusterIP']}/32"}}]
    endpoints = kube.get("discovery.k8s.io/v1", "EndpointSlice", name="kubernetes",
                         namespace="default")  # none here: this API server writes none
    for endpoint in (endpoints or {}).get("endpoints") or []:
        expected += [{"ipBlock": {"cidr": f"{a}/32"}} for a in endpoint["addresses"]]
    assert api["to"] == expected
    assert {443, 6443} <= _ports(api)
    for release, elsewhere in ((scoped, False), (everywhere, True)):
        sa = f"system:serviceaccount:{namespace}:{release}-gitops-ray"
        assert _can(kube, sa, "watch", "pods", namespace=team)
        assert _can(kube, sa, "watch", "pods", namespace="kube-system") is elsewhere
        assert _can(kube, sa, "patch", "rayclusters", group="ray.io", namespace="default")
    cm = settings_configmap(kube, namespace, scoped)
    with pytest.raises(Invalid, match="immutable"):
        kube.patch("v1", "ConfigMap", name=cm["metadata"]["name"], namespace=namespace,
                   patch={"data": {"config.yaml": "interval: 1s\n"}},
                   content_type="application/merge-patch+json", field_manager="tests")
    kube.delete("v1", "Namespace", name=team)
