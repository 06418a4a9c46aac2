"""Charts from Helm repositories, through the controller, against the real API server.

The repository is real: ``helm package`` + ``helm repo index`` served over HTTP on
127.0.0.1 (plain, basic auth, TLS: :mod:`tests.chartservers`), as GitHub Pages serves
kuberay-helm. The chart is the project's RayCluster-shaped test chart
(``tests/testdata/charts/ray-cluster``). Each test starts at an Application's
``repoURL``/``chart``/``targetRevision`` and ends at the live RayCluster and the app's
recorded status.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import SourceReason
from localcluster import LocalControlPlane
from tests.chartservers import (
    Served,
    helm_repository,
    index_repository,
    package_chart,
    push_chart,
    serve_directory,
    serve_registry,
    tls_files,
)
from tests.harness import eventually
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, push_payload
from tests.integration.test_argocd_apps import APP_API, OPEN, OURS, start

CHART = Path(__file__).resolve().parents[1] / "testdata" / "charts" / "ray-cluster"
PASSWORD = "chart-pa55word"


def chart_app(name: str, repo_url: str, namespace: str, *, revision: str = "1.5.1",
              chart: str = "ray-cluster", values: dict[str, Any] | None = None,
              self_heal: bool = False) -> dict[str, Any]:
    """An Application as the KubeRay guide writes its RayCluster one (other names)."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": repo_url, "chart": chart, "targetRevision": revision,
                                "helm": {"releaseName": name, "valuesObject": values or {
                                    "worker": {"replicas": 1},
                                    "additionalWorkerGroups": {
                                        "small": {"replicas": 0, "maxReplicas": 2,
                                                  "resources": {"limits": {"cpu": "1"}}}}}}},
                     "destination": {"server": "https://kubernetes.default.svc",
                                     "namespace": namespace},
                     "syncPolicy": {"automated": {"prune": True, "selfHeal": self_heal}}}}


@pytest.fixture
def chart_repo(helm_bin: Path, tmp_path: Path) -> Iterator[Served]:
    repo = helm_repository(helm_bin, tmp_path / "repo", CHART, versions=("1.5.0", "1.5.1"))
    with serve_directory(repo.parent) as served:
        yield served


def publish(helm_bin: Path, served: Served, version: str) -> None:
    """Add a version of the chart to a served repository (package + re-index)."""
    package_chart(helm_bin, CHART, served.root / "charts", version=version)
    index_repository(helm_bin, served.root / "charts")


def live_chart(kube: Kube, namespace: str, name: str) -> str:
    live = kube.get(RC_API, "RayCluster", name=name, namespace=namespace)
    return str(live["metadata"]["labels"]["helm.sh/chart"]) if live else ""


def test_a_chart_version_is_the_revision_and_a_new_matching_one_is_applied(
        start_controller: Callable[..., Controller], chart_repo: Served, helm_bin: Path,
        kube: Kube, namespace: str) -> None:
    app = chart_app("rc", chart_repo.url, namespace, revision="1.5.*")
    ctl = start_controller({"applications": [app]}, interval="1s")
    eventually(lambda: live_chart(kube, namespace, "rc-ray-cluster") == "ray-cluster-1.5.1",
               message="1.5.1 synced")
    live = kube.get(RC_API, "RayCluster", name="rc-ray-cluster", namespace=namespace)
    assert live is not None
    assert [g["groupName"] for g in live["spec"]["workerGroupSpecs"]] == ["workergroup", "small"]
    status = eventually(lambda: (s := ctl.status("rc")).get("revision") == "1.5.1" and s,
                        message="status")
    assert status["chart"] == "ray-cluster" and status["sync"] == "Synced"

    publish(helm_bin, chart_repo, "1.5.2")  # what a chart release does to the index
    eventually(lambda: live_chart(kube, namespace, "rc-ray-cluster") == "ray-cluster-1.5.2",
               message="1.5.2 applied by auto-sync")
    eventually(lambda: ctl.status("rc").get("revision") == "1.5.2", message="new revision")
    history = ctl.status("rc").get("history") or []
    assert [h.get("revision") for h in history][:2] == ["1.5.2", "1.5.1"]  # newest first
    assert chart_repo.count("ray-cluster-1.5.1.tgz") == 1  # a version is fetched once
    assert chart_repo.count("ray-cluster-1.5.2.tgz") == 1
    assert chart_repo.count("ray-cluster-1.5.0.tgz") == 0
    assert chart_repo.count("/index.yaml") >= 2  # read on the refresh cycle


