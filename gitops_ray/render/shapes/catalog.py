"""The instance-type catalog: named pod shapes such as ``8CPU-32GB-1xT4``.

Platform teams describe the machines Ray may use once, by name, instead of repeating
requests, limits, ``rayStartParams``, node selectors and tolerations in every RayCluster.
The file format is the one of the Anyscale operator's ``instance_types.yaml``, so an
existing catalog can be copied as is (optionally under an ``instance_types:`` key, and,
as the Helm chart's ``instanceTypes`` value writes it, also as a list of entries with a
``name``)::

    8CPU-32GB-1xT4:
      resources: {CPU: 8, memory: 32Gi, GPU: 1, accelerators: [T4]}
      nodeSelector: {node.kubernetes.io/instance-type: g4dn.2xlarge}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]

Resource keys: ``CPU`` (whole cores, because Ray's ``num-cpus`` is an integer),
``memory``, ``GPU`` (``nvidia.com/gpu``, or the shape's own ``<vendor>/gpu`` extended
resource), ``TPU`` (``google.com/tpu``), ``accelerators: [T]`` or the older
``accelerator_type:T: 1`` (one Ray accelerator type per shape), ``ephemeral-storage``,
any domain-qualified extended resource (``vpc.amazonaws.com/efa``), and
``anyscale/tpu_hosts`` (becomes the worker group's ``numOfHosts``). Everything else is
rejected, so a typo such as ``cpu`` cannot silently produce an unschedulable pod.

Names are letters, digits, ``-`` and ``_``, start and end with a letter or digit and are at
most 63 characters, because they become a label value on every pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render.bounds import check_yaml
from gitops_ray.render.shapes.quantity import is_whole, resource_amount

NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$")
_EXTENDED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_ACCELERATOR_KEY = "accelerator_type:"
_TPU_HOSTS = "anyscale/tpu_hosts"
_SHAPE_KEYS = frozenset({"resources", "nodeSelector", "tolerations", "cpuArchitecture"})
_COUNTS = {"GPU": "gpu", "TPU": "tpu", _TPU_HOSTS: "tpu_hosts"}
_ARCHITECTURES = frozenset({"amd64", "arm64"})
NVIDIA_GPU = "nvidia.com/gpu"
GOOGLE_TPU = "google.com/tpu"

RAY_ACCELERATORS = frozenset({
    # NVIDIA
    "V100", "P100", "T4", "P4", "K80", "A10G", "L4", "L40S", "A100", "A100-40G", "A100-80G",
    "H100", "H200", "H20", "B200", "B300", "GB200", "GB300", "RTX-PRO-6000",
    # Intel
    "Intel-GPU-Max-1550", "Intel-GPU-Max-1100", "Intel-GAUDI",
    # AMD
    "AMD-Instinct-MI100", "AMD-Instinct-MI250X", "AMD-Instinct-MI250X-MI250",
    "AMD-Instinct-MI210", "AMD-Instinct-MI300A", "AMD-Instinct-MI300X-OAM",
    "AMD-Instinct-MI300X-HF", "AMD-Instinct-MI308X", "AMD-Instinct-MI325X-OAM",
    "AMD-Instinct-MI350X-OAM", "AMD-Instinct-MI355X-OAM", "AMD-Radeon-R9-200-HD-7900",
    "AMD-Radeon-HD-7900",
    # Other
    "aws-neuron-core", "TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5P", "TPU-V5LITEPOD", "TPU-V6E",
    "TPU-V7X", "Ascend910B", "Ascend910B4", "MXC500", "MXC550",
})
"""Ray's accelerator constants (``ray.util.accelerators``), the values of ``accelerator_type:``."""


@dataclass(frozen=True)
class InstanceType:
    """One named pod shape: Kubernetes resources plus what Ray should advertise."""

    name: str
    cpu: Decimal
    memory: Decimal
    gpu: int = 0
    tpu: int = 0
    accelerator: str = ""
    extended: Mapping[str, Decimal] = field(default_factory=dict)
    tpu_hosts: int = 1
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    cpu_architecture: str = ""

    def k8s_resources(self) -> dict[str, Decimal]:
        """What the whole pod may request, keyed by Kubernetes resource name."""
        resources = {"cpu": self.cpu, "memory": self.memory, **self.extended}
        if self.gpu and not any(k.endswith("/gpu") for k in self.extended):
            resources[NVIDIA_GPU] = Decimal(self.gpu)
        if self.tpu:
            resources[GOOGLE_TPU] = Decimal(self.tpu)
        return resources


