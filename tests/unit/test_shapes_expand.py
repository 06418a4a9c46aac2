"""expand_pod_shapes on real config-repo directories: pass-through, shaping, provider
defaults (EKS, Karpenter, GKE, AKS), patch order across files, and errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.notes import collecting
from gitops_ray.render.shapes import ClusterShapes, expand_pod_shapes, load_patches
from gitops_ray.render.shapes.catalog import load_catalog
from tests.samples import raycluster, worker_group

DATA = Path(__file__).parent.parent / "testdata" / "shapes"
CATALOG = (DATA / "instance-types.yaml").read_text()
SPOT_TOLERATION = {"key": "node.anyscale.com/capacity-type", "operator": "Equal",
                   "value": "SPOT", "effect": "NoSchedule"}
ON_DEMAND_TOLERATION = {**SPOT_TOLERATION, "value": "ON_DEMAND"}
GPU_TOLERATION = {"key": "node.anyscale.com/accelerator-type", "operator": "Equal",
                  "value": "GPU", "effect": "NoSchedule"}
NO_GPU_NODES = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "nvidia.com/gpu.count", "operator": "DoesNotExist"}]}]}


def write(root: Path, files: dict[str, Any]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return root


def shaped_cluster(**annotations: dict[str, str]) -> dict[str, Any]:
    """The sample RayCluster with annotations on the templates of named groups."""
    cluster = raycluster(groups=[worker_group("cpu"), worker_group("spot"),
                                 worker_group("gpu")])
    groups = {"head": cluster["spec"]["headGroupSpec"],
              **{g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}}
    for name, values in annotations.items():
        groups[name]["template"].setdefault("metadata", {})["annotations"] = values
    return cluster


def expand(root: Path, manifests: list[dict[str, Any]], app: str = ".",
           **kwargs: Any) -> list[dict[str, Any]]:
    return expand_pod_shapes(manifests, repo_root=root, app_dir=root / app, **kwargs)


def group(obj: dict[str, Any], name: str) -> dict[str, Any]:
    spec = obj["spec"]
    if name == "head":
        return dict(spec["headGroupSpec"])
    return next(g for g in spec["workerGroupSpecs"] if g["groupName"] == name)


def pod(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(group(obj, name)["template"]["spec"])


def it(name: str, market: str = "ON_DEMAND") -> dict[str, str]:
    return {"gitops-ray.io/instance-type": name, "gitops-ray.io/market-type": market}


STANDARD = shaped_cluster(head=it("8CPU-32GB"), cpu=it("2CPU-8GB"),
                          spot=it("8CPU-32GB", "SPOT"), gpu=it("8CPU-32GB-1xT4", "SPOT"))


# -- pass-through ------------------------------------------------------------------------

def test_without_config_or_shapes_manifests_pass_through_as_the_same_objects(
        tmp_path: Path) -> None:
    manifests = [raycluster(), {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "x"}}]
    assert expand(tmp_path, manifests) is manifests


def test_config_without_shapes_applies_no_default_patches(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/shapes.yaml": "provider: aws\n",
                     ".gitops-ray/instance-types.yaml": CATALOG})
    manifests = [raycluster()]
    out = expand(tmp_path, manifests)
    assert out == [raycluster()]
    assert out[0] is manifests[0]


def test_a_broken_catalog_does_not_break_apps_without_shapes(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": "x: {resources: {CPU: 1}}"})
    assert expand(tmp_path, [raycluster()]) == [raycluster()]
    with pytest.raises(RenderError, match=r"\.gitops-ray/instance-types.yaml: instance type 'x'"):
        expand(tmp_path, [shaped_cluster(head=it("x"))])


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}


@pytest.mark.parametrize("broken", ["- [", "{not: a list}", "- {kind: Pod, patch: []}"])
def test_a_broken_patch_file_fails_only_the_apps_it_could_concern(
        tmp_path: Path, broken: str) -> None:
    write(tmp_path, {".gitops-ray/patches.yaml": broken,
                     ".gitops-ray/instance-types.yaml": CATALOG})
    assert expand(tmp_path, [CONFIGMAP]) == [CONFIGMAP]  # no shapes, kind not named
    with pytest.raises(RenderError, match=r"^\.gitops-ray/patches.yaml"):
        expand(tmp_path, [copy.deepcopy(STANDARD)])  # uses shapes


def test_a_broken_patch_file_naming_an_apps_kind_fails_that_app(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/patches.yaml": "- {kind: Pod, patch: [{op: nope}]}"})
    with pytest.raises(RenderError, match=r"patches\[0\]\.patch\[0\]"):
        expand(tmp_path, [raycluster()])  # Ray pods: Pod patches would reach them
    assert expand(tmp_path, [CONFIGMAP]) == [CONFIGMAP]
    write(tmp_path, {".gitops-ray/patches.yaml": "- {kind: ConfigMap, patch: [{op: nope}]}"})
    with pytest.raises(RenderError, match=r"patches\[0\]\.patch\[0\]"):
        expand(tmp_path, [CONFIGMAP])


def test_input_is_not_mutated(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    manifests = [copy.deepcopy(STANDARD)]
    expand(tmp_path, manifests)
    assert manifests == [STANDARD]


# -- shaping -----------------------------------------------------------------------------

def test_shape_fills_ray_container_ray_start_params_and_facts(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "none"}})
    cluster = shaped_cluster(head=it("8CPU-32GB"), gpu=it("8CPU-32GB-1xT4", "SPOT"))
    cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "0"
    [out] = expand(tmp_path, [cluster])
    head, gpu = group(out, "head"), group(out, "gpu")
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "0"}  # user wins
    assert head["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi"}, "limits": {"cpu": "8", "memory": "32Gi"}}
    assert gpu["rayStartParams"] == {"num-cpus": "8", "num-gpus": "1",
                                     "resources": '"{\\"accelerator_type:T4\\": 1}"'}
    assert gpu["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    facts = {"gitops-ray.io/accelerator-type": "T4", "gitops-ray.io/instance-type":
             "8CPU-32GB-1xT4", "gitops-ray.io/market-type": "SPOT",
             "gitops-ray.io/ray-node-type": "worker"}
    assert gpu["template"]["metadata"]["labels"] == facts
    assert gpu["template"]["metadata"]["annotations"] == facts
    # provider none: only the instance type's own node selector
    assert pod(out, "gpu")["nodeSelector"] == {"node.kubernetes.io/instance-type": "g4dn.2xlarge"}
    assert "tolerations" not in pod(out, "gpu")
    assert group(out, "cpu") == worker_group("cpu")  # no shape named: untouched


def test_market_type_defaults_to_on_demand_and_label_opts_in(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    cluster = raycluster(groups=[worker_group("cpu")])
    cluster["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {
        "labels": {"gitops-ray.io/instance-type": "2CPU-8GB"}}
    [out] = expand(tmp_path, [cluster])
    annotations = group(out, "cpu")["template"]["metadata"]["annotations"]
    assert annotations["gitops-ray.io/market-type"] == "ON_DEMAND"


def test_custom_resources_merge_with_the_users(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    cluster = shaped_cluster(gpu=it("4CPU-16GB-1xL4"))
    cluster["spec"]["workerGroupSpecs"][2]["rayStartParams"] = {
        "resources": '"{\\"team\\": 1, \\"accelerator_type:L4\\": 2}"', "num-gpus": "0"}
    [out] = expand(tmp_path, [cluster])
    assert group(out, "gpu")["rayStartParams"] == {
        "num-gpus": "0", "num-cpus": "4",
        "resources": '"{\\"accelerator_type:L4\\": 2, \\"team\\": 1}"'}


def test_multi_host_tpu_sets_num_of_hosts(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    [out] = expand(tmp_path, [shaped_cluster(gpu=it("8CPU-16GB-TPU-V4-2x2x2"))])
    tpu = group(out, "gpu")
    assert tpu["numOfHosts"] == 2
    assert tpu["rayStartParams"]["resources"] == \
        '"{\\"TPU\\": 4, \\"accelerator_type:TPU-V4\\": 1}"'
    assert tpu["template"]["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    with pytest.raises(RenderError, match="head group: instance type '8CPU-16GB-TPU-V4-2x2x2' "
                                          "is a multi-host TPU slice"):
        expand(tmp_path, [shaped_cluster(head=it("8CPU-16GB-TPU-V4-2x2x2"))])


def test_sidecar_reservation_is_kept_out_of_the_ray_container(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG, ".gitops-ray/shapes.yaml":
                     {"sidecarReservation": {"cpu": "500m", "memory": "1Gi"}}})
    cluster = shaped_cluster(cpu=it("2CPU-8GB"))
    cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"].append(
        {"name": "vector", "image": "vector", "resources": {"requests": {"cpu": "500m"}}})
    [out] = expand(tmp_path, [cluster])
    ray = pod(out, "cpu")["containers"][0]
    assert ray["resources"]["requests"] == {"cpu": "1500m", "memory": "7Gi"}
    assert group(out, "cpu")["rayStartParams"]["num-cpus"] == "2"  # rounded up, like the autoscaler


def test_sidecars_beyond_the_reservation_are_an_error(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"sidecarReservation": {"cpu": "250m"}}})
    cluster = shaped_cluster(cpu=it("2CPU-8GB"))
    spec = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    spec["containers"].append({"name": "vector", "resources": {"limits": {"cpu": "500m"}}})
    with pytest.raises(RenderError) as error:
        expand(tmp_path, [cluster])
    assert str(error.value) == (
        "RayCluster demo worker group 'cpu': containers request cpu 2250m (ray-worker 1750m, "
        "vector 500m) but instance type '2CPU-8GB' allows 2; the sidecars must fit in "
        "sidecarReservation (cpu 250m, .gitops-ray/shapes.yaml)")
    spec["containers"].pop()
    spec["initContainers"] = [{"name": "proxy", "restartPolicy": "Always",
                               "resources": {"requests": {"memory": "1Gi"}}}]
    with pytest.raises(RenderError, match=r"request memory 9Gi \(ray-worker 8Gi, proxy 1Gi\)"):
        expand(tmp_path, [cluster])


def test_shape_not_larger_than_reservation_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"sidecarReservation": {"memory": "8Gi"}}})
    with pytest.raises(RenderError) as error:
        expand(tmp_path, [shaped_cluster(cpu=it("2CPU-8GB"))])
    assert str(error.value).startswith(
        "RayCluster demo worker group 'cpu': instance type '2CPU-8GB' has memory 8Gi, not more "
        "than the sidecar reservation of 8Gi")


# -- provider defaults -------------------------------------------------------------------

def test_eks_defaults_on_spot_and_gpu_groups(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "aws"}})
    [out] = expand(tmp_path, [STANDARD])
    spot, gpu, cpu = pod(out, "spot"), pod(out, "gpu"), pod(out, "cpu")
    assert spot["nodeSelector"] == {"eks.amazonaws.com/capacityType": "SPOT"}
    assert spot["tolerations"] == [ON_DEMAND_TOLERATION, SPOT_TOLERATION]
    assert spot["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == NO_GPU_NODES
    assert gpu["nodeSelector"] == {"eks.amazonaws.com/capacityType": "SPOT",
                                   "nvidia.com/gpu.product": "Tesla-T4",
                                   "node.kubernetes.io/instance-type": "g4dn.2xlarge"}
    assert gpu["tolerations"] == [ON_DEMAND_TOLERATION, SPOT_TOLERATION, GPU_TOLERATION]
    assert "affinity" not in gpu
    assert cpu["nodeSelector"] == {"eks.amazonaws.com/capacityType": "ON_DEMAND"}
    on_demand = group(out, "cpu")["template"]["metadata"]["annotations"]
    assert on_demand["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    assert "cluster-autoscaler.kubernetes.io/safe-to-evict" not in \
        group(out, "spot")["template"]["metadata"]["annotations"]


def test_karpenter_replaces_the_provider_market_rules(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "aws", "karpenter": True}})
    [out] = expand(tmp_path, [STANDARD])
    assert pod(out, "spot")["nodeSelector"] == {"karpenter.sh/capacity-type": "spot"}
    assert pod(out, "cpu")["nodeSelector"] == {"karpenter.sh/capacity-type": "on-demand"}


def test_gke_defaults_on_spot_and_gpu_groups(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "gcp"}})
    [out] = expand(tmp_path, [STANDARD])
    spot, gpu, cpu = pod(out, "spot"), pod(out, "gpu"), pod(out, "cpu")
    assert spot["nodeSelector"] == {"cloud.google.com/gke-spot": "true"}
    assert "affinity" not in spot
    assert gpu["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert GPU_TOLERATION in gpu["tolerations"]
    terms = cpu["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [  # ORed: not a spot node
        {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "NotIn",
                               "values": ["true"]}]}]
    assert "nodeSelector" not in cpu


def test_aks_spot_defaults(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "azure"}})
    [out] = expand(tmp_path, [STANDARD])
    spot = pod(out, "spot")
    assert {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal",
            "value": "spot", "effect": "NoSchedule"} in spot["tolerations"]
    terms = spot["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "kubernetes.azure.com/scalesetpriority", "operator": "In", "values": ["spot"]}]}]


def test_generic_defaults_and_custom_accelerator_labels(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG, ".gitops-ray/shapes.yaml": {
        "acceleratorNodeSelectorKey": "example.com/gpu", "acceleratorNodeSelectors": {
            "L4": "l4-custom"}}})
    [out] = expand(tmp_path, [shaped_cluster(gpu=it("4CPU-16GB-1xL4"), cpu=it("2CPU-8GB"))])
    assert pod(out, "gpu")["nodeSelector"] == {"example.com/gpu": "l4-custom"}
    assert pod(out, "cpu")["tolerations"] == [ON_DEMAND_TOLERATION]
    assert "nodeSelector" not in pod(out, "cpu")


def test_zone_selector(tmp_path: Path) -> None:
    zoned = shaped_cluster(cpu={**it("2CPU-8GB"), "gitops-ray.io/zone": "us-west-2a"})
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    [off] = expand(tmp_path, [zoned])
    assert group(off, "cpu")["template"]["metadata"]["labels"]["gitops-ray.io/zone"] == \
        "us-west-2a"
    assert "nodeSelector" not in pod(off, "cpu")
    write(tmp_path, {".gitops-ray/shapes.yaml": {"enableZoneSelector": True}})
    [on] = expand(tmp_path, [zoned])
    assert pod(on, "cpu")["nodeSelector"] == {"topology.kubernetes.io/zone": "us-west-2a"}


def test_instance_type_patches_follow_defaults(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG + """
pinned:
  resources: {CPU: 2, memory: 8Gi}
  nodeSelector: {eks.amazonaws.com/capacityType: RESERVED}