def test_credentials_and_tls_reach_the_repository_and_nowhere_else(
        start_controller: Callable[..., Controller], helm_bin: Path, tmp_path: Path,
        kube: Kube, namespace: str) -> None:
    repo = helm_repository(helm_bin, tmp_path / "repo", CHART)
    ca, cert, key = tls_files(tmp_path / "tls")
    with serve_directory(repo.parent, username="charts", password=PASSWORD,
                         tls=(ca, cert, key)) as served:
        ctl = start_controller({
            "applications": [chart_app("secure", served.url, namespace),
                             chart_app("nocreds", served.url.replace("/charts", "/other"),
                                       namespace)],
            "credentials": [{"url": served.url, "username": "charts", "password": PASSWORD,
                             "caFile": str(ca)},
                            {"url": served.url.replace("/charts", "/other"),
                             "caFile": str(ca)}]})
        eventually(lambda: live_chart(kube, namespace, "secure-ray-cluster"),
                   message="synced through basic auth over TLS")
        error = eventually(lambda: ctl.status("nocreds").get("error"), message="401 recorded")
        assert ctl.status("nocreds")["errorReason"] == SourceReason.AUTH_FAILED
        assert "answered 401" in error
    records = kube.list("v1", "ConfigMap", namespace=namespace)
    events = kube.list("v1", "Event", namespace=namespace)
    assert PASSWORD not in str(records) + str(events)


def test_bad_chart_sources_fail_their_own_app_and_prune_nothing(
        start_controller: Callable[..., Controller], chart_repo: Served, helm_bin: Path,
        tmp_path: Path, kube: Kube, namespace: str) -> None:
    big = tmp_path / "big" / "charts"
    big.mkdir(parents=True)
    (big / "index.yaml").write_text("apiVersion: v1\nentries: {}\n# " + "x" * 200_000 + "\n")
    huge = tmp_path / "huge" / "charts"
    package_chart(helm_bin, CHART, huge, version="1.5.1",  # random: gzip cannot shrink it
                  values="padding: " + secrets.token_hex(200_000) + "\n")
    index_repository(helm_bin, huge)
    with serve_directory(big.parent) as big_repo, serve_directory(huge.parent) as huge_repo:
        ctl = start_controller({"applications": [
            chart_app("good", chart_repo.url, namespace),
            chart_app("tampered", chart_repo.url, namespace, revision=">=1.5.1"),
            chart_app("nomatch", chart_repo.url, namespace, revision="9.x"),
            chart_app("nochart", chart_repo.url, namespace, chart="ray-nothing"),
            chart_app("oversize-index", big_repo.url, namespace),
            chart_app("oversize-chart", huge_repo.url, namespace),
            chart_app("unreachable", "http://127.0.0.1:9/charts", namespace),
        ]}, interval="1s", workers="4", **{"sources.maxIndexSize": "128Ki",
                                           "sources.maxChartSize": "128Ki"})
        for name in ("good", "tampered"):
            eventually(lambda n=name: live_chart(kube, namespace, f"{n}-ray-cluster"),
                       message=f"{name} synced")
        # A republished version whose archive is not what the index says:
        chart_repo.rewrite["ray-cluster-1.5.2.tgz"] = lambda body: body[:-8] + b"\0" * 8
        publish(helm_bin, chart_repo, "1.5.2")
        expected = {"tampered": SourceReason.DIGEST_MISMATCH,
                    "nomatch": SourceReason.REVISION_NOT_FOUND,
                    "nochart": SourceReason.CHART_NOT_FOUND,
                    "oversize-index": SourceReason.TOO_LARGE,
                    "oversize-chart": SourceReason.TOO_LARGE,
                    "unreachable": SourceReason.UNREACHABLE}
        for name, reason in expected.items():
            eventually(lambda n=name, r=reason: ctl.status(n).get("errorReason") == r,
                       message=f"{name}: {reason}")
            status = ctl.status(name)
            assert status["error"].startswith(f"source: {reason.value}: "), status["error"]
            assert status["sync"] == "Unknown"
        # The tampered app keeps what it had: nothing pruned, nothing replaced.
        assert live_chart(kube, namespace, "tampered-ray-cluster") == "ray-cluster-1.5.1"
        assert live_chart(kube, namespace, "good-ray-cluster") == "ray-cluster-1.5.1"
        assert ctl.status("good")["error"] == ""
        chart_repo.rewrite.clear()
        eventually(lambda: live_chart(kube, namespace, "tampered-ray-cluster")
                   == "ray-cluster-1.5.2", message="recovered once the archive is right")


