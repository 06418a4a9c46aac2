"""Argo CD's UI views of a handed-over app, through the real argocd-server (issue 39).

argocd-server answers the UI's resource tree and diff, ``argocd app resources``, ``argocd
app diff`` and ``argocd app manifests`` from Redis (``app|resources-tree|<app>``,
``app|managed-resources|<app>``), which gitops-ray fills for the apps Argo CD's controller
skips (:mod:`gitops_ray.runtime.argoredis`). Here on the Ray stack (kube-scheduler, kwok
nodes, the KubeRay operator), so the tree has what KubeRay made: a second Argo CD
(argocd-server, repo-server, Redis with a password in the Secret ``argocd-redis``, as
Argo CD installs it) for this module, and gitops-ray in-process (fixture ``gitops_ray``)
pointed at that Redis and that argocd-server (whose ``/api/version`` picks the format).
"""

from __future__ import annotations

import gzip
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import requests

from gitops_ray.kube import Kube
from gitops_ray.kube.client import MERGE_PATCH
from gitops_ray.types import Manifest
from localcluster import LocalControlPlane
from localcluster.argocd import ArgoCD
from tests.argocd.applications import app_name
from tests.argocd.test_gitops_ray_e2e import application, compared, ray_version, status_when
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.namespaces import fresh_namespace
from tests.harness.runtime import Controller
from tests.samples import raycluster

SECRET_VALUE = "s3cret-" + secrets.token_hex(6)
PASSWORD = "redis-" + secrets.token_hex(8)


@pytest.fixture(scope="module")
def ray_stack() -> Iterator[LocalControlPlane]:
    """A Ray stack of this module's own, stopped after it (its group is its own)."""
    with LocalControlPlane(kuberay=True) as cp:
        yield cp


@pytest.fixture(scope="module")
def control_plane(ray_stack: LocalControlPlane) -> LocalControlPlane:
    return ray_stack


@pytest.fixture(scope="module")
def kube(ray_stack: LocalControlPlane) -> Kube:
    return Kube.connect(str(ray_stack.kubeconfig))


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    yield from fresh_namespace(kube, "ui")


@pytest.fixture(scope="module")
def argocd(ray_stack: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ArgoCD]:
    with ArgoCD(ray_stack, workdir=tmp_path_factory.mktemp("argocd-ui"),
                redis_password=PASSWORD) as server:
        yield server


def files(namespace: str, setting: str = "a") -> dict[str, object]:
    settings = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": namespace},
                "data": {"mode": setting}}
    token = {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "token", "namespace": namespace},
             "stringData": {"token": SECRET_VALUE}}
    return {"manifests/demo.yaml": raycluster("demo", namespace),
            "manifests/settings.yaml": settings, "manifests/token.yaml": token}


def tree(argocd: ArgoCD, name: str) -> dict[str, Any]:
    """argocd-server's REST resource tree (the UI's request)."""
    got = requests.get(f"http://{argocd.server}/api/v1/applications/{name}/resource-tree",
                       timeout=60)
    assert got.status_code == 200, got.text
    answer: dict[str, Any] = got.json()
    return answer


