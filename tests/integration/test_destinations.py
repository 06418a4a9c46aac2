"""Destination clusters the Argo CD way: cluster Secrets, one client and cache per cluster.

Two or three real control planes: ours (the ``control_plane`` fixture, where the
controller, its records and the cluster Secrets live) and ``far`` (another
:class:`LocalControlPlane`, reached with the bearer token and CA of its Secret). An app
whose ``destination.name``/``server`` names ``far`` lands in far and nowhere else; one
naming no known cluster gets Argo CD's ``InvalidSpecError`` and nothing is written
anywhere; the Secret's ``namespaces``/``clusterResources`` are enforced; a far that stops
answering makes only its apps Unknown while ours go on syncing, and a new Secret brings it
back. The Secret's token is never in a log line, a record, an Event or a status.

The one-shot commands (``sync``, ``diff``, ``get``) read the Secrets once and compare,
sync and read each app in its own cluster too; an unreachable one fails only its apps.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from gitops_ray.kube import Kube
from gitops_ray.logs import configure_logging
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload
from tests.integration.test_argocd_apps import (
    OURS,
    rayclusters,
    start,
    status_when,
    sync_is,
)
from tests.integration.test_argocd_apps import application as argocd_application
from tests.integration.test_cli_sync import configmap
from tests.integration.test_controller_leases import limited_kube
from tests.samples import raycluster

UNKNOWN = [({"name": "far"}, "there are no clusters with this name: far"),
           ({"server": "https://far.example:6443"},
            'error getting cluster by server "https://far.example:6443": cluster '
            '"https://far.example:6443" not found')]


def remote_app(name: str, repo: str, namespace: str, destination: dict[str, str]
               ) -> dict[str, Any]:
    app = application(name, repo, namespace, path=name)
    app["spec"]["destination"] = {**destination, "namespace": namespace}
    return app


def cluster_secret(cp: LocalControlPlane, *, name: str = "far", secret: str = "cluster-far",
                   **extra: str) -> dict[str, Any]:
    """An Argo CD cluster Secret for ``cp``: bearer token and CA data."""
    config = {"bearerToken": cp.token, "tlsClientConfig": {
        "caData": base64.b64encode((cp.workdir / "ca.crt").read_bytes()).decode()}}
    data = {"name": name, "server": cp.url, "config": json.dumps(config), **extra}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def put_secret(kube: Kube, namespace: str, secret: dict[str, Any]) -> None:
    secret = {**secret, "metadata": {**secret["metadata"], "namespace": namespace}}
    kube.apply(secret, field_manager="tests", force=True)


@pytest.fixture(scope="module")
def far() -> Iterator[LocalControlPlane]:
    with LocalControlPlane() as cp:
        yield cp


@pytest.fixture
def far_kube(far: LocalControlPlane, namespace: str) -> Iterator[Kube]:
    """A client of far, where the test's namespace exists too."""
    kube = with_namespace(Kube.connect(str(far.kubeconfig)), namespace)
    yield kube
    kube.delete("v1", "Namespace", name=namespace)