def test_allowed_source_hosts_keep_every_other_host_uncontacted(
        start_controller: Callable[..., Controller], chart_repo: Served,
        namespace: str) -> None:
    ctl = start_controller({"applications": [chart_app("elsewhere", chart_repo.url, namespace)]},
                           **{"sources.allowedHosts": "charts.example.com"})
    eventually(lambda: ctl.status("elsewhere").get("error"), message="refused")
    status = ctl.status("elsewhere")
    assert status["errorReason"] == SourceReason.HOST_NOT_ALLOWED, status
    assert chart_repo.requests == []


# -- OCI registries ---------------------------------------------------------------------

def test_charts_from_an_oci_registry_by_tag_constraint_and_digest(
        start_controller: Callable[..., Controller], helm_bin: Path, tmp_path: Path,
        kube: Kube, namespace: str) -> None:
    """A real docker-registry: ``helm push``-ed charts, anonymous and behind htpasswd."""
    archives = tmp_path / "archives"
    first = package_chart(helm_bin, CHART, archives, version="1.5.0")
    second = package_chart(helm_bin, CHART, archives, version="1.5.1")
    with serve_registry(tmp_path / "open") as open_registry, \
            serve_registry(tmp_path / "locked", username="puller",
                           password=PASSWORD) as locked:
        push_chart(helm_bin, first, open_registry)
        digest = push_chart(helm_bin, second, open_registry)
        push_chart(helm_bin, second, locked)
        ctl = start_controller({
            "applications": [
                chart_app("bytag", open_registry.oci(), namespace, revision="1.5.0"),
                chart_app("byrange", f"{open_registry.host}/charts", namespace,  # no scheme
                          revision=">=1.5.0 <2.0.0"),
                chart_app("bydigest", open_registry.oci(), namespace, revision=digest),
                chart_app("locked", locked.oci(), namespace),
                chart_app("refused", locked.oci().replace("/charts", "/other"), namespace)],
            "credentials": [
                {"url": open_registry.oci(), "caFile": open_registry.ca_file},
                {"url": f"{open_registry.host}/charts", "caFile": open_registry.ca_file},
                {"url": locked.oci(), "username": "puller", "password": PASSWORD,
                 "caFile": locked.ca_file},
                {"url": locked.oci().replace("/charts", "/other"), "caFile": locked.ca_file}]},
            workers="4")
        for name, version in (("bytag", "1.5.0"), ("byrange", "1.5.1"), ("bydigest", "1.5.1"),
                              ("locked", "1.5.1")):
            eventually(lambda n=name, v=version: live_chart(kube, namespace, f"{n}-ray-cluster")
                       == f"ray-cluster-{v}", message=f"{name} synced")
        # the record is written after the apply the live object shows: wait on it too
        eventually(lambda: ctl.status("byrange").get("revision") == "1.5.1",
                   message="byrange's record")
        eventually(lambda: ctl.status("bydigest").get("revision") == digest,
                   message="bydigest's record")
        eventually(lambda: ctl.status("refused").get("errorReason") == SourceReason.AUTH_FAILED,
                   message="401 without credentials")
    records = kube.list("v1", "ConfigMap", namespace=namespace)
    assert PASSWORD not in str(records)


# -- multi-source Applications -----------------------------------------------------------

