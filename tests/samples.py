"""Realistic sample manifests shared by tests (RayClusters as platform teams write them)."""

from __future__ import annotations

import copy
from typing import Any


def pod_template(cpu: str = "1", memory: str = "4Gi", image: str = "rayproject/ray:2.52.0",
                 name: str = "ray-worker") -> dict[str, Any]:
    return {"spec": {"containers": [{
        "name": name, "image": image,
        "resources": {"requests": {"cpu": cpu, "memory": memory},
                      "limits": {"cpu": cpu, "memory": memory}},
        "ports": [{"containerPort": 8265, "name": "dashboard"}],
    }]}}


def worker_group(name: str, *, replicas: int | None = 1, min_replicas: int = 0,
                 max_replicas: int = 10, cpu: str = "1") -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": name, "minReplicas": min_replicas,
                             "maxReplicas": max_replicas, "rayStartParams": {},
                             "template": pod_template(cpu=cpu)}
    if replicas is not None:
        group["replicas"] = replicas
    return group


def raycluster(name: str = "demo", namespace: str | None = None, *,
               groups: list[dict[str, Any]] | None = None,
               autoscaling: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
        "spec": {
            "rayVersion": "2.52.0",
            "enableInTreeAutoscaling": autoscaling,
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                              "template": pod_template(cpu="2", name="ray-head")},
            "workerGroupSpecs": copy.deepcopy(groups) if groups is not None else [
                worker_group("cpu", replicas=1), worker_group("gpu", replicas=0)],
        },
    }


def role_binding(name: str, namespace: str) -> dict[str, Any]:
    """A RoleBinding of Role ``name`` to ServiceAccount ``name`` (all in ``namespace``)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
