"""``gitops-ray diff`` / ``render`` / ``sync`` / ``status`` end to end: real git, real helm,
real kubectl kustomize, real API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import requests
import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.samples import raycluster, worker_group


def autoscale(cp: LocalControlPlane, namespace: str, name: str, replicas: int) -> None:
    requests.patch(f"{cp.url}/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{name}",
                   json=[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                          "value": replicas}], timeout=10, verify=str(cp.workdir / "ca.crt"),
                   headers={"Authorization": f"Bearer {cp.token}",
                            "Content-Type": "application/json-patch+json"}).raise_for_status()


def test_plain_app_diff_sync_and_autoscaler(cli: Cli, git_repo: GitRepo,
                                            control_plane: LocalControlPlane) -> None:
    git_repo.commit({"apps/ray.yaml": app_yaml(git_repo, "ray", cli.namespace, "ray"),
                     "ray/rc.yaml": raycluster("plain")})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    before = cli("diff", *args)
    assert before.exit_code == 1, before.output
    assert "+++ desired/ray.io/RayCluster:" in before.output
    assert cli("sync", *args).exit_code == 0
    assert cli("diff", *args).exit_code == 0
    autoscale(control_plane, cli.namespace, "plain", 6)
    quiet = cli("diff", *args)
    assert quiet.exit_code == 0, quiet.output  # the autoscaler's replicas are not drift
    strict = cli("diff", *args, "--no-builtin-rules")
    assert strict.exit_code == 1
    assert "replicas: 6" in strict.output or "replicas: 1" in strict.output
    report = json.loads(cli("diff", *args, "--no-builtin-rules", "-o", "json").stdout)
    assert report[0]["status"] == "OutOfSync"
    status = cli("status", "-o", "json")
    assert json.loads(status.stdout)[0]["sync"] == "Synced"


def test_json_diff_summarises_worker_group_changes_by_name(
        cli: Cli, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    git_repo.commit({"apps/ray.yaml": app_yaml(git_repo, "ray", cli.namespace, "ray"),
                     "ray/rc.yaml": raycluster("groups")})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args).exit_code == 0
    autoscale(control_plane, cli.namespace, "groups", 3)
    changed = raycluster("groups")
    gpu = changed["spec"]["workerGroupSpecs"][1]
    gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4"
    changed["spec"]["workerGroupSpecs"].append(worker_group("big"))
    git_repo.commit({"ray/rc.yaml": changed})
    result = cli("diff", *args, "-o", "json")
    assert result.exit_code == 1, result.output
    [record] = json.loads(result.stdout)[0]["resources"]
    assert record["workerGroups"] == {
        "gpu": {"changed": {"template.spec.containers[0].resources.limits.cpu":
                            {"from": "1", "to": "4"}}},
        "big": {"group": "added"},
    }  # the autoscaler's replicas of "cpu" are not a change


def test_helm_and_kustomize_apps(cli: Cli, git_repo: GitRepo) -> None:
    chart = {"Chart.yaml": "apiVersion: v2\nname: ray\nversion: 0.1.0\n",
             "values.yaml": "workers: 2\n",
             "templates/rc.yaml": yaml.safe_dump(raycluster("{{ .Release.Name }}-rc")).replace(
                 "replicas: 1", "replicas: {{ .Values.workers }}")}
    files: dict[str, object] = {f"chart/{k}": v for k, v in chart.items()}
    files["kust/kustomization.yaml"] = "resources: [cm.yaml]\nnamePrefix: k-\n"
    files["kust/cm.yaml"] = {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "cfg"}, "data": {"a": "1"}}
    helm_app = app_yaml(git_repo, "helm-app", cli.namespace, "chart")
    helm_app["spec"]["source"]["helm"] = {"releaseName": "hr"}
    files["apps/helm.yaml"] = helm_app
    files["apps/kust.yaml"] = app_yaml(git_repo, "kust-app", cli.namespace, "kust")
    git_repo.commit(files)
    rendered = list(yaml.safe_load_all(cli("render", "--repo", git_repo.url, "--apps", "apps",
                                           "--app", "helm-app").stdout))
    assert rendered[0]["metadata"]["name"] == "hr-rc"
    assert rendered[0]["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args).exit_code == 0
    assert cli("diff", *args).exit_code == 0
    kube = Kube.connect(cli.kube_args[1])
    assert kube.get("v1", "ConfigMap", name="k-cfg", namespace=cli.namespace) is not None
    assert kube.get("ray.io/v1", "RayCluster", name="hr-rc", namespace=cli.namespace) is not None


def test_ignore_rules_from_the_application(cli: Cli, git_repo: GitRepo,
                                           control_plane: LocalControlPlane) -> None:
    rules = [{"group": "ray.*", "kind": "Ray*", "jqPathExpressions": [
        ".spec.workerGroupSpecs[] | select(.groupName == \"cpu\") | .replicas"]},
        {"group": "ray.io", "kind": "RayCluster", "jsonPointers": ["/spec/missing/path"]},
        {"kind": "RayCluster", "jqPathExpressions": [".spec.rayVersion"]},  # core group only
        {"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [".nope[]"]}]
    rc = raycluster("rules", autoscaling=False)
    git_repo.commit({"apps/a.yaml": app_yaml(git_repo, "rules", cli.namespace, "ray",
                                             ignoreDifferences=rules),
                     "ray/rc.yaml": rc})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args).exit_code == 0
    autoscale(control_plane, cli.namespace, "rules", 4)  # group "cpu" is index 0
    result = cli("diff", *args)
    assert result.exit_code == 0, result.output  # jq rule with glob group/kind matched
    assert "Cannot iterate over null" in result.output or "skipped" in result.output
    rc["spec"]["rayVersion"] = "2.53.0"
    git_repo.commit({"ray/rc.yaml": rc})
    changed = cli("diff", *args)
    assert changed.exit_code == 1  # the core-group rule does not match ray.io
    assert "rayVersion: 2.53.0" in changed.output


def test_invalid_jq_expression_is_a_config_error(cli: Cli, git_repo: GitRepo) -> None:
    git_repo.commit({"apps/a.yaml": app_yaml(
        git_repo, "badjq", cli.namespace, "ray",
        ignoreDifferences=[{"group": "ray.io", "kind": "RayCluster",
                            "jqPathExpressions": [".spec.workerGroupSpecs[."]}]),
        "ray/rc.yaml": raycluster("badjq")})
    result = cli("diff", "--repo", git_repo.url, "--apps", "apps")
    assert result.exit_code == 2
    assert "badjq" in result.output and ".spec.workerGroupSpecs[." in result.output


def test_malformed_yaml_and_symlink_escape(cli: Cli, git_repo: GitRepo) -> None:
    git_repo.commit({"ray/rc.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
                                    "data: {a: [1,\n"})
    result = cli("diff", "--repo", git_repo.url, "--path", "ray", "--dest-namespace",
                 cli.namespace)
    assert result.exit_code == 2
    assert "ray/rc.yaml:6" in result.output and "invalid YAML" in result.output
    os.symlink("/etc/hostname", git_repo.work / "ray" / "host.yaml")
    git_repo.commit({"ray/rc.yaml": yaml.safe_dump(raycluster("ok"))})
    result = cli("diff", "--repo", git_repo.url, "--path", "ray", "--dest-namespace",
                 cli.namespace)
    assert result.exit_code == 2
    assert "host.yaml" in result.output and "outside" in result.output


def test_unreachable_repo_and_api_server(cli: Cli, tmp_path: Path, git_repo: GitRepo) -> None:
    result = cli("diff", "--repo", (tmp_path / "nope.git").as_uri(), "--path", ".")
    assert result.exit_code == 2
    assert "nope.git" in result.output
    git_repo.commit({"ray/rc.yaml": raycluster("x")})
    bad = tmp_path / "kubeconfig"
    bad.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    result = CliRunner().invoke(main, ["diff", "--kubeconfig", str(bad), "--repo",
                                       git_repo.url, "--path", "ray"])
    assert result.exit_code == 2
    assert "unreachable" in result.output


def test_the_installed_command(control_plane: LocalControlPlane, git_repo: GitRepo,
                               namespace: str, tmp_path: Path) -> None:
    git_repo.commit({"ray/rc.yaml": raycluster("bin")})
    exe = Path(sys.executable).parent / "gitops-ray"
    result = subprocess.run([str(exe), "diff", "--kubeconfig", str(control_plane.kubeconfig),
                             "--repo", git_repo.url, "--path", "ray", "--dest-namespace",
                             namespace, "--cache-dir", str(tmp_path / "c"),
                             "--control-namespace", namespace], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("--- live/")


def test_sync_of_many_apps_in_parallel_reports_as_they_finish_and_isolates_failures(
        cli: Cli, git_repo: GitRepo, kube: Kube) -> None:
    files: dict[str, object] = {}
    for i in range(5):
        files[f"apps/app{i}.yaml"] = app_yaml(git_repo, f"app{i}", cli.namespace, f"ray{i}")
        files[f"ray{i}/rc.yaml"] = raycluster(f"par{i}")
    files["ray2/rc.yaml"] = ("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n"
                             "  name: {unclosed\n")  # invalid YAML
    git_repo.commit(files)
    result = cli("sync", "--repo", git_repo.url, "--apps", "apps", "--parallel", "3")
    assert result.exit_code == 2, result.output
    objects, closed = [], []  # each app's object lines come together, then its result
    for line in result.stdout.splitlines():
        if "\t" in line:
            objects.append(line.split("\t")[0])
            continue
        name = line.split(" ", 2)[1].rstrip(":")
        assert set(objects) <= {name}, (line, objects)
        closed.append(name)
        objects = []
    assert sorted(closed) == ["app0", "app1", "app2", "app3", "app4"] and not objects
    assert "app app2: Failed (RenderFailed)" in result.stdout
    assert "ray2/rc.yaml" in result.output
    for i in (0, 1, 3, 4):
        assert kube.get("ray.io/v1", "RayCluster", name=f"par{i}",
                        namespace=cli.namespace) is not None
