"""docs/install.md in git mode, block by block, on the Ray stack (tests/docs_commands.py).

The page's own commands run with real kubectl, real helm (the chart of this checkout) and
this checkout's ``gitops-ray``, against the e2e tier's control plane, whose
kube-controller-manager, kube-scheduler and kwok nodes make the chart's Deployment roll
out (kwok marks the pod Running and Ready; it runs no container). The controller the pod
would run is played by ``gitops-ray run`` as a local process (there is no kubelet),
started the way the pod starts: the ``config.yaml`` helm installed, a token of the
chart's ServiceAccount (so exactly the chart's RBAC), and the webhook Secret's value as
its secret file. The config repository is served over smart HTTP behind Basic auth, so
the page's credentials Secret is what lets the controller read it.

The reader's names are replaced by the test's: the repository URL and its credential
prefix, the namespaces (``gitops-ray``, ``ray-prod``, ``ray-dev``), and the files
``./github-token`` and ``./webhook-secret``. The release name stays ``gitops-ray``, so
``deployment/gitops-ray`` is the chart's full name as on the page.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gitops_ray.kube import Kube
from gitops_ray.sync.records import record_name
from localcluster import LocalControlPlane
from tests.docs_commands import Shell, block, cluster_runners, installed_config, tool_env, yaml_file
from tests.gitserver import serve_git
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, service_account_kubeconfig
from tests.integration.test_chart import CHART
from tests.samples import raycluster

RC_API = "ray.io/v1"
TOKEN = secrets.token_hex(12)
WEBHOOK_SECRET = secrets.token_hex(12)


@pytest.fixture
def names(kube: Kube) -> Iterator[dict[str, str]]:
    """The test's namespaces for the page's; the page itself creates the control one."""
    suffix = secrets.token_hex(3)
    made = {"gitops-ray": f"docs-{suffix}", "ray-prod": f"docs-prod-{suffix}",
            "ray-dev": f"docs-dev-{suffix}"}
    for ns in (made["ray-prod"], made["ray-dev"]):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    field_manager="tests")
    yield made
    for ns in made.values():
        kube.delete("v1", "Namespace", name=ns)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[GitRepo, str]]:
    """A config repo behind Basic auth (user x-access-token): (repo, its URL)."""
    repo = GitRepo(tmp_path / "served")
    with serve_git(tmp_path / "served", username="x-access-token", token=TOKEN) as base:
        yield repo, f"{base}/remote.git"


def _application(url: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "ray-prod", "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": url, "targetRevision": "main",
                                "path": "clusters/prod"},
                     "destination": {"server": "https://kubernetes.default.svc",
                                     "namespace": namespace},
                     "syncPolicy": {"automated": {"prune": True, "selfHeal": True}}}}


def _stand_in(kube: Kube, control_plane: LocalControlPlane, namespace: str,
              workdir: Path, helm_bin: Path) -> ControllerProcess:
    """``gitops-ray run`` as the chart's pod would run it (see the module docstring)."""
    config = yaml.safe_load(installed_config(kube, namespace))
    secret = kube.get("v1", "Secret", name="gitops-ray-webhook", namespace=namespace)
    secret_file = workdir / "webhook-secret-mounted"
    secret_file.write_bytes(base64.b64decode(secret["data"]["secret"]))
    assert config["webhook"]["secretFile"] == "/etc/gitops-ray/webhook/secret"
    config["webhook"]["secretFile"] = str(secret_file)
    kubeconfig = service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                            name="gitops-ray", path=workdir / "sa.kubeconfig")
    return ControllerProcess("docs-pod", config, workdir, args=(f"--helm={helm_bin}",),
                             env={"GITOPS_RAY_KUBECONFIG": str(kubeconfig),
                                  "GITOPS_RAY_WEBHOOK_SECRET": ""})


def _push(ctl: ControllerProcess, url: str, sha: str) -> None:
    body = json.dumps({"ref": "refs/heads/main", "after": sha,
                       "repository": {"clone_url": url, "default_branch": "main"}}).encode()
    digest = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    response = requests.post(ctl.webhook_url, data=body, timeout=10, headers={
        "X-GitHub-Event": "push", "Content-Type": "application/json",
        "X-Hub-Signature-256": f"sha256={digest}"})
    assert response.status_code == 202, response.text


def _ray_version(kube: Kube, namespace: str, name: str = "prod") -> str | None:
    live = kube.get(RC_API, "RayCluster", name=name, namespace=namespace)
    return str(live["spec"]["rayVersion"]) if live else None