@dataclass(frozen=True)
class Catalog:
    """Instance types by name, remembering where each came from for error messages."""

    types: Mapping[str, InstanceType] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, *, where: str) -> InstanceType:
        """The named shape; a :class:`RenderError` naming ``where`` and the choices if unknown."""
        found = self.types.get(name)
        if found is None:
            known = ", ".join(sorted(self.types)) or "none: the catalog is empty"
            sources = ", ".join(sorted(set(self.origins.values()))) or \
                "no .gitops-ray/instance-types.yaml and no instance-types ConfigMap"
            raise RenderError(f"{where}: unknown instance type {name!r} (known: {known}; "
                              f"catalog: {sources})")
        return found

    def merged(self, other: Catalog) -> Catalog:
        """Both catalogs' entries; ``other`` wins on equal names."""
        return Catalog({**self.types, **other.types}, {**self.origins, **other.origins})


def load_catalog(text: str, *, origin: str) -> Catalog:
    """Parse an ``instance_types.yaml`` document (YAML or JSON); ``origin`` names it in errors."""
    try:
        check_yaml(text, origin=origin)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RenderError(f"{origin}: invalid YAML: {e}") from e
    if doc is None:
        return Catalog()
    if isinstance(doc, dict) and set(doc) == {"instance_types"}:
        doc = doc["instance_types"] or {}
    if isinstance(doc, list):
        doc = _named_entries(doc, origin)
    if not isinstance(doc, dict):
        raise RenderError(f"{origin}: expected a mapping of instance type names to shapes, "
                          f"got {type(doc).__name__}")
    types = {str(name): parse_instance_type(str(name), spec, origin=origin)
             for name, spec in doc.items()}
    return Catalog(types, dict.fromkeys(types, origin))


def _named_entries(entries: list[Any], origin: str) -> dict[str, Any]:
    """``[{name: N, resources: ...}]`` (the chart's ``instanceTypes`` values) as a mapping."""
    out: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise RenderError(f"{origin}: instance_types[{index}]: a list entry needs a "
                              "'name' (or write a mapping of names to shapes)")
        name = entry["name"]
        if name in out:
            raise RenderError(f"{origin}: instance type {name!r} is listed twice")
        out[name] = {k: v for k, v in entry.items() if k != "name"}
    return out


def catalog_from_configmap(configmap: Mapping[str, Any], *, origin: str = "") -> Catalog:
    """The catalog held by an ``instance-types`` ConfigMap (``data.instance_types.yaml``)."""
    meta = configmap.get("metadata") or {}
    origin = origin or f"ConfigMap {meta.get('namespace', '')}/{meta.get('name', '')}"
    data = configmap.get("data") or {}
    text = data.get("instance_types.yaml") or data.get("instance-types.yaml")
    if text is None:
        raise RenderError(f"{origin}: has no data key instance_types.yaml")
    return load_catalog(str(text), origin=origin)


def parse_instance_type(name: str, spec: object, *, origin: str) -> InstanceType:
    """Validate one catalog entry; errors name ``origin`` and the instance type."""
    where = f"{origin}: instance type {name!r}"
    if not NAME.match(name):
        raise RenderError(f"{where}: invalid name (use letters, digits, '-' and '_', start "
                          "and end with a letter or digit, at most 63 characters)")
    if not isinstance(spec, dict):
        raise RenderError(f"{where}: expected a mapping with 'resources'")
    unknown = set(spec) - _SHAPE_KEYS
    if unknown:
        raise RenderError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(allowed: {', '.join(sorted(_SHAPE_KEYS))})")
    resources = _resources(spec.get("resources"), where)
    return InstanceType(
        name=name, **resources,
        node_selector=_string_map(spec.get("nodeSelector"), f"{where}: nodeSelector"),
        tolerations=_tolerations(spec.get("tolerations"), where),
        cpu_architecture=_architecture(spec.get("cpuArchitecture"), where))