""", ".gitops-ray/shapes.yaml": {"provider": "aws"}})
    [out] = expand(tmp_path, [shaped_cluster(cpu=it("pinned"), gpu=it(
        "48CPU-192GB-4xA10G-EFA"))])
    assert pod(out, "cpu")["nodeSelector"] == {"eks.amazonaws.com/capacityType": "RESERVED"}
    gpu = pod(out, "gpu")
    assert gpu["nodeSelector"]["kubernetes.io/arch"] == "amd64"
    assert gpu["tolerations"][-1] == {"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}


# -- user patches, order, overrides ------------------------------------------------------

def test_patch_order_configmap_then_repo_then_app(tmp_path: Path) -> None:
    write(tmp_path, {
        ".gitops-ray/instance-types.yaml": CATALOG,
        ".gitops-ray/patches.yaml": (DATA / "patches.yaml").read_text(),
        "apps/a/.gitops-ray/patches.yaml":
            "- {kind: Pod, selector: 'gitops-ray.io/accelerator-type in (T4)', "
            "patch: [{op: add, path: /spec/nodeSelector/pool, value: gpu}]}"})
    cluster = copy.deepcopy(STANDARD)
    cluster["metadata"]["labels"] = {"team": "data"}
    cm_patches = load_patches("- {kind: Pod, patch: [{op: add, path: /spec/nodeSelector/pool, "
                              "value: cluster}, {op: add, path: /spec/schedulerName, "
                              "value: volcano}]}", origin="ConfigMap gitops-ray/patches")
    [out] = expand(tmp_path, [cluster], app="apps/a", extra_patches=cm_patches)
    assert pod(out, "head")["nodeSelector"]["pool"] == "cluster"
    assert pod(out, "cpu")["nodeSelector"]["pool"] == "workers"
    assert pod(out, "spot")["nodeSelector"]["pool"] == "spot-workers"
    assert pod(out, "gpu")["nodeSelector"]["pool"] == "gpu"
    assert pod(out, "gpu")["schedulerName"] == "volcano"
    assert out["spec"]["upgradeStrategy"] == {"type": "Recreate"}  # top-level kind patch


def test_user_pod_patches_reach_groups_without_shapes_but_write_no_facts(
        tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/patches.yaml": (DATA / "patches.yaml").read_text()})
    [out] = expand(tmp_path, [raycluster()])
    assert pod(out, "cpu")["nodeSelector"] == {"pool": "workers"}
    assert "nodeSelector" not in pod(out, "head")
    assert "metadata" not in group(out, "cpu")["template"]
    assert "upgradeStrategy" not in out["spec"]  # selector team=data does not match


def test_pod_patches_reach_rayjobs_and_rayservices(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "gcp"}})
    spec = shaped_cluster(spot=it("8CPU-32GB", "SPOT"))["spec"]
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
           "spec": {"entrypoint": "python x.py", "rayClusterSpec": copy.deepcopy(spec)}}
    service = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s"},
               "spec": {"rayClusterConfig": copy.deepcopy(spec)}}
    for out, key in zip(expand(tmp_path, [job, service]), ("rayClusterSpec", "rayClusterConfig"),
                        strict=True):
        spot = next(g for g in out["spec"][key]["workerGroupSpecs"] if g["groupName"] == "spot")
        assert spot["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-spot": "true"}


def test_app_overrides_catalog_and_settings(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/shapes.yaml": {"provider": "aws"},
                     "apps/a/.gitops-ray/instance-types.yaml":
                         "2CPU-8GB: {resources: {CPU: 2, memory: 6Gi}}",
                     "apps/a/.gitops-ray/shapes.yaml": {"provider": "gcp"}})
    [out] = expand(tmp_path, [shaped_cluster(spot=it("2CPU-8GB", "SPOT"))], app="apps/a")
    spot = pod(out, "spot")
    assert spot["containers"][0]["resources"]["limits"]["memory"] == "6Gi"
    assert spot["nodeSelector"] == {"cloud.google.com/gke-spot": "true"}


def test_configmap_catalog_is_used_and_repo_wins(tmp_path: Path) -> None:
    configmap = load_catalog("only-in-cluster: {resources: {CPU: 3, memory: 3Gi}}\n"
                             "2CPU-8GB: {resources: {CPU: 2, memory: 1Gi}}", origin="ConfigMap")
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    [out] = expand(tmp_path, [shaped_cluster(cpu=it("only-in-cluster"), spot=it("2CPU-8GB"))],
                   extra_catalog=configmap)
    assert pod(out, "cpu")["containers"][0]["resources"]["limits"]["cpu"] == "3"
    assert pod(out, "spot")["containers"][0]["resources"]["limits"]["memory"] == "8Gi"


def chart_configmaps(types: list[dict[str, Any]], patches: list[dict[str, Any]]
                     ) -> ClusterShapes:
    """The two ConfigMaps as the Helm chart writes them (lists under one key)."""
    def cm(name: str, key: str, body: object) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ops", "resourceVersion": "7"},
                "data": {"version": "v1", key: yaml.safe_dump(body)}}
    return ClusterShapes.of(cm("gr-instance-types", "instance_types.yaml",
                               {"instance_types": types}),
                            cm("gr-patches", "patches.yaml", {"patches": patches}))


def test_cluster_configmaps_shape_groups_and_the_repo_wins(tmp_path: Path) -> None:
    cluster = chart_configmaps(
        [{"name": "in-cluster", "resources": {"CPU": 3, "memory": "3Gi"}},
         {"name": "2CPU-8GB", "resources": {"CPU": 2, "memory": "1Gi"}}],
        [{"kind": "Pod", "patch": [{"op": "add", "path": "/spec/nodeSelector/pool",
                                    "value": "cluster"}]}])
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG,
                     ".gitops-ray/patches.yaml": "- {kind: Pod, selector: 'gitops-ray.io/"
                     "instance-type in (2CPU-8GB)', patch: [{op: add, path: "
                     "/spec/nodeSelector/pool, value: repo}]}"})
    [out] = expand(tmp_path, [shaped_cluster(cpu=it("in-cluster"), spot=it("2CPU-8GB"))],
                   cluster=cluster)
    assert pod(out, "cpu")["containers"][0]["resources"]["limits"]["cpu"] == "3"
    assert pod(out, "spot")["containers"][0]["resources"]["limits"]["memory"] == "8Gi"
    assert pod(out, "cpu")["nodeSelector"]["pool"] == "cluster"
    assert pod(out, "spot")["nodeSelector"]["pool"] == "repo"  # repo patches run later


def test_cluster_version_follows_what_render_reads() -> None:
    base = chart_configmaps([{"name": "a", "resources": {"CPU": 1, "memory": "1Gi"}}], [])
    relabelled = copy.deepcopy(dict(base.instance_types or {}))
    relabelled["metadata"]["resourceVersion"] = "8"
    assert ClusterShapes().version == ""
    assert base.version != ""
    assert ClusterShapes.of(relabelled, base.patches_configmap).version == base.version
    edited = chart_configmaps([{"name": "a", "resources": {"CPU": 2, "memory": "1Gi"}}], [])
    assert edited.version != base.version


def test_broken_cluster_catalog_fails_only_apps_that_use_shapes(tmp_path: Path) -> None:
    broken = ClusterShapes.of({"metadata": {"name": "it", "namespace": "ops"},
                               "data": {"instance_types.yaml": "a: {resources: {cpu: 1}}"}},
                              None)
    plain = raycluster()
    assert expand(tmp_path, [plain], cluster=broken) == [plain]
    with pytest.raises(RenderError, match="ConfigMap ops/it: instance type 'a'"):
        expand(tmp_path, [shaped_cluster(cpu=it("a"))], cluster=broken)


def test_broken_cluster_patches_fail_only_apps_they_could_concern(tmp_path: Path) -> None:
    broken = ClusterShapes.of(None, {"metadata": {"name": "p", "namespace": "ops"},
                                     "data": {"patches.yaml": "- {kind: Service}"}})
    service = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with collecting() as notes:
        assert expand(tmp_path, [service], cluster=broken) == [service]
    assert "ignored ConfigMap ops/p" in notes[0]
    with pytest.raises(RenderError, match="ConfigMap ops/p patches\\[0\\]"):
        expand(tmp_path, [{**service, "kind": "Service"}], cluster=broken)


# -- errors ------------------------------------------------------------------------------

def test_unknown_instance_type_names_object_group_and_catalog(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    cluster = shaped_cluster(gpu=it("8CPU-32GB-1xT5"))
    cluster["metadata"]["namespace"] = "ml"
    with pytest.raises(RenderError) as error:
        expand(tmp_path, [cluster])
    message = str(error.value)
    assert message.startswith("RayCluster ml/demo worker group 'gpu': unknown instance type "
                              "'8CPU-32GB-1xT5' (known: 2CPU-8GB, 48CPU-192GB-4xA10G-EFA,")
    assert message.endswith("catalog: .gitops-ray/instance-types.yaml)")


def test_patch_path_not_found_names_file_index_and_group(tmp_path: Path) -> None:
    write(tmp_path, {"apps/a/.gitops-ray/patches.yaml":
                     "- {kind: Pod, patch: [{op: add, path: /spec/a, value: 1}]}\n"
                     "- {kind: Pod, selector: 'gitops-ray.io/ray-node-type in (head)', patch: "
                     "[{op: replace, path: /spec/containers/0/securityContext/runAsUser, "
                     "value: 1}]}"})
    with pytest.raises(RenderError) as error:
        expand(tmp_path, [raycluster(groups=[])], app="apps/a")
    assert str(error.value).startswith(
        "apps/a/.gitops-ray/patches.yaml patches[1] (kind Pod, selector "
        "'gitops-ray.io/ray-node-type in (head)') on RayCluster demo head group: patch[0] "
        "replace /spec/containers/0/securityContext/runAsUser: path not found")


def test_selector_syntax_error_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/patches.yaml":
                     "- {kind: Pod, selector: 'a notin b', patch: [{op: remove, path: /a}]}"})
    with pytest.raises(RenderError, match=r"^\.gitops-ray/patches.yaml patches\[0\]: selector "
                                          r"'a notin b': expected '\(' at column 9$"):
        expand(tmp_path, [raycluster()])


@pytest.mark.parametrize(("annotations", "message"), [
    ({"gitops-ray.io/market-type": "PREEMPTIBLE"},
     "worker group 'cpu': gitops-ray.io/market-type is 'PREEMPTIBLE'; use SPOT or ON_DEMAND"),
    ({"gitops-ray.io/instance-type": "8CPU-32GB-1xT4", "gitops-ray.io/accelerator-type": "L4"},
     "gitops-ray.io/accelerator-type 'L4' contradicts instance type '8CPU-32GB-1xT4'"),
    ({"gitops-ray.io/accelerator-type": "A10"}, "accelerator 'A10' is not a Ray accelerator"),
    ({"gitops-ray.io/zone": "us west"}, "gitops-ray.io/zone 'us west' is not a valid label"),
])
def test_invalid_pod_facts(tmp_path: Path, annotations: dict[str, str], message: str) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    with pytest.raises(RenderError) as error:
        expand(tmp_path, [shaped_cluster(cpu=annotations)])
    assert message in str(error.value)


def test_settings_errors(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/shapes.yaml": "provider: eks\n"})
    with pytest.raises(RenderError, match=r"^\.gitops-ray/shapes.yaml: provider: unknown "
                                          r"provider 'eks' \(use none, generic, aws, gcp, "):
        expand(tmp_path, [shaped_cluster(cpu=it("2CPU-8GB"))])
    write(tmp_path, {".gitops-ray/shapes.yaml": "sidecarReservations: {}\n"})
    with pytest.raises(RenderError, match=r"unknown setting\(s\) sidecarReservations"):
        expand(tmp_path, [shaped_cluster(cpu=it("2CPU-8GB"))])


def test_no_ray_container_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-ray/instance-types.yaml": CATALOG})
    cluster = shaped_cluster(cpu=it("2CPU-8GB"))
    cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"] = []
    with pytest.raises(RenderError, match="worker group 'cpu': the pod template has no "
                                          "containers"):
        expand(tmp_path, [cluster])


def test_config_symlinked_outside_the_repo_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"patches.yaml": "- {kind: Pod}"})
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitops-ray").symlink_to(outside)
    with pytest.raises(RenderError, match=r"patches\.yaml: resolves outside the repository"):
        expand(repo, [raycluster()])