@pytest.mark.timeout(1200)  # the whole page, step by step, on 2 shared cores
def test_install_md_git_mode_from_secrets_to_uninstall(
        kube: Kube, control_plane: LocalControlPlane, helm_bin: Path, tmp_path: Path,
        names: dict[str, str], served: tuple[GitRepo, str]) -> None:
    repo, url = served
    team = names["ray-prod"]
    repo.commit({"apps/ray-prod.yaml": _application(url, team),
                 "clusters/prod/raycluster.yaml": raycluster("prod", team)})
    cwd = tmp_path / "reader"
    cwd.mkdir()
    (cwd / "github-token").write_text(TOKEN)
    (cwd / "webhook-secret").write_text(WEBHOOK_SECRET)
    env = tool_env(control_plane.kubeconfig, tmp_path / "home")
    shell = Shell(cwd=cwd, runners=cluster_runners(cwd=cwd, env=env, helm_bin=helm_bin),
                  replace=[("https://github.com/acme/ray-config.git", url),
                           ("https://github.com/acme/", url.rsplit("/", 1)[0] + "/"),
                           ("charts/gitops-ray", str(CHART))],
                  namespaces=names)
    control = names["gitops-ray"]
    started: list[ControllerProcess] = []
    try:
        shell.run(block("install.md", "secrets"))
        shell.run(block("install.md", "install-git-mode"))
        started.append(_stand_in(kube, control_plane, control, tmp_path, helm_bin))
        ctl = started[-1]
        eventually(lambda: _ray_version(kube, team) == "2.52.0", timeout=180,
                   message="the first sync, reading the repo with the page's credentials")

        # verify: the rollout (kwok), the app Synced, its SyncSucceeded Event
        def verified() -> bool:
            record = kube.get("v1", "ConfigMap", name=record_name("ray-prod"),
                              namespace=control)
            return bool(record) and "Synced" in json.dumps(record.get("data", {}))
        eventually(verified, timeout=120, message="the app recorded Synced")
        rollout, status, events = shell.run(block("install.md", "verify"))
        assert "successfully rolled out" in rollout.stdout
        row = next(line.split() for line in status.stdout.splitlines()
                   if line.startswith("ray-prod "))
        assert "Synced" in row, status.stdout
        assert record_name("ray-prod") in events.stdout

        # the webhook Secret: a signed push is applied at once
        sha = repo.commit({"clusters/prod/raycluster.yaml":
                           {**raycluster("prod", team), "spec": {
                               **raycluster("prod", team)["spec"], "rayVersion": "2.53.0"}}})
        _push(ctl, url, sha)
        eventually(lambda: _ray_version(kube, team) == "2.53.0", timeout=120,
                   message="the push applied")

        # RBAC: a ConfigMap next to the RayCluster is forbidden until the page's values
        repo.commit({"clusters/prod/settings.yaml": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "prod-settings", "namespace": team}, "data": {"a": "1"}}})
        (cwd / "rbac-values.yaml").write_text(
            yaml_file("install.md", "rbac-values.yaml")
            .replace("ray-prod", team).replace("ray-dev", names["ray-dev"]))
        shell.run(block("install.md", "rbac"))
        ctl.stop()
        started.append(_stand_in(kube, control_plane, control, tmp_path, helm_bin))
        eventually(lambda: kube.get("v1", "ConfigMap", name="prod-settings", namespace=team),
                   timeout=180, message="the ConfigMap synced with the widened RBAC")

        shell.run(block("install.md", "upgrade"))
        deployment = kube.get("apps/v1", "Deployment", name="gitops-ray", namespace=control)
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == \
            "registry.example.com/platform/gitops-ray:0.1.1"
    except BaseException:  # the release's ClusterRoles would outlive the test
        shell.runners["helm"](shell.argv("helm uninstall gitops-ray -n gitops-ray"))
        raise
    finally:
        for process in started:
            process.stop()
            print(f"--- {process.identity} log (tail) ---\n" + process.text()[-4000:])

    # uninstall: what gitops-ray deployed keeps running
    shell.run(block("install.md", "uninstall"))
    assert _ray_version(kube, team) == "2.53.0"
    assert kube.get("v1", "ConfigMap", name="prod-settings", namespace=team)
    eventually(lambda: kube.get("v1", "Namespace", name=control) is None, timeout=120,
               message="the control namespace deleted")