def _resources(raw: object, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RenderError(f"{where}: 'resources' must be a mapping with at least CPU and memory")
    missing = [k for k in ("CPU", "memory") if k not in raw]
    if missing:
        raise RenderError(f"{where}: resources must set {' and '.join(missing)}")
    out: dict[str, Any] = {"extended": {}}
    accelerators = _accelerators(raw.get("accelerators"), where)
    for key, value in raw.items():
        _resource(str(key), value, out, accelerators, where)
    if len(set(accelerators)) > 1:
        raise RenderError(f"{where}: lists accelerators {', '.join(accelerators)}; a pod shape "
                          "has exactly one accelerator type")
    out["accelerator"] = accelerators[0] if accelerators else ""
    return out


def _resource(key: str, value: object, out: dict[str, Any], accelerators: list[str],
              where: str) -> None:
    if key == "accelerators":
        return
    if key.startswith(_ACCELERATOR_KEY):
        accelerators.append(_accelerator(key[len(_ACCELERATOR_KEY):], where))
        return
    amount = resource_amount(value, f"{where}: resources.{key}")
    if key == "CPU":
        out["cpu"] = _whole(_positive(amount, f"{where}: resources.CPU"), f"{where}: CPU must "
                            "be a whole number of cores (e.g. 2 or 2000m) because Ray's "
                            "num-cpus is an integer")
    elif key == "memory":
        out["memory"] = _positive(amount, f"{where}: resources.memory")
    elif key in _COUNTS:
        minimum = 1 if key == _TPU_HOSTS else 0
        out[_COUNTS[key]] = _count(amount, minimum, f"{where}: resources.{key}")
    elif key == "ephemeral-storage":
        out["extended"][key] = _positive(amount, f"{where}: resources.{key}")
    elif _EXTENDED.match(key) and not key.startswith("anyscale/"):
        out["extended"][key] = _whole(amount, f"{where}: extended resource {key} must be a "
                                      "whole number (Kubernetes rule)")
    else:
        raise RenderError(
            f"{where}: unknown resource {key!r} (use CPU, memory, GPU, TPU, accelerators, "
            f"accelerator_type:<T>, ephemeral-storage, {_TPU_HOSTS} or a domain-qualified "
            "extended resource such as vpc.amazonaws.com/efa)")


def _accelerators(raw: object, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RenderError(f"{where}: resources.accelerators must be a list such as [T4]")
    return [_accelerator(str(a), where) for a in raw]


def _accelerator(name: str, where: str) -> str:
    if name not in RAY_ACCELERATORS:
        close = sorted(a for a in RAY_ACCELERATORS if a.lower() == name.lower())
        hint = f"; did you mean {close[0]}?" if close else \
            " (see ray.util.accelerators for the list)"
        raise RenderError(f"{where}: accelerator {name!r} is not a Ray accelerator type{hint}")
    return name


def _whole(amount: Decimal, message: str) -> Decimal:
    if not is_whole(amount):
        raise RenderError(message)
    return amount.to_integral_value()


def _positive(amount: Decimal, where: str) -> Decimal:
    if amount <= 0:
        raise RenderError(f"{where}: must be greater than zero")
    return amount


def _count(amount: Decimal, minimum: int, where: str) -> int:
    count = int(_whole(amount, f"{where}: must be a whole number"))
    if count < minimum:
        raise RenderError(f"{where}: must be at least {minimum}")
    return count


def _string_map(raw: object, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RenderError(f"{where}: expected a mapping of strings")
    return {str(k): _label_value(v) for k, v in raw.items()}


def _label_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _tolerations(raw: object, where: str) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise RenderError(f"{where}: tolerations must be a list of mappings")
    return tuple(raw)


def _architecture(raw: object, where: str) -> str:
    if raw is None:
        return ""
    if str(raw) not in _ARCHITECTURES:
        raise RenderError(f"{where}: cpuArchitecture must be one of "
                          f"{', '.join(sorted(_ARCHITECTURES))}, got {raw!r}")
    return str(raw)
