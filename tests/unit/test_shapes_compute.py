"""ComputeConfig -> RayCluster: a complete autoscaling cluster, and precise errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.shapes import (
    Catalog,
    ShapesConfig,
    expand_pod_shapes,
    load_catalog,
    load_patches,
    render_compute_config,
)
from gitops_ray.sync.validate import validate_ray_objects

DATA = Path(__file__).parent.parent / "testdata" / "shapes"
DOC: dict[str, Any] = yaml.safe_load((DATA / "compute-config.yaml").read_text())
AWS = ShapesConfig(provider="aws")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog((DATA / "instance-types.yaml").read_text(), origin="instance-types.yaml")


def render(doc: dict[str, Any], catalog: Catalog, config: ShapesConfig = AWS,
           **changes: Any) -> dict[str, Any]:
    doc = {**copy.deepcopy(doc), **changes}
    return render_compute_config(doc, catalog, config)


def workers(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}


def test_renders_a_complete_autoscaling_raycluster(catalog: Catalog) -> None:
    cluster = render(DOC, catalog)
    assert cluster["apiVersion"] == "ray.io/v1"
    assert cluster["kind"] == "RayCluster"
    assert cluster["metadata"] == {
        "name": "analytics", "labels": {"team": "data", "gitops-ray.io/compute-config":
                                        "analytics"},
        "annotations": {"owner": "data-platform"}}
    spec = cluster["spec"]
    assert (spec["rayVersion"], spec["enableInTreeAutoscaling"]) == ("2.52.0", True)
    assert spec["autoscalerOptions"] == {"idleTimeoutSeconds": 120}
    groups = workers(cluster)
    assert [(g["minReplicas"], g["maxReplicas"]) for g in groups.values()] == [(1, 20), (0, 4)]
    assert all("replicas" not in g for g in groups.values())  # the autoscaler owns it
    assert validate_ray_objects([cluster]) == []  # what the sync stage checks before applying


def test_head_group(catalog: Catalog) -> None:
    head = render(DOC, catalog)["spec"]["headGroupSpec"]
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "0"}
    container = head["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("ray-head", "rayproject/ray:2.52.0")
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "gcs-server": 6379, "dashboard": 8265, "client": 10001, "serve": 8000, "metrics": 8080}
    assert container["env"] == [{"name": "RAY_LOG_LEVEL", "value": "info"}]
    assert container["resources"]["limits"] == {"cpu": "8", "memory": "32Gi"}
    assert head["template"]["spec"]["priorityClassName"] == "ray"
    assert head["template"]["metadata"]["labels"] == {
        "gitops-ray.io/instance-type": "8CPU-32GB", "gitops-ray.io/market-type": "ON_DEMAND",
        "gitops-ray.io/ray-node-type": "head", "gitops-ray.io/zone": "us-west-2a"}


def test_worker_groups_are_shaped_and_patched(catalog: Catalog) -> None:
    groups = workers(render(DOC, catalog))
    spot, gpu = groups["cpu-spot"]["template"], groups["gpu"]["template"]
    assert spot["spec"]["nodeSelector"] == {"eks.amazonaws.com/capacityType": "SPOT"}
    assert spot["metadata"]["annotations"]["gitops-ray.io/market-type"] == "SPOT"
    ray = gpu["spec"]["containers"][0]
    assert ray["image"] == "rayproject/ray:2.52.0-gpu"
    assert ray["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]  # merged by name
    assert ray["env"] == [{"name": "RAY_LOG_LEVEL", "value": "info"}]
    assert gpu["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    assert gpu["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "Tesla-T4"
    assert groups["gpu"]["rayStartParams"] == {
        "num-cpus": "8", "num-gpus": "1",
        "resources": '"{\\"accelerator_type:T4\\": 1, \\"custom_label\\": 2}"'}


def test_user_patches_run_after_defaults(catalog: Catalog) -> None:
    patches = load_patches((DATA / "patches.yaml").read_text(), origin="patches.yaml")
    cluster = render_compute_config(copy.deepcopy(DOC), catalog, AWS, patches=patches)
    assert workers(cluster)["cpu-spot"]["template"]["spec"]["nodeSelector"]["pool"] == \
        "spot-workers"
    assert "pool" not in cluster["spec"]["headGroupSpec"]["template"]["spec"].get(
        "nodeSelector", {})


def test_defaults_group_name_image_version_and_zones(catalog: Catalog) -> None:
    cluster = render({"apiVersion": "gitops-ray.io/v1alpha1", "kind": "ComputeConfig",
                      "metadata": {"name": "mini", "namespace": "ml"},
                      "image": "registry.example.com/ray:2.49.1-py311",
                      "zones": ["us-west-2a", "us-west-2b"],
                      "head_node": {"instance_type": "2CPU-8GB"},
                      "worker_nodes": [{"instance_type": "8CPU-32GB-1xT4", "max_nodes": 2,
                                        "zones": ["us-west-2c"]}]}, catalog)
    assert cluster["metadata"]["namespace"] == "ml"
    assert cluster["spec"]["rayVersion"] == "2.49.1"
    assert "autoscalerOptions" not in cluster["spec"]
    [group] = cluster["spec"]["workerGroupSpecs"]
    assert (group["groupName"], group["minReplicas"]) == ("8cpu-32gb-1xt4", 0)
    assert group["template"]["spec"]["containers"][0]["image"] == \
        "registry.example.com/ray:2.49.1-py311"
    assert group["template"]["metadata"]["labels"]["gitops-ray.io/zone"] == "us-west-2c"
    head_labels = cluster["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]
    assert "gitops-ray.io/zone" not in head_labels  # several zones: not pinned


def test_expanded_in_place_by_expand_pod_shapes(tmp_path: Path) -> None:
    (tmp_path / ".gitops-ray").mkdir()
    (tmp_path / ".gitops-ray" / "instance-types.yaml").write_text(
        (DATA / "instance-types.yaml").read_text())
    other = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ray"}}
    out = expand_pod_shapes([other, copy.deepcopy(DOC)], repo_root=tmp_path, app_dir=tmp_path)
    assert out[0] is other
    assert (out[1]["kind"], out[1]["metadata"]["name"]) == ("RayCluster", "analytics")


@pytest.mark.parametrize(("changes", "message"), [
    ({"metadata": {"name": "a" * 54}},
     "ComputeConfig aaaa" + "a" * 50 + ": metadata.name must be a DNS-1035 label of at most 53"),
    ({"metadata": {"name": "Analytics"}}, "metadata.name must be a DNS-1035 label"),
    ({"apiVersion": "gitops-ray.io/v1"}, "ComputeConfig: apiVersion must be "
                                         "gitops-ray.io/v1alpha1, got 'gitops-ray.io/v1'"),
    ({"worker_node": []}, "ComputeConfig analytics: unknown field(s) worker_node (allowed: "),
    ({"ray_version": None, "image": "ray:latest"}, "set ray_version (or an image tagged"),
    ({"ray_version": "latest"}, "ray_version 'latest' is not a version such as 2.52.0"),
    ({"head_node": None}, "head_node with an instance_type is required"),
    ({"head_node": {"instance_type": "2CPU-8GB", "min_nodes": 1}},
     "ComputeConfig analytics: head_node: unknown field(s) min_nodes"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB", "max_nodes": 1},
                       {"instance_type": "2CPU-8GB", "max_nodes": 2}]},
     "worker_nodes[1]: group name '2cpu-8gb' is already used by worker_nodes[0]"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB", "min_nodes": 3, "max_nodes": 2}]},
     "worker_nodes[0]: min_nodes 3 is greater than max_nodes 2"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB"}]},
     "worker_nodes[0]: max_nodes is required"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB", "max_nodes": -1}]},
     "worker_nodes[0]: max_nodes: must be a whole number >= 0, got -1"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB", "max_nodes": 1, "name": "GPU_1"}]},
     "worker_nodes[0]: name 'GPU_1' must be a DNS-1123 label"),
    ({"worker_nodes": [{"instance_type": "2CPU-8GB", "max_nodes": 1, "market_type": "spot"}]},
     "worker_nodes[0]: market_type 'spot' must be SPOT or ON_DEMAND"),
    ({"worker_nodes": [{"instance_type": "4CPU-16GB", "max_nodes": 1}]},
     "ComputeConfig analytics: worker_nodes[0]: unknown instance type '4CPU-16GB' (known: "),
    ({"worker_nodes": [{"max_nodes": 1}]}, "worker_nodes[0]: instance_type is required"),
    ({"zones": "us-west-2a"}, "zones: must be a list of zone names"),
    ({"advanced_instance_config": {"containers": []}},
     "advanced_instance_config: unknown field(s) containers (allowed: metadata, spec)"),
])
def test_errors(catalog: Catalog, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError) as error:
        render(DOC, catalog, **changes)
    assert message in str(error.value)
