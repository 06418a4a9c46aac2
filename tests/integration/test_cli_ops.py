"""`sync --dry-run`, `wait`, `render --local` as an Argo CD CMP, and the argocd/ manifests."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.render import parse_application
from localcluster import LocalControlPlane
from tests.harness.git import GitRepo
from tests.samples import raycluster

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_sync_writes_nothing_then_wait(control_plane: LocalControlPlane, kube: Kube,
                                               namespace: str, git_repo: GitRepo,
                                               tmp_path: Path) -> None:
    git_repo.commit({"ray/rc.yaml": raycluster("dry")})
    kube_args = ["--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
                 namespace]
    app = [*kube_args, "--cache-dir", str(tmp_path / "c"), "--repo", git_repo.url,
           "--path", "ray", "--dest-namespace", namespace, "--name", "dry"]
    runner = CliRunner()
    dry = runner.invoke(main, ["sync", *app, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "created" in dry.stdout and "(dry run)" in dry.output
    assert kube.get("ray.io/v1", "RayCluster", name="dry", namespace=namespace) is None
    unknown = runner.invoke(main, ["wait", *kube_args, "--sync", "--timeout", "600", "dry"])
    assert unknown.exit_code == 2 and "no such app: dry" in unknown.output  # no record
    assert runner.invoke(main, ["sync", *app]).exit_code == 0
    done = runner.invoke(main, ["wait", *kube_args, "--sync", "--timeout", "30", "dry"])
    assert done.exit_code == 0, done.output


def test_render_as_config_management_plugin(monkeypatch: object) -> None:
    app_dir = ROOT / "examples" / "shapes" / "apps" / "analytics"
    monkeypatch.setenv("ARGOCD_APP_NAME", "analytics")  # type: ignore[attr-defined]
    monkeypatch.setenv("ARGOCD_APP_NAMESPACE", "ray-prod")  # type: ignore[attr-defined]
    monkeypatch.setenv("ARGOCD_APP_SOURCE_PATH", "apps/analytics")  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, ["render", "--local", str(app_dir)])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs[0]["kind"] == "RayCluster"
    assert docs[0]["metadata"]["namespace"] == "ray-prod"
    assert docs[0]["spec"]["enableInTreeAutoscaling"] is True
    head = docs[0]["spec"]["headGroupSpec"]["template"]
    assert head["metadata"]["annotations"]["gitops-ray.io/instance-type"] == "8CPU-32GB"


def test_argocd_manifests_are_valid_applications() -> None:
    for path in [ROOT / "argocd" / "gitops-ray.application.yaml",
                 *sorted((ROOT / "argocd" / "examples").glob("*.yaml")),
                 *sorted((ROOT / "examples" / "demo" / "apps").glob("*.yaml"))]:
        app = parse_application(yaml.safe_load(path.read_text()), origin=str(path))
        assert app.name, path
    plugin = yaml.safe_load((ROOT / "argocd" / "cmp" / "plugin.yaml").read_text())
    assert plugin["kind"] == "ConfigManagementPlugin"
    assert plugin["spec"]["generate"]["command"][:3] == ["gitops-ray", "render", "--local"]