def test_a_multi_source_app_takes_values_from_git_and_rolls_back_every_source(
        start_controller: Callable[..., Controller], chart_repo: Served,
        helm_bin: Path, git_repo: GitRepo, control_plane: LocalControlPlane, kube: Kube,
        namespace: str, tmp_path: Path) -> None:
    """The chart from the Helm repository, its values from git through ``ref``/``$values``."""
    app = chart_app("multi", chart_repo.url, namespace, revision="1.5.*")
    chart_source = app["spec"].pop("source")
    chart_source["helm"] = {"releaseName": "multi",
                            "valueFiles": ["$values/envs/prod/values.yaml"]}
    app["spec"]["sources"] = [chart_source,
                              {"repoURL": git_repo.url, "targetRevision": "main",
                               "ref": "values"}]
    first = git_repo.commit({"apps/multi.yaml": app,
                             "envs/prod/values.yaml": "worker:\n  replicas: 2\n"})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           interval="1s")

    def replicas() -> int:
        live = kube.get(RC_API, "RayCluster", name="multi-ray-cluster", namespace=namespace)
        return int(live["spec"]["workerGroupSpecs"][0]["replicas"]) if live else -1

    eventually(lambda: replicas() == 2, message="values from git")
    # the record is written after the apply the live object shows: wait on it too
    eventually(lambda: ctl.status("multi").get("revision") == f"1.5.1,{first}",
               message="the record names both sources' revisions")

    second = git_repo.commit({"envs/prod/values.yaml": "worker:\n  replicas: 3\n"})
    assert ctl.webhook(push_payload(git_repo, second)).status_code == 202  # the ref source
    eventually(lambda: replicas() == 3, message="a push to the values repository applied")
    publish(helm_bin, chart_repo, "1.5.2")  # found by the next poll
    eventually(lambda: ctl.status("multi").get("revision") == f"1.5.2,{second}",
               message="a new chart version applied")
    assert live_chart(kube, namespace, "multi-ray-cluster") == "ray-cluster-1.5.2"
    history = ctl.status("multi")["history"]
    assert [h["revision"] for h in history][:3] == [
        f"1.5.2,{second}", f"1.5.1,{second}", f"1.5.1,{first}"]

    cli = Cli(control_plane, namespace, tmp_path / "cli-cache")
    oldest = history[2]["id"]
    rolled = cli.raw("rollback", *cli.kube_args, "--cache-dir", str(cli.cache), "--helm",
                 str(helm_bin), "--repo", git_repo.url, "--apps", "apps", "multi", str(oldest))
    assert rolled.exit_code == 0, rolled.output
    assert replicas() == 2  # the values of the first commit ...
    assert live_chart(kube, namespace, "multi-ray-cluster") == "ray-cluster-1.5.1"  # and chart


# -- --argocd mode: Argo CD's repository Secrets and AppProject sourceRepos ----------------

@pytest.mark.usefixtures("argocd_crds")
def test_argocd_mode_uses_repository_secrets_and_the_projects_source_repos(
        start_controller: Callable[..., Controller], helm_bin: Path, tmp_path: Path,
        kube: Kube, namespace: str) -> None:
    repo = helm_repository(helm_bin, tmp_path / "repo", CHART)
    with serve_directory(repo.parent, username="argo", password=PASSWORD) as served, \
            serve_directory(repo.parent) as forbidden:
        kube.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "charts-repo", "namespace": namespace,
                                  "labels": {"argocd.argoproj.io/secret-type": "repository"}},
                     "stringData": {"url": served.url, "type": "helm", "username": "argo",
                                    "password": PASSWORD}}, field_manager="tests")
        for name, url in (("argo-chart", served.url), ("elsewhere", forbidden.url)):
            app = chart_app(name, url, namespace)
            app["metadata"] = {"name": name, "namespace": namespace, "annotations": OURS}
            kube.create(app, field_manager="tests")
        project = {**OPEN, "sourceRepos": [served.url.rsplit("/", 1)[0] + "/*"]}
        ctl = start(start_controller, kube, namespace, project=project)
        eventually(lambda: live_chart(kube, namespace, "argo-chart-ray-cluster"),
                   message="synced with the repository Secret's credentials")
        argo = eventually(lambda: (a := kube.get(APP_API, "Application", name="argo-chart",
                                                 namespace=namespace))
                          and a.get("status", {}).get("sync", {}).get("revision") and a,
                          message="Argo CD's status")
        assert argo["status"]["sync"]["revision"] == "1.5.1"
        condition = eventually(lambda: [c for c in (kube.get(
            APP_API, "Application", name="elsewhere", namespace=namespace) or {}).get(
            "status", {}).get("conditions", []) if c["type"] == "InvalidSpecError"],
            message="refused by the project")
        assert "is not permitted in project" in condition[0]["message"]
        assert forbidden.requests == []  # never contacted
        eventually(lambda: ctl.status("argo-chart").get("revision") == "1.5.1",
                   message="argo-chart's record")
    assert PASSWORD not in str(kube.list("v1", "ConfigMap", namespace=namespace))
