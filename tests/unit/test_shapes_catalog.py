"""The instance-type catalog: parsing the Anyscale format, and precise validation errors."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.shapes import Catalog, catalog_from_configmap, load_catalog

DATA = Path(__file__).parent.parent / "testdata" / "shapes"
GI = 1024**3


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog((DATA / "instance-types.yaml").read_text(), origin="instance-types.yaml")


def test_parses_every_resource_kind(catalog: Catalog) -> None:
    t4 = catalog.types["8CPU-32GB-1xT4"]
    assert (t4.cpu, t4.memory, t4.gpu, t4.accelerator) == (8, 32 * GI, 1, "T4")
    assert t4.node_selector == {"node.kubernetes.io/instance-type": "g4dn.2xlarge"}
    assert t4.k8s_resources() == {"cpu": 8, "memory": 32 * GI, "nvidia.com/gpu": 1}
    efa = catalog.types["48CPU-192GB-4xA10G-EFA"]
    assert efa.k8s_resources() == {
        "cpu": 48, "memory": 192 * GI, "nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 1,
        "ephemeral-storage": 100 * GI}
    assert efa.cpu_architecture == "amd64"
    assert efa.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists",
                                "effect": "NoSchedule"},)


def test_old_accelerator_key_and_milli_cpus(catalog: Catalog) -> None:
    l4 = catalog.types["4CPU-16GB-1xL4"]
    assert (l4.cpu, l4.accelerator) == (Decimal(4), "L4")


def test_tpu_slices(catalog: Catalog) -> None:
    tpu = catalog.types["8CPU-16GB-TPU-V4-2x2x2"]
    assert (tpu.tpu, tpu.tpu_hosts, tpu.accelerator) == (4, 2, "TPU-V4")
    assert tpu.k8s_resources()["google.com/tpu"] == 4


def test_vendor_gpu_resource_replaces_nvidia() -> None:
    amd = load_catalog("mi300: {resources: {CPU: 8, memory: 64Gi, GPU: 1, amd.com/gpu: 1, "
                       "accelerators: [AMD-Instinct-MI300X-OAM]}}", origin="x")
    assert "nvidia.com/gpu" not in amd.types["mi300"].k8s_resources()


def test_wrapped_form_json_and_empty() -> None:
    wrapped = load_catalog("instance_types: {a: {resources: {CPU: 1, memory: 1Gi}}}", origin="x")
    as_json = load_catalog('{"a": {"resources": {"CPU": 1, "memory": "1Gi"}}}', origin="x")
    assert wrapped.types == as_json.types
    assert load_catalog("", origin="x").types == {}


def test_the_charts_list_form_loads_like_a_mapping() -> None:
    listed = load_catalog("instance_types:\n- {name: a, resources: {CPU: 1, memory: 1Gi}}",
                          origin="x")
    assert listed.types == load_catalog("a: {resources: {CPU: 1, memory: 1Gi}}",
                                        origin="x").types
    assert load_catalog("instance_types: []", origin="x").types == {}


def test_configmap() -> None:
    configmap = yaml.safe_load((DATA / "configmap-instance-types.yaml").read_text())
    catalog = catalog_from_configmap(configmap)
    assert sorted(catalog.types) == ["4CPU-16GB", "8CPU-32GB"]
    assert catalog.origins["4CPU-16GB"] == "ConfigMap gitops-ray/instance-types"
    with pytest.raises(RenderError, match="ConfigMap gitops-ray/x: has no data key"):
        catalog_from_configmap({"metadata": {"name": "x", "namespace": "gitops-ray"}})


def test_merge_later_wins(catalog: Catalog) -> None:
    configmap = catalog_from_configmap(
        yaml.safe_load((DATA / "configmap-instance-types.yaml").read_text()))
    merged = configmap.merged(catalog)
    assert merged.types["8CPU-32GB"].memory == 32 * GI
    assert merged.origins["8CPU-32GB"] == "instance-types.yaml"
    assert merged.origins["4CPU-16GB"] == "ConfigMap gitops-ray/instance-types"


def test_unknown_instance_type_names_choices_and_sources(catalog: Catalog) -> None:
    with pytest.raises(RenderError) as error:
        catalog.get("8CPU-32GB-1xT5", where="RayCluster demo worker group 'gpu'")
    message = str(error.value)
    assert message.startswith("RayCluster demo worker group 'gpu': unknown instance type "
                              "'8CPU-32GB-1xT5' (known: 2CPU-8GB, ")
    assert "catalog: instance-types.yaml" in message
    with pytest.raises(RenderError, match=r"catalog is empty.*no \.gitops-ray/instance-types"):
        Catalog().get("x", where="here")


@pytest.mark.parametrize("name", ["8 CPU", "-8CPU", "8CPU-", "8CPU.32GB", "x" * 64, "8CPU/x"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(RenderError, match=r"f.yaml: instance type .*: invalid name \(use letters"):
        load_catalog(yaml.safe_dump({name: {"resources": {"CPU": 1, "memory": "1Gi"}}}),
                     origin="f.yaml")


def test_names_allow_underscores_and_63_characters() -> None:
    name = "a_" + "b" * 61
    assert name in load_catalog(yaml.safe_dump({name: {"resources": {"CPU": 1, "memory": 1}}}),
                                origin="x").types


@pytest.mark.parametrize(("resources", "message"), [
    ({"CPU": 2, "memory": "8Gi", "accelerators": ["A10"]},
     "accelerator 'A10' is not a Ray accelerator type (see ray.util.accelerators"),
    ({"CPU": 2, "memory": "8Gi", "accelerator_type:t4": 1},
     "accelerator 't4' is not a Ray accelerator type; did you mean T4?"),
    ({"CPU": 2, "memory": "8Gi", "accelerators": ["T4", "L4"]},
     "lists accelerators T4, L4; a pod shape has exactly one accelerator type"),
    ({"CPU": "2500m", "memory": "8Gi"}, "CPU must be a whole number of cores"),
    ({"CPU": 0, "memory": "8Gi"}, "resources.CPU: must be greater than zero"),
    ({"CPU": 2}, "resources must set memory"),
    ({"memory": "8Gi"}, "resources must set CPU"),
    ({"CPU": 2, "memory": "8 GB"}, "resources.memory: '8 GB' is not a quantity"),
    ({"CPU": 2, "memory": "-8Gi"}, "resources.memory: must not be negative"),
    ({"CPU": 2, "memory": "8Gi", "GPU": 0.5}, "resources.GPU: must be a whole number"),
    ({"CPU": 2, "memory": "8Gi", "cpu": 2}, "unknown resource 'cpu' (use CPU, memory"),
    ({"CPU": 2, "memory": "8Gi", "example.com/fpga": "500m"},
     "extended resource example.com/fpga must be a whole number"),
    ({"CPU": 2, "memory": "8Gi", "anyscale/tpu_slices": 1}, "unknown resource"),
])
def test_resource_errors(resources: dict[str, object], message: str) -> None:
    with pytest.raises(RenderError) as error:
        load_catalog(yaml.safe_dump({"shape": {"resources": resources}}), origin="f.yaml")
    assert str(error.value).startswith("f.yaml: instance type 'shape': ")
    assert message in str(error.value)


@pytest.mark.parametrize(("text", "message"), [
    ("a: {resources: {CPU: 1, memory: 1Gi}, nodeselector: {}}",
     "instance type 'a': unknown field(s) nodeselector (allowed: cpuArchitecture, nodeSelector,"),
    ("a: {resources: {CPU: 1, memory: 1Gi}, tolerations: {key: x}}",
     "tolerations must be a list of mappings"),
    ("a: {resources: {CPU: 1, memory: 1Gi}, cpuArchitecture: x86}",
     "cpuArchitecture must be one of amd64, arm64, got 'x86'"),
    ("a: [1]", "instance type 'a': expected a mapping with 'resources'"),
    ("- a", "instance_types[0]: a list entry needs a 'name'"),
    ("- {name: a, resources: {CPU: 1, memory: 1Gi}}\n- {name: a, resources: {CPU: 1, memory: 1Gi}}",
     "instance type 'a' is listed twice"),
    ("7", "expected a mapping of instance type names to shapes, got int"),
    ("a: {resources: [", "f.yaml: invalid YAML"),
])
def test_document_errors(text: str, message: str) -> None:
    with pytest.raises(RenderError) as error:
        load_catalog(text, origin="f.yaml")
    assert str(error.value).startswith("f.yaml: ")
    assert message in str(error.value)