def with_namespace(kube: Kube, namespace: str) -> Kube:
    """``kube``, whose cluster now has ``namespace`` too."""
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                field_manager="tests")
    return kube


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """Every log line of the test (JSON, debug level); the root logger restored after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging("json", "debug", stream)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


def cm(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    return kube.get("v1", "ConfigMap", name=name, namespace=namespace)


def everything_said(kubes: list[Kube], namespace: str, logs: io.StringIO) -> str:
    """Logs, records (ConfigMaps), Events and statuses: where a token must never be."""
    said = [logs.getvalue()]
    for kube in kubes:
        for kind in ("ConfigMap", "Event"):
            said.append(json.dumps(kube.list("v1", kind, namespace)[0]))
    return "\n".join(said)


@pytest.mark.parametrize("by", ["name", "server"])
def test_an_app_for_far_lands_in_far_only(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        far_kube: Kube, far: LocalControlPlane, namespace: str, logs: io.StringIO,
        by: str) -> None:
    put_secret(kube, namespace, cluster_secret(far))
    destination = {"name": "far"} if by == "name" else {"server": far.url + "/"}
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace, destination),
                     "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
                     "far/cm.yaml": configmap("for-far"), "here/cm.yaml": configmap("for-here")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: cm(far_kube, "for-far", namespace), message="far's app synced in far")
    eventually(lambda: cm(kube, "for-here", namespace), message="our app synced here")
    eventually(lambda: ctl.status("far").get("sync") == "Synced", message="far in sync")
    assert cm(kube, "for-far", namespace) is None
    assert cm(far_kube, "for-here", namespace) is None
    assert not ctl.status("far").get("conditions")
    assert far.token not in everything_said([kube, far_kube], namespace, logs)


@pytest.mark.parametrize(("destination", "message"), UNKNOWN, ids=["name", "server"])
def test_an_unknown_cluster_is_refused_and_nothing_is_written(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, destination: dict[str, str], message: str) -> None:
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace, destination),
                     "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
                     "far/cm.yaml": configmap("for-far"), "here/cm.yaml": configmap("for-here")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: cm(kube, "for-here", namespace), message="the in-cluster app synced")
    status = eventually(lambda: ctl.status("far").get("conditions"), message="a condition")
    assert (status[0]["type"], status[0]["message"]) == ("InvalidSpecError", message)
    assert ctl.status("far")["sync"] == "Unknown"
    assert cm(kube, "for-far", namespace) is None


def test_the_secrets_namespaces_and_cluster_resources_are_enforced(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        far_kube: Kube, far: LocalControlPlane, namespace: str) -> None:
    put_secret(kube, namespace, cluster_secret(far, namespaces=namespace))
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-role"}, "rules": []}
    outside = remote_app("outside", git_repo.url, "elsewhere", {"name": "far"})
    git_repo.commit({"apps/outside.yaml": outside,
                     "apps/wide.yaml": remote_app("wide", git_repo.url, namespace,
                                                  {"name": "far"}),
                     "outside/cm.yaml": configmap("outside"),
                     "wide/cm.yaml": configmap("wide"), "wide/role.yaml": role})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    refused = eventually(lambda: ctl.status("outside").get("conditions"), message="refused")
    assert refused[0]["type"] == "InvalidSpecError"
    assert "namespace 'elsewhere' is not managed by cluster 'far'" in refused[0]["message"]
    failed = eventually(lambda: (ctl.status("wide").get("operation") or {}).get("message"),
                        message="the namespaced-mode sync failed")
    assert f'Cluster level ClusterRole "{namespace}-role" can not be managed when in ' \
           "namespaced mode" in failed
    assert far_kube.get("rbac.authorization.k8s.io/v1", "ClusterRole",
                        name=f"{namespace}-role") is None
    assert cm(far_kube, "wide", namespace) is None  # a sync is all or nothing


def test_an_unusable_secret_refuses_its_apps_naming_the_field(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        far: LocalControlPlane, namespace: str) -> None:
    broken = cluster_secret(far)
    config = json.loads(base64.b64decode(broken["data"]["config"]))
    config["execProviderConfig"] = {"command": "aws", "args": [far.token]}
    broken["data"]["config"] = base64.b64encode(json.dumps(config).encode()).decode()
    put_secret(kube, namespace, broken)
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace,
                                                 {"name": "far"}),
                     "far/cm.yaml": configmap("for-far")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    (refused,) = eventually(lambda: ctl.status("far").get("conditions"), message="refused")
    assert (refused["type"], refused["message"]) == (
        "InvalidSpecError", "cluster Secret 'cluster-far': data.config.execProviderConfig is "
        "not supported (bearerToken and tlsClientConfig are)")
    assert cm(kube, "for-far", namespace) is None


@pytest.mark.usefixtures("argocd_crds")
def test_an_argo_cd_application_for_far_is_synced_there(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        far_kube: Kube, far: LocalControlPlane, namespace: str) -> None:
    put_secret(kube, namespace, cluster_secret(far))  # Argo CD's namespace: the test's
    sha = git_repo.commit(rayclusters("2.9.0", namespace))
    app = argocd_application("ray", git_repo, namespace, annotations=OURS)
    app["spec"]["destination"] = {"name": "far", "namespace": namespace}
    kube.create(app, field_manager="tests")
    start(start_controller, kube, namespace)
    eventually(lambda: far_kube.get("ray.io/v1", "RayCluster", name="demo",
                                    namespace=namespace), message="RayCluster in far")
    obj = status_when(kube, namespace, "ray", sync_is("Synced"), "Synced in Argo CD's status")
    assert obj["status"]["sync"]["revision"] == sha
    assert kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace) is None
    assert far.token not in json.dumps(obj)


def test_an_unreachable_cluster_makes_only_its_apps_unknown(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, logs: io.StringIO, far: LocalControlPlane) -> None:
    gone = LocalControlPlane()
    gone.start()
    try:
        gone_kube = with_namespace(Kube.connect(str(gone.kubeconfig)), namespace)
        put_secret(kube, namespace, cluster_secret(gone))
        git_repo.commit({
            "apps/far.yaml": remote_app("far", git_repo.url, namespace, {"name": "far"}),
            "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
            "far/cm.yaml": configmap("for-far"), "here/cm.yaml": configmap("for-here")})
        ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
        eventually(lambda: cm(gone_kube, "for-far", namespace), message="far synced")
    finally:
        gone.stop()
    changed = {"k": "changed"}
    sha = git_repo.commit({"here/cm.yaml": {**configmap("for-here"), "data": changed},
                           "far/cm.yaml": {**configmap("for-far"), "data": changed}})

    def far_unknown() -> dict[str, Any] | None:
        ctl.webhook(push_payload(git_repo, sha))  # each try refreshes both apps
        status = ctl.status("far")
        return status if "is unreachable" in status.get("error", "") else None

    status = eventually(far_unknown, message="far's app Unknown")
    assert (status["sync"], status["health"]) == ("Unknown", "Unknown")
    assert "destination cluster 'far'" in status["error"]
    eventually(lambda: (cm(kube, "for-here", namespace) or {}).get("data") == changed,
               message="our app synced the new commit")
    back = far  # the module's other cluster, already running: the cluster moved there
    back_kube = with_namespace(Kube.connect(str(back.kubeconfig)), namespace)
    put_secret(kube, namespace, cluster_secret(back))  # the cluster moved: a new Secret
    eventually(lambda: (cm(back_kube, "for-far", namespace) or {}).get("data") == changed,
               message="far's app synced to the cluster its Secret names now")
    eventually(lambda: not ctl.status("far").get("error"), message="far recovered")
    said = everything_said([kube, back_kube], namespace, logs)
    assert gone.token not in said and back.token not in said
    back_kube.delete("v1", "Namespace", name=namespace)


def said_by(*results: Result) -> str:
    """Everything the CLI printed, stdout and stderr."""
    return "\n".join(r.stdout + r.stderr for r in results)


def test_the_cli_syncs_diffs_and_gets_each_app_in_its_cluster(
        control_plane: LocalControlPlane, kube: Kube, far_kube: Kube, far: LocalControlPlane,
        namespace: str, git_repo: GitRepo, tmp_path: Path) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    put_secret(kube, namespace, cluster_secret(far))
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace,
                                                 {"name": "far"}),
                     "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
                     "far/cm.yaml": configmap("for-far"), "far/rc.yaml": raycluster("demo"),
                     "here/cm.yaml": configmap("for-here")})
    synced = cli.sync("--repo", git_repo.url, "--apps", "apps")
    assert synced.exit_code == 0, synced.output
    assert cm(far_kube, "for-far", namespace) and cm(kube, "for-here", namespace)
    assert cm(kube, "for-far", namespace) is None and cm(far_kube, "for-here", namespace) is None
    assert kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace) is None

    far_kube.patch("v1", "ConfigMap", name="for-far", namespace=namespace,
                   patch={"data": {"k": "drifted-in-far"}},
                   content_type="application/merge-patch+json", field_manager="tests")
    diff = cli.raw("diff", *cli.kube_args, "--cache-dir", str(cli.cache), "--repo", git_repo.url,
               "--apps", "apps", "--app", "far")
    assert diff.exit_code == 1, diff.output
    assert "-  k: drifted-in-far" in diff.stdout and "+  k: v" in diff.stdout

    scale_far_workers(far_kube, namespace, replicas=3)  # as the autoscaler would
    got = cli.raw("get", *cli.kube_args, "far", "-o", "json")
    assert got.exit_code == 0, got.output
    (rc,) = [n for n in json.loads(got.stdout)["tree"] if n["kind"] == "RayCluster"]
    cpu = next(g for g in rc["workerGroups"] if g["group"] == "cpu")
    assert (cpu["gitReplicas"], cpu["liveReplicas"]) == (1, 3)  # far's object, read live

    restarted = cli.raw("restart", *cli.kube_args, "far", "demo", "--dry-run")  # found in far
    waited = cli.raw("wait", *cli.kube_args, "--health", "--timeout", "120", "here")
    deleted = cli.raw("delete", *cli.kube_args, "far")  # cascades in far, by far's inventory
    assert (restarted.exit_code, waited.exit_code, deleted.exit_code) == (0, 0, 0), \
        restarted.output + waited.output + deleted.output
    eventually(lambda: cm(far_kube, "for-far", namespace) is None, message="deleted in far")
    assert cm(kube, "for-here", namespace) is not None
    assert far.token not in said_by(synced, diff, got, restarted, waited, deleted)


def test_restart_and_delete_read_the_cluster_secrets_of_argocd_namespace(
        control_plane: LocalControlPlane, kube: Kube, far_kube: Kube, far: LocalControlPlane,
        namespace: str, git_repo: GitRepo, tmp_path: Path) -> None:
    """With Argo CD the cluster Secrets are in its namespace: ``--argocd-namespace``
    tells ``restart`` and ``delete`` where, as it tells ``sync`` and ``diff``."""
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    argo = f"{namespace}-argo"
    with_namespace(kube, argo)
    try:
        put_secret(kube, argo, cluster_secret(far))
        put_secret(kube, namespace, cluster_secret(far))  # for this sync, without Projects
        git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace,
                                                     {"name": "far"}),
                         "far/cm.yaml": configmap("for-far"), "far/rc.yaml": raycluster("demo")})
        synced = cli.sync("--repo", git_repo.url, "--apps", "apps")
        assert synced.exit_code == 0, synced.output
        kube.delete("v1", "Secret", name="cluster-far", namespace=namespace)
        lost = cli.raw("restart", *cli.kube_args, "far", "demo", "--dry-run")
        assert lost.exit_code != 0 and "far" in lost.output  # not in --control-namespace
        argo_args = [*cli.kube_args, "--argocd-namespace", argo]
        restarted = cli.raw("restart", *argo_args, "far", "demo", "--dry-run")
        deleted = cli.raw("delete", *argo_args, "far")
        assert (restarted.exit_code, deleted.exit_code) == (0, 0), \
            restarted.output + deleted.output
        eventually(lambda: cm(far_kube, "for-far", namespace) is None, message="deleted in far")
        assert far.token not in said_by(synced, lost, restarted, deleted)
    finally:
        kube.delete("v1", "Namespace", name=argo)


def scale_far_workers(kube: Kube, namespace: str, *, replicas: int) -> None:
    rc = kube.get("ray.io/v1", "RayCluster", name="demo", namespace=namespace)
    assert rc is not None
    next(g for g in rc["spec"]["workerGroupSpecs"] if g["groupName"] == "cpu")["replicas"] = \
        replicas
    kube.replace(rc, field_manager="autoscaler")


@pytest.mark.parametrize(("destination", "message"), UNKNOWN, ids=["name", "server"])
def test_the_cli_refuses_an_unknown_cluster(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, destination: dict[str, str], message: str) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace, destination),
                     "far/cm.yaml": configmap("for-far")})
    result = cli.sync("--repo", git_repo.url, "--apps", "apps")
    assert result.exit_code == 2
    assert "InvalidSpecError" in result.output and message in result.output
    assert cm(kube, "for-far", namespace) is None
    diff = cli.raw("diff", *cli.kube_args, "--cache-dir", str(cli.cache), "--repo", git_repo.url,
               "--apps", "apps", "-o", "json")
    (shown,) = json.loads(diff.stdout)
    assert (diff.exit_code, shown["status"], shown["resources"]) == (2, "Unknown", [])
    assert (shown["conditions"][0]["type"], shown["conditions"][0]["message"]) == (
        "InvalidSpecError", message)


def test_the_cli_fails_only_the_apps_of_an_unreachable_cluster(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    # This plane's credentials at a port nothing listens on: a cluster that is gone.
    gone = dataclasses.replace(control_plane, port=LocalControlPlane.free_port())
    put_secret(kube, namespace, cluster_secret(gone))
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace,
                                                 {"name": "far"}),
                     "apps/here.yaml": application("here", git_repo.url, namespace, "here"),
                     "far/cm.yaml": configmap("for-far"), "here/cm.yaml": configmap("for-here")})
    result = cli.sync("--repo", git_repo.url, "--apps", "apps")
    assert result.exit_code == 2
    assert cm(kube, "for-here", namespace) is not None  # our app synced all the same
    assert "app here: Succeeded" in result.stdout
    unreachable = (f"destination cluster 'far' ({gone.url}) is unreachable: its API server "
                   "does not answer")
    assert unreachable in result.stdout and "app far: Failed" in result.stdout
    status = cli.raw("status", *cli.kube_args, "-o", "json", "far")
    (row,) = json.loads(status.stdout)
    assert row["sync"] == "Unknown" and unreachable in row["error"]
    diff = cli.raw("diff", *cli.kube_args, "--cache-dir", str(cli.cache), "--repo", git_repo.url,
               "--apps", "apps", "-o", "json")
    shown = {a["app"]: a for a in json.loads(diff.stdout)}
    assert diff.exit_code == 2 and unreachable in shown["far"]["error"]
    assert shown["here"]["status"] == "Synced"
    assert gone.token not in said_by(result, status, diff)


def test_the_cli_says_why_when_it_may_not_list_the_cluster_secrets(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    limited_kube(kube, control_plane, namespace, tmp_path)  # ConfigMaps only, no Secrets
    git_repo.commit({"apps/far.yaml": remote_app("far", git_repo.url, namespace,
                                                 {"name": "far"}),
                     "far/cm.yaml": configmap("for-far")})
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    diff = cli.raw("diff", "--kubeconfig", str(tmp_path / "limited.kubeconfig"),
               "--control-namespace", namespace, "--cache-dir", str(cli.cache),
               "--repo", git_repo.url, "--apps", "apps", "-o", "json")
    (shown,) = json.loads(diff.stdout)
    assert (diff.exit_code, shown["resources"]) == (2, [])
    assert (shown["conditions"][0]["type"], shown["conditions"][0]["message"]) == (
        "InvalidSpecError", "there are no clusters with this name: far (gitops-ray may not "
        f"list the cluster Secrets in {namespace})")
