"""In-cluster pod shapes and render reuse, end to end against the real API server.

* The chart's ``instanceTypes``/``patches`` values become ConfigMaps (``helm template``),
  the chart's config names them (``podShapes.*``), the controller reads them through
  watches by name and a RayCluster naming an instance type gets its resources; editing
  the ConfigMap changes the live RayCluster. The CLI's ``sync`` does the same with flags.
* An app whose manifest is a symlink into a shared directory: a commit that changes only
  the shared file reaches the live RayCluster (the render digest hashes link targets).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, application, push_payload
from tests.integration.test_chart import CHART, helm
from tests.samples import raycluster

SHAPE = "gitops-ray.io/instance-type"
MANAGER = "platform-team"


def shaped_raycluster(name: str, instance_type: str) -> dict[str, Any]:
    """The sample RayCluster whose ``cpu`` worker group names ``instance_type``."""
    rc = raycluster(name)
    group = rc["spec"]["workerGroupSpecs"][0]
    group["template"].setdefault("metadata", {})["annotations"] = {SHAPE: instance_type}
    return rc


def chart_objects(helm_bin: Path, tmp_path: Path, namespace: str,
                  values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``helm template`` of the chart with ``values``: its ConfigMaps by name."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    text = helm(helm_bin, tmp_path, "template", "gr", str(CHART), "-n", namespace,
                "-f", str(values_file))
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(text)
            if d and d["kind"] == "ConfigMap"}


def apply_configmap(kube: Kube, configmap: dict[str, Any]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": configmap["metadata"]["name"], "namespace": configmap["metadata"]["namespace"]},
        "data": configmap["data"]}
    kube.apply(body, field_manager=MANAGER, force=True)


def worker(live: dict[str, Any] | None) -> dict[str, Any]:
    """The live ``cpu`` worker pod spec (``{}`` while there is no cluster)."""
    if not live:
        return {}
    return dict(live["spec"]["workerGroupSpecs"][0]["template"]["spec"])


def worker_limits(live: dict[str, Any] | None) -> dict[str, Any]:
    spec = worker(live)
    return dict(spec["containers"][0]["resources"]["limits"]) if spec else {}


def instance_types(cpu: int) -> dict[str, Any]:
    return {"instanceTypes": [{"name": "4CPU-8GB",
                               "resources": {"CPU": cpu, "memory": "8Gi"}}],
            "patches": [{"kind": "Pod", "selector": f"{SHAPE} in (4CPU-8GB)",
                         "patch": [{"op": "add", "path": "/spec/nodeSelector/pool",
                                    "value": "from-the-chart"}]}]}


def test_chart_instance_types_reach_live_rayclusters_and_edits_rerender(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, helm_bin: Path, tmp_path: Path) -> None:
    objects = chart_objects(helm_bin, tmp_path, namespace, instance_types(cpu=4))
    # the settings ConfigMap is named by its content (gr-gitops-ray-config-<digest>)
    settings = next(o for o in objects.values() if "config.yaml" in (o.get("data") or {}))
    config = yaml.safe_load(settings["data"]["config.yaml"])
    assert config["podShapes"] == {"instanceTypesConfigMap": "gr-gitops-ray-instance-types",
                                   "patchesConfigMap": "gr-gitops-ray-patches"}
    for name in config["podShapes"].values():
        apply_configmap(kube, objects[name])
    git_repo.commit({"apps/shaped.yaml": application("shaped", git_repo.url, namespace),
                     "manifests/rc.yaml": shaped_raycluster("shaped", "4CPU-8GB")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}],
                            "podShapes": config["podShapes"]})

    live = eventually(lambda: worker_limits(ctl.live("shaped")).get("cpu") == "4"
                      and ctl.live("shaped"), message="the chart's instance type applied")
    assert worker_limits(live) == {"cpu": "4", "memory": "8Gi"}
    assert worker(live)["nodeSelector"] == {"pool": "from-the-chart"}

    edited = chart_objects(helm_bin, tmp_path, namespace, instance_types(cpu=6))
    apply_configmap(kube, edited["gr-gitops-ray-instance-types"])
    eventually(lambda: worker_limits(ctl.live("shaped")).get("cpu") == "6",
               message="the edited ConfigMap reached the live RayCluster")


def test_cli_sync_reads_the_configmaps_named_by_flags(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        helm_bin: Path, tmp_path: Path) -> None:
    objects = chart_objects(helm_bin, tmp_path, namespace, instance_types(cpu=3))
    apply_configmap(kube, objects["gr-gitops-ray-instance-types"])
    git_repo.commit({"ray/rc.yaml": shaped_raycluster("cli", "4CPU-8GB")})
    args = ["sync", "--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
            namespace, "--cache-dir", str(tmp_path / "c"), "--repo", git_repo.url, "--path",
            "ray", "--dest-namespace", namespace, "--name", "cli"]
    without = CliRunner().invoke(main, args)
    assert without.exit_code != 0 and "unknown instance type '4CPU-8GB'" in without.output
    result = CliRunner().invoke(main, [*args, "--instance-types-configmap",
                                       "gr-gitops-ray-instance-types"])
    assert result.exit_code == 0, result.output
    assert worker_limits(kube.get(RC_API, "RayCluster", name="cli",
                                  namespace=namespace))["cpu"] == "3"


def test_a_commit_to_a_symlinked_file_only_is_applied(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    rc = raycluster("linked")
    git_repo.write({"apps/linked.yaml": application("linked", git_repo.url, namespace,
                                                    path="a"),
                    "shared/rc.yaml": rc})
    (git_repo.work / "a").mkdir()
    (git_repo.work / "a" / "rc.yaml").symlink_to("../shared/rc.yaml")
    git_repo.commit({})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: (ctl.live("linked") or {}).get("spec", {}).get("rayVersion")
               == "2.52.0", message="first sync")

    changed = copy.deepcopy(rc)
    changed["spec"]["rayVersion"] = "2.53.0"
    sha = git_repo.commit({"shared/rc.yaml": changed})
    assert ctl.webhook(push_payload(git_repo, sha)).status_code == 202
    eventually(lambda: ctl.status("linked").get("revision") == sha and
               ctl.live("linked")["spec"]["rayVersion"] == "2.53.0",  # type: ignore[index]
               message="the commit to shared/rc.yaml reached the live RayCluster")
