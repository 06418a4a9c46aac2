"""KubeRay CRDs for the local control plane, with pod templates typed like the real ones.

KubeRay's generated CRDs are ~1 MB each because every embedded PodTemplateSpec is fully
typed: the API server prunes unknown fields and fills defaults (``ports[].protocol: TCP``)
inside templates. To get that behaviour without committing megabytes, the schema of
``io.k8s.api.core.v1.PodTemplateSpec`` is taken from the running API server's OpenAPI v3
document and inlined, as controller-gen does. ``workerGroupSpecs`` stays an atomic list
with the CRD defaults of ``ray.io/v1`` (see ``shared/reference/kuberay.md`` §1, §8).
RayJob and RayService are minimal: their embedded cluster spec is the same typed schema,
everything else is kept as given.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube

Schema = dict[str, Any]
_ALLOWED_EXTENSIONS = {
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
}
_DROP = {"description", "example", "externalDocs", "readOnly", "writeOnly", "nullable"}
_INT_OR_STRING = {"io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                  "io.k8s.apimachinery.pkg.api.resource.Quantity"}
_STR_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_OPAQUE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _inline(schema: Schema, components: dict[str, Schema]) -> Schema:
    """Resolve ``$ref``/``allOf`` and drop what CRD structural schemas do not accept."""
    if "$ref" in schema or ("allOf" in schema and len(schema["allOf"]) == 1):
        ref = schema.get("$ref") or schema["allOf"][0]["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if name in _INT_OR_STRING:
            resolved: Schema = {"x-kubernetes-int-or-string": True,
                                "anyOf": [{"type": "integer"}, {"type": "string"}]}
        else:
            resolved = _inline(components[name], components)
        if schema.get("default") not in (None, {}, []):  # only scalar +default markers
            resolved = {**resolved, "default": schema["default"]}
        return resolved
    out: Schema = {}
    if "enum" in schema:  # controller-gen emits no enums for core types, nor their "" default
        schema = {k: v for k, v in schema.items()
                  if k != "enum" and not (k == "default" and v == "")}
    for key, value in schema.items():
        if key in _DROP or (key.startswith("x-") and key not in _ALLOWED_EXTENSIONS):
            continue
        if key == "properties":
            out[key] = {k: _inline(v, components) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _inline(value, components)
        elif key != "default" or value not in ({}, []):
            out[key] = value
    return out


def pod_template_schema(kube: Kube) -> Schema:
    """The typed PodTemplateSpec schema, as controller-gen would embed it."""
    doc = kube.call("GET", "/openapi/v3/api/v1", verb="openapi")
    components = doc["components"]["schemas"]
    spec = _inline(components["io.k8s.api.core.v1.PodSpec"], components)
    metadata: Schema = {"type": "object", "properties": {
        "labels": _STR_MAP, "annotations": _STR_MAP, "name": {"type": "string"},
        "namespace": {"type": "string"}, "finalizers": {"type": "array",
                                                        "items": {"type": "string"}}}}
    return {"type": "object", "properties": {"metadata": metadata, "spec": spec}}


def _worker_group(template: Schema) -> Schema:
    integer: Schema = {"type": "integer", "format": "int32"}
    return {
        "type": "object", "required": ["groupName", "minReplicas", "maxReplicas", "template"],
        "properties": {
            "groupName": {"type": "string"},
            "replicas": {**integer, "default": 0},
            "minReplicas": {**integer, "default": 0},
            "maxReplicas": {**integer, "default": 2147483647},
            "numOfHosts": {**integer, "default": 1},
            "priority": {**integer, "default": 0},
            "idleTimeoutSeconds": integer,
            "suspend": {"type": "boolean"},
            "rayStartParams": _STR_MAP, "resources": _STR_MAP, "labels": _STR_MAP,
            "scaleStrategy": {"type": "object", "properties": {
                "workersToDelete": {"type": "array", "items": {"type": "string"}}}},
            "template": template,
        },
    }


def raycluster_spec_schema(template: Schema) -> Schema:
    """``RayClusterSpec``: typed templates, atomic ``workerGroupSpecs`` with CRD defaults."""
    return {
        "type": "object", "required": ["headGroupSpec"],
        "properties": {
            "rayVersion": {"type": "string"},
            "suspend": {"type": "boolean"},
            "enableInTreeAutoscaling": {"type": "boolean"},
            "managedBy": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
                {"rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
                 "message": "the managedBy field value must be either "
                            "'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"}]},
            "headServiceAnnotations": _STR_MAP,
            "upgradeStrategy": {"type": "object", "properties": {
                "type": {"type": "string", "enum": ["Recreate", "None"]}}},
            **{k: _OPAQUE for k in ("autoscalerOptions", "authOptions",
                                    "gcsFaultToleranceOptions", "historyServerOptions",
                                    "networkPolicy", "tlsOptions")},
            "headGroupSpec": {"type": "object", "required": ["template"], "properties": {
                "serviceType": {"type": "string"}, "enableIngress": {"type": "boolean"},
                "rayStartParams": _STR_MAP, "resources": _STR_MAP, "labels": _STR_MAP,
                "headService": _OPAQUE, "ingressOptions": _OPAQUE, "template": template}},
            "workerGroupSpecs": {"type": "array", "items": _worker_group(template)},
        },
    }


def _condition_list() -> Schema:
    return {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object", "required": ["type", "status"],
                      "x-kubernetes-preserve-unknown-fields": True,
                      "properties": {"type": {"type": "string"}, "status": {"type": "string"},
                                     "observedGeneration": {"type": "integer"}}}}


def _crd(kind: str, plural: str, spec: Schema, printer: list[Schema]) -> dict[str, Any]:
    status: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                      "properties": {"conditions": _condition_list(),
                                     "observedGeneration": {"type": "integer"}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.ray.io"},
        "spec": {
            "group": "ray.io", "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}}, "additionalPrinterColumns": printer,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"}, "spec": spec, "status": status}}},
            }],
        },
    }


def ray_crds(template: Schema) -> list[dict[str, Any]]:
    """RayCluster, RayJob and RayService CRDs (``ray.io/v1``)."""
    cluster = raycluster_spec_schema(template)
    job: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                   "properties": {"entrypoint": {"type": "string"}, "rayClusterSpec": cluster,
                                  "suspend": {"type": "boolean"}}}
    service: Schema = {"type": "object", "required": ["rayClusterConfig"],
                       "x-kubernetes-preserve-unknown-fields": True,
                       "properties": {"serveConfigV2": {"type": "string"},
                                      "rayClusterConfig": cluster}}
    state = {"name": "status", "type": "string", "jsonPath": ".status.state"}
    return [
        _crd("RayCluster", "rayclusters", cluster, [
            {"name": "desired workers", "type": "integer",
             "jsonPath": ".status.desiredWorkerReplicas"}, state]),
        _crd("RayJob", "rayjobs", job, [
            {"name": "deployment status", "type": "string",
             "jsonPath": ".status.jobDeploymentStatus"}]),
        _crd("RayService", "rayservices", service, [
            {"name": "service status", "type": "string", "jsonPath": ".status.serviceStatus"}]),
    ]


def install_ray_crds(kubeconfig: Path, *, timeout: float = 60.0) -> None:
    """Server-side apply the Ray CRDs and wait until they are Established."""
    kube = Kube.connect(str(kubeconfig))
    for crd in ray_crds(pod_template_schema(kube)):
        kube.apply(crd, field_manager="gitops-ray-localcluster", force=True)
    deadline = time.monotonic() + timeout
    for plural in ("rayclusters", "rayjobs", "rayservices"):
        while not _established(kube, f"{plural}.ray.io"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {plural}.ray.io not established after {timeout}s")
            time.sleep(0.1)


def _established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name=name) or {}
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])
