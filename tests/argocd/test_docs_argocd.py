"""docs/argocd.md's hand-over, and install.md's Argo CD mode, block by block, with real Argo CD.

The pages' commands (tests/docs_commands.py) run with real kubectl, helm (this checkout's
chart), this checkout's ``gitops-ray`` and the real argocd CLI against the real
argocd-server. Before the hand-over, Argo CD's own application controller (with its
repo-server) deploys the Application, as in a real cluster, so the first sync really
takes fields over from ``argocd-controller``; it deploys without pruning, so an object git
dropped is still there when gitops-ray takes over, and must stay. The controller the
chart's pod would run is ``gitops-ray run`` as a local process with the pod's
ServiceAccount token and the installed ``config.yaml`` (no kubelet), so the Roles the
chart makes in Argo CD's namespace are the only rights it has there.

The reader's names are replaced by the test's: the repository (``file://``; its
credentials Secret is created and named as on the page, and matches no URL here), the
control namespace, and ``ray-prod`` (the Application and its namespace). The preflight
table of argocd.md is checked here too, against Argo CD's own CRD.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.cli.reference import stale
from gitops_ray.kube import Kube
from gitops_ray.sync.records import record_name
from gitops_ray.types import Manifest
from localcluster import LocalControlPlane
from localcluster.argocd import ArgoCD
from localcluster.build import argocd_crds
from tests.argocd.applications import APPLICATION, MANAGED, SKIP_RECONCILE
from tests.docs_commands import (
    DOCS,
    Shell,
    block,
    cluster_runners,
    installed_config,
    run_program,
    tool_env,
)
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, service_account_kubeconfig
from tests.integration.test_chart import CHART
from tests.samples import raycluster

RC_API = "ray.io/v1"


def test_the_preflight_table_is_argo_cds_crd_against_the_parser() -> None:
    assert stale(DOCS, argocd_crds()) == [], (
        "run: python -m gitops_ray.cli.reference docs --argocd-crds "
        "~/.cache/gitops-ray/argocd/<version>/crds.json")


@pytest.fixture
def names(kube: Kube) -> Iterator[dict[str, str]]:
    suffix = secrets.token_hex(3)
    made = {"gitops-ray": f"docs-{suffix}", "ray-prod": f"docs-prod-{suffix}"}
    kube.create({"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": made["ray-prod"]}}, field_manager="tests")
    yield made
    for ns in made.values():
        kube.delete("v1", "Namespace", name=ns)


def _application(name: str, repo: GitRepo) -> Manifest:
    """The Application a team already has: Argo CD syncs it, without pruning."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": repo.url, "targetRevision": "HEAD",
                                "path": "clusters/prod"},
                     "destination": {"server": "https://kubernetes.default.svc",
                                     "namespace": name},
                     "syncPolicy": {"automated": {"prune": False, "selfHeal": True}}}}


def _stand_in(kube: Kube, control_plane: LocalControlPlane, namespace: str,
              workdir: Path) -> ControllerProcess:
    config = yaml.safe_load(installed_config(kube, namespace))
    assert config["argocd"] == {"enabled": True, "namespace": "argocd"}
    secret = kube.get("v1", "Secret", name="gitops-ray-webhook", namespace=namespace)
    (workdir / "webhook-secret-mounted").write_bytes(base64.b64decode(secret["data"]["secret"]))
    config["webhook"]["secretFile"] = str(workdir / "webhook-secret-mounted")
    kubeconfig = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                            name="gitops-ray", path=workdir / "sa.kubeconfig")
    return ControllerProcess("docs-argocd-pod", config, workdir,
                             env={"GITOPS_RAY_KUBECONFIG": str(kubeconfig),
                                  "GITOPS_RAY_WEBHOOK_SECRET": ""})


