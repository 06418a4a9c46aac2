"""The CLI tells the truth (issue 14, section 4): through the commands, as a user runs them.

Real API server, real git; no controller runs in these tests, on purpose: ``wait`` and
``status --refresh`` must work without one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.entry import LAUNCHER
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.samples import raycluster

ROOT = Path(__file__).resolve().parents[2]
BROKEN_YAML = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: {unclosed\n"


def status_of(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    result = cli("status", "-o", "json", *args)
    assert result.exit_code == 0, result.output
    return {row["name"]: row for row in json.loads(result.stdout)}


def make_ready(kube: Kube, namespace: str, name: str) -> None:
    """Report the RayCluster ready, as the KubeRay operator would (status subresource)."""
    live = kube.get("ray.io/v1", "RayCluster", name=name, namespace=namespace)
    assert live is not None
    live["status"] = {"state": "ready", "observedGeneration": live["metadata"]["generation"]}
    kube.replace(live, field_manager="kuberay-operator", subresource="status")


def test_an_apps_directory_without_applications_is_an_error(cli: Cli,
                                                            git_repo: GitRepo) -> None:
    git_repo.commit({"apps/not-an-app.yaml": {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "x"}},
                     "ray/rc.yaml": raycluster("x")})
    for command in ("diff", "sync", "render"):
        result = cli(command, "--repo", git_repo.url, "--apps", "apps")
        assert result.exit_code == 2, (command, result.output)
        assert "no Argo CD Applications in 'apps'" in result.output, command


def test_one_bad_application_does_not_hide_the_others(cli: Cli, git_repo: GitRepo) -> None:
    git_repo.commit({"apps/good.yaml": app_yaml(git_repo, "good", cli.namespace, "good"),
                     "apps/bad.yaml": app_yaml(git_repo, "bad", cli.namespace, "bad"),
                     "good/rc.yaml": raycluster("good"), "bad/rc.yaml": BROKEN_YAML})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    result = cli("diff", *args, "-o", "json")
    assert result.exit_code == 2, result.output
    report = {entry["app"]: entry for entry in json.loads(result.stdout)}
    assert report["good"]["status"] == "OutOfSync" and report["good"]["resources"]
    assert report["bad"]["status"] == "Unknown" and "bad/rc.yaml" in report["bad"]["error"]
    text = cli("diff", *args)
    assert text.exit_code == 2
    assert "+++ desired/ray.io/RayCluster:" in text.stdout and "app bad:" in text.output


def test_status_and_wait_tell_the_truth_without_a_controller(
        cli: Cli, git_repo: GitRepo, kube: Kube) -> None:
    rc = raycluster("truth")
    git_repo.commit({"ray/rc.yaml": rc})
    app = ["--repo", git_repo.url, "--path", "ray", "--dest-namespace", cli.namespace,
           "--name", "truth"]
    assert cli("sync", *app).exit_code == 0
    assert status_of(cli)["truth"]["health"] == "Progressing"  # no operator has reported
    early = cli("wait", "--health", "--timeout", "0", "truth")
    assert early.exit_code == 2 and "Waiting for the KubeRay operator" in early.output

    make_ready(kube, cli.namespace, "truth")  # no controller will notice: wait must
    ready = cli("wait", "--health", "--sync", "--timeout", "60", "truth")
    assert ready.exit_code == 0, ready.output
    misspelled = cli("wait", "--timeout", "600", "truht")
    assert misspelled.exit_code == 2 and "did you mean truth?" in misspelled.output

    git_repo.commit({"ray/rc.yaml": BROKEN_YAML})
    failed = cli("sync", *app)
    assert failed.exit_code == 2
    after = status_of(cli)["truth"]
    assert after["sync"] == "Unknown" and after["lastSync"] == "Failed"
    assert "ray/rc.yaml" in after["error"]

    rc["spec"]["rayVersion"] = "2.53.0"
    git_repo.commit({"ray/rc.yaml": rc})
    assert status_of(cli)["truth"]["sync"] == "Unknown"  # recorded: nothing compared yet
    refreshed = status_of(cli, "--refresh", *app)["truth"]
    assert (refreshed["sync"], refreshed["error"]) == ("OutOfSync", "")
    assert status_of(cli)["truth"]["sync"] == "OutOfSync"  # --refresh recorded it
    drift = cli("wait", "--sync", "--timeout", "0", *app, "truth")
    assert drift.exit_code == 2 and "truth (OutOfSync" in drift.output
    assert cli("sync", *app).exit_code == 0
    live = cli("wait", "--sync", "--timeout", "60", *app, "truth")
    assert live.exit_code == 0, live.output


def test_global_flags_anywhere_env_repo_and_closest_names(
        cli: Cli, git_repo: GitRepo, control_plane: LocalControlPlane, tmp_path: Path) -> None:
    git_repo.commit({"apps/prod.yaml": app_yaml(git_repo, "prod", cli.namespace, "ray"),
                     "ray/rc.yaml": raycluster("glob")})
    assert cli("sync", "--repo", git_repo.url, "--apps", "apps").exit_code == 0
    namespace = ["--control-namespace", cli.namespace, "-o", "json"]
    kubeconfig = str(control_plane.kubeconfig)
    wrong = {"KUBECONFIG": str(tmp_path / "missing"), "GITOPS_RAY_KUBECONFIG": None}
    runner = CliRunner()
    before = runner.invoke(main, ["--kubeconfig", kubeconfig, "--log-level", "debug",
                                  "status", *namespace], env=wrong)
    after = runner.invoke(main, ["status", *namespace, "--log-level", "debug",
                                 "--kubeconfig", kubeconfig], env=wrong)
    for result in (before, after):
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)[0]["name"] == "prod"
    assert runner.invoke(main, ["status", *namespace], env=wrong).exit_code == 2

    env = {"GITOPS_RAY_REPO": git_repo.url, "GITOPS_RAY_APPS": "apps"}
    quiet = cli("diff", env=env)
    assert quiet.exit_code == 0, quiet.output  # repo and apps from the environment
    typo = cli("diff", "--app", "prd", env=env)
    assert typo.exit_code == 2 and "no such app: prd (did you mean prod?)" in typo.output
    unknown = cli("status", "prdo")
    assert unknown.exit_code == 2 and "did you mean prod?" in unknown.output


def test_readme_render_example_works_from_the_checkout(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "gitops-ray"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("ARGOCD_APP_NAME", "ARGOCD_APP_NAMESPACE", "ARGOCD_APP_SOURCE_PATH"):
        env.pop(name, None)
    readme = subprocess.run([str(exe), "render", "--local", "examples/shapes/apps/analytics"],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert readme.returncode == 0, readme.stderr
    head = next(yaml.safe_load_all(readme.stdout))["spec"]["headGroupSpec"]["template"]
    assert head["metadata"]["annotations"]["gitops-ray.io/instance-type"] == "8CPU-32GB"
    app = str(ROOT / "examples" / "shapes" / "apps" / "analytics")
    runner = CliRunner()
    explicit = runner.invoke(main, ["render", "--local", app, "--repo-root",
                                    str(ROOT / "examples" / "shapes")])
    assert explicit.exit_code == 0 and explicit.stdout == readme.stdout
    wrong_root = runner.invoke(main, ["render", "--local", app, "--repo-root", str(ROOT)])
    assert wrong_root.exit_code == 2 and "unknown instance type" in wrong_root.output
    outside = runner.invoke(main, ["render", "--local", app, "--repo-root", str(tmp_path)])
    assert outside.exit_code == 2 and "not inside --repo-root" in outside.output


def test_run_takes_the_global_flags_given_before_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    runner = CliRunner()
    before = runner.invoke(main, ["--kubeconfig", str(kubeconfig), "--context", "nope",
                                  "--log-level", "error", "run"], obj=LAUNCHER)
    assert before.exit_code == 2 and "name nope in" in before.output  # both flags reached run
    after = runner.invoke(main, ["--kubeconfig", str(kubeconfig), "--context", "nope", "run",
                                 "--context", "mine"], obj=LAUNCHER)
    assert after.exit_code == 2 and "name mine in" in after.output  # the later flag wins