def with_children(argocd: ArgoCD, name: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        nodes = tree(argocd, name).get("nodes") or []
        [cluster] = [n for n in nodes if n["kind"] == "RayCluster"] or [None]
        if cluster is None:
            return None
        kinds = {n["kind"] for n in nodes
                 if any(p.get("uid") == cluster["uid"] for p in n.get("parentRefs") or [])}
        return {"cluster": cluster, "nodes": nodes} if {"Pod", "Service"} <= kinds else None
    return check


@pytest.mark.usefixtures("argocd_repo_server")
def test_resources_tree_diff_and_manifests_of_a_handed_over_app(
        argocd: ArgoCD, gitops_ray: Controller, make_app: Callable[[Manifest], Manifest],
        git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    sha = git_repo.commit(files(namespace))
    name = app_name("ui")
    make_app(application(name, git_repo, namespace, automated=True))
    eventually(lambda: ray_version(kube, namespace), timeout=120, message="synced")
    status_when(argocd, name, compared(sha, "Synced"), "argocd app get: Synced")

    listed = [line.split() for line in argocd.cli("app", "resources", name).stdout.splitlines()]
    assert ["ray.io", "RayCluster", namespace, "demo", "No"] in listed, listed
    assert ["ConfigMap", namespace, "settings", "No"] in listed, listed  # core: no group
    assert ["Secret", namespace, "token", "No"] in listed, listed

    found = eventually(with_children(argocd, name), timeout=120,
                       message="the RayCluster with the Pods and Services KubeRay made")
    made = [n for n in found["nodes"] if n.get("parentRefs")]
    assert {n["kind"] for n in made} >= {"Pod", "Service"}
    head = [n for n in made if n["kind"] == "Pod" and
            {"name": "Ray Group", "value": "head"} in (n.get("info") or [])]
    assert head and head[0]["images"], made

    same = argocd.cli("app", "diff", name, check=False)
    assert same.returncode == 0, same.stdout + json.dumps(stored(argocd, name), indent=1)

    live = argocd.cli("app", "manifests", name, "--source", "live").stdout
    assert "kind: RayCluster" in live and "name: demo" in live and "mode: a" in live
    assert SECRET_VALUE not in live and "++++++++" in live

    kube.patch("v1", "ConfigMap", name="settings", namespace=namespace,
               patch={"data": {"mode": "drifted"}}, content_type=MERGE_PATCH)
    status_when(argocd, name, compared(sha, "OutOfSync"), "gitops-ray sees the drift")
    diff = argocd.cli("app", "diff", name, check=False)
    assert diff.returncode == 1, diff.stderr
    assert "drifted" in diff.stdout and "settings" in diff.stdout
    assert SECRET_VALUE not in diff.stdout

    assert SECRET_VALUE not in json.dumps(stored(argocd, name))


def stored(argocd: ArgoCD, name: str) -> dict[str, Any]:
    """The two entries as Redis holds them (gzip-compressed JSON, with an expiry)."""
    client = redis.Redis(host="127.0.0.1", port=argocd.redis_port, password=PASSWORD)
    out = {}
    for key in (f"app|resources-tree|{name}|1.8.3.gz",
                f"app|managed-resources|{name}|1.8.3.gz"):
        assert 0 < int(client.ttl(key)) <= 3600, key
        raw = client.get(key)
        assert isinstance(raw, bytes)
        out[key] = json.loads(gzip.decompress(raw))
    return out


def test_an_unknown_argo_cd_version_leaves_argo_cds_redis_alone(
        argocd: ArgoCD, start_controller: Callable[..., Controller],
        make_app: Callable[[Manifest], Manifest], git_repo: GitRepo, kube: Kube,
        namespace: str, capfd: pytest.CaptureFixture[str]) -> None:
    start_controller({}, **{"argocd.enabled": True, "argocd.namespace": argocd.namespace,
                            "argocd.redis": argocd.redis, "argocd.version": "v3.7.0"})
    sha = git_repo.commit(files(namespace))
    name = app_name("unknown")
    make_app(application(name, git_repo, namespace, automated=True))
    status_when(argocd, name, compared(sha, "Synced"), "argocd app get: Synced")

    client = redis.Redis(host="127.0.0.1", port=argocd.redis_port, password=PASSWORD)
    assert client.keys(f"app|*|{name}|*") == []
    resources = argocd.cli("app", "resources", name, check=False)
    assert resources.returncode != 0 and "key is missing" in resources.stderr
    said = capfd.readouterr().out
    assert "argocd_views_not_written" in said
    assert "Argo CD v3.7.0: its cache format is not known to gitops-ray" in said
    assert PASSWORD not in said