def _managers(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    live = kube.get(RC_API, "RayCluster", name=name, namespace=namespace) or {}
    return {e["manager"]: e.get("fieldsV1", {})
            for e in live.get("metadata", {}).get("managedFields", [])}


def _annotations(kube: Kube, app: str) -> dict[str, str]:
    got = kube.get(*APPLICATION, name=app, namespace="argocd") or {}
    return dict(got.get("metadata", {}).get("annotations") or {})


def _record(kube: Kube, namespace: str, app: str) -> Manifest | None:
    return kube.get("v1", "ConfigMap", name=record_name(app), namespace=namespace)


@pytest.mark.timeout(1200)  # the whole page, step by step, on 2 shared cores
@pytest.mark.usefixtures("argocd_repo_server")
def test_argocd_md_hand_over_and_back_with_install_md_argo_cd_mode(
        argocd_controller: ArgoCD, kube: Kube, control_plane: LocalControlPlane,
        helm_bin: Path, tmp_path: Path, names: dict[str, str], git_repo: GitRepo,
        make_app: Callable[[Manifest], Manifest]) -> None:
    argocd = argocd_controller
    app, control = names["ray-prod"], names["gitops-ray"]
    git_repo.commit({f"apps/{app}.yaml": _application(app, git_repo),
                     "clusters/prod/raycluster.yaml": raycluster("prod", app),
                     "clusters/prod/old.yaml": raycluster("old", app)})
    make_app(_application(app, git_repo))
    eventually(lambda: "argocd-controller" in _managers(kube, app, "old"), timeout=180,
               message="Argo CD deployed the app")
    git_repo.commit({"clusters/prod/old.yaml": None})  # Argo CD does not prune it

    cwd = tmp_path / "reader"
    cwd.mkdir()
    (cwd / "github-token").write_text("unused")
    (cwd / "webhook-secret").write_text(secrets.token_hex(8))
    env = tool_env(control_plane.kubeconfig, tmp_path / "home")
    runners = cluster_runners(cwd=cwd, env=env, helm_bin=helm_bin)
    runners["argocd"] = lambda argv: run_program(argocd.cli_argv(*argv[1:]), cwd=cwd,
                                                 env=argocd.cli_env())
    shell = Shell(cwd=cwd, runners=runners, namespaces={"gitops-ray": control},
                  replace=[("https://github.com/acme/ray-config.git", git_repo.url),
                           ("https://github.com/acme/", "https://git.example.invalid/"),
                           ("charts/gitops-ray", str(CHART)), ("ray-prod", app)])
    ctl: ControllerProcess | None = None
    try:
        shell.run(block("install.md", "secrets"))
        shell.run(block("install.md", "install-argocd-mode"))
        ctl = _stand_in(kube, control_plane, control, tmp_path)

        # preview: exit 1 (differences: the tracking annotation at least); no field ignored
        (preview,) = shell.run(block("argocd.md", "preview"), codes={"gitops-ray diff": [0, 1]})
        assert "is ignored" not in preview.stderr, preview.stderr

        # hand over: gitops-ray syncs; fields move from argocd-controller; `old` stays
        shell.run(block("argocd.md", "hand-over"))
        kube.patch(*APPLICATION, name=app, namespace="argocd",
                   patch={"spec": {"syncPolicy": {"automated": {"prune": True}}}},
                   content_type="application/merge-patch+json", field_manager="tests")
        eventually(lambda: "gitops-ray" in _managers(kube, app, "prod"), timeout=180,
                   message="gitops-ray's first sync")
        assert "f:spec" not in _managers(kube, app, "prod").get("argocd-controller", {})

        def synced() -> bool:
            got = kube.get(*APPLICATION, name=app, namespace="argocd") or {}
            status = got.get("status") or {}
            return (status.get("sync") or {}).get("status") == "Synced" and \
                [r["name"] for r in status.get("resources", [])] == ["prod"]
        eventually(synced, timeout=120, message="the Application Synced, by gitops-ray")
        assert kube.get(RC_API, "RayCluster", name="old", namespace=app), "pruned"

        get, jsonpath, status = shell.run(block("argocd.md", "verify"))
        assert "Synced" in get.stdout and "prod" in get.stdout
        assert jsonpath.stdout.startswith("Synced ")
        assert any(line.startswith(f"{app} ") for line in status.stdout.splitlines())

        # install.md's hand-back: listed as managed, then handed back; nothing deleted
        listed, _ = shell.run(block("install.md", "hand-back"))
        assert [line.split() for line in listed.stdout.splitlines()
                if line.startswith(f"{app} ")] == [[app, "true"]]
        eventually(lambda: _record(kube, control, app) is None, message="record gone")
        assert not {MANAGED, SKIP_RECONCILE} & set(_annotations(kube, app))
        assert kube.get(RC_API, "RayCluster", name="prod", namespace=app)

        # argocd.md's own hand-back, after handing it over once more
        shell.run(block("argocd.md", "hand-over"))
        eventually(lambda: _record(kube, control, app), message="managed again")
        shell.run(block("argocd.md", "hand-back"))
        eventually(lambda: _record(kube, control, app) is None, message="handed back again")
        assert kube.get(RC_API, "RayCluster", name="prod", namespace=app)
    except BaseException:  # the release's ClusterRoles and Roles would outlive the test
        shell.runners["helm"](shell.argv("helm uninstall gitops-ray -n gitops-ray"))
        raise
    finally:
        if ctl is not None:
            ctl.stop()
            print("--- stand-in log (tail) ---\n" + ctl.text()[-5000:])

    shell.run(block("install.md", "uninstall"))
    assert kube.get("rbac.authorization.k8s.io/v1", "Role", name="gitops-ray-argocd",
                    namespace="argocd") is None
