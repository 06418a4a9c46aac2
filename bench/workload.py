"""The benchmark workload: N RayClusters over M apps, as a config repo and as diff cases.

Why a generator and not fixtures: the figures must be reproducible at 100, 1,000 and 5,000
RayClusters, so the workload is a pure function of ``(clusters, apps, seed)``. Everything
random comes from ``random.Random`` seeded with the cluster's index, so cluster 17 is the
same object whatever the size of the run, and two runs on two machines diff the same bytes.

Each RayCluster looks like what platform teams write: a head and three worker groups
(cpu, gpu, highmem) whose pod templates carry env vars (plain and ``valueFrom``), volumes
and mounts, requests/limits, probes, ports, node selectors, tolerations, affinity, a
security context and a preStop hook. About 8 KB of JSON each.

Two outputs:

* :func:`write_config_repo` writes the files of a config repo: ``clusters/<app>/<rc>.yaml``
  (one RayCluster per file) plus ``apps/<app>.yaml``, an app-of-apps directory of Argo CD
  ``Application`` objects with the Ray project's recommended ``ignoreDifferences`` on
  ``.spec.workerGroupSpecs[].replicas``.
* :func:`diff_cases` returns ``(desired, predicted, live)`` triples for the pure diff
  benchmark. ``live`` is what the API server returns after a sync, an autoscaler that moved
  replicas, KubeRay status writes and, for a small share, a manual ``kubectl edit``:
  metadata (uid, resourceVersion, generation, creationTimestamp, managedFields), the CRD
  defaults the local control plane fills (``ports[].protocol``, worker group bounds), and
  ``status``. ``predicted`` is what a server-side dry-run apply of ``desired`` returns: the
  same object with the manual edit undone. Drifted clusters must come out modified, the
  others (replicas moved by the autoscaler only) must not.

Run ``python -m bench.workload --clusters 100 --out DIR`` to look at a generated repo.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

RAY_VERSION = "2.52.0"
IMAGE = f"rayproject/ray:{RAY_VERSION}-py311"
FIELD_MANAGER = "gitops-ray"  # gitops_ray.FIELD_MANAGER; kept literal so the Go side can read it
AUTOSCALER_MANAGER = "python-requests"  # the Ray autoscaler sends no fieldManager
OPERATOR_MANAGER = "kuberay-operator"
EDIT_MANAGER = "kubectl-edit"
TRACKING_ANNOTATION = "gitops-ray.io/tracking-id"
APP_LABEL = "gitops-ray.io/app"
REPLICAS_RULE: Manifest = {"group": "ray.io", "kind": "RayCluster",
                           "jqPathExpressions": [".spec.workerGroupSpecs[].replicas"]}
ARGO_DEFAULT_OVERRIDES: Manifest = {"*/*": {"jsonPointers": ["/status"]}}
CREATED = "2026-01-05T09:30:00Z"
UPDATED = "2026-01-05T10:12:41Z"


@dataclass(frozen=True)
class Workload:
    """``clusters`` RayClusters spread evenly over ``apps`` apps (one namespace each)."""

    clusters: int = 1000
    apps: int = 50
    seed: int = 0
    drift: float = 0.05  # share of clusters with a manual edit in live

    def app_of(self, index: int) -> int:
        return index * self.apps // self.clusters

    def app_name(self, app: int) -> str:
        return f"team-{app:03d}"

    def namespace(self, app: int) -> str:
        return f"ray-{self.app_name(app)}"

    def cluster_name(self, index: int) -> str:
        return f"rc-{index:05d}"

    def rng(self, index: int, purpose: str) -> random.Random:
        return random.Random(f"{self.seed}:{index}:{purpose}")

    def drifted(self, index: int) -> bool:
        return self.rng(index, "drift").random() < self.drift

    def members(self, app: int) -> range:
        first = next(i for i in range(self.clusters) if self.app_of(i) == app)
        last = max(i for i in range(first, self.clusters) if self.app_of(i) == app)
        return range(first, last + 1)


# -- desired: what the config repo holds --------------------------------------------------


def _env(rng: random.Random, role: str, index: int) -> list[Manifest]:
    env: list[Manifest] = [
        {"name": "RAY_GRAFANA_HOST", "value": "http://grafana.monitoring.svc:80"},
        {"name": "RAY_PROMETHEUS_HOST", "value": "http://prometheus.monitoring.svc:9090"},
        {"name": "RAY_memory_monitor_refresh_ms", "value": "0"},
        {"name": "RAY_BACKEND_LOG_LEVEL", "value": rng.choice(["warning", "info"])},
        {"name": "CONFIG_REVISION", "value": "1"},
        {"name": "TEAM", "value": f"team-{index % 97:02d}"},
        {"name": "ROLE", "value": role},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
            "name": "s3-credentials", "key": "access-key-id"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {
            "name": "s3-credentials", "key": "secret-access-key"}}},
        {"name": "MODEL_BUCKET", "valueFrom": {"configMapKeyRef": {
            "name": "ray-settings", "key": "model-bucket"}}},
    ]
    return env


def _container(rng: random.Random, role: str, index: int, cpu: int, memory_gi: int,
               gpus: int = 0) -> Manifest:
    limits: Manifest = {"cpu": str(cpu), "memory": f"{memory_gi}Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    ports = ([{"containerPort": 6379, "name": "gcs-server"},
              {"containerPort": 8265, "name": "dashboard"},
              {"containerPort": 10001, "name": "client"},
              {"containerPort": 8000, "name": "serve"}] if role == "head" else [])
    ports.append({"containerPort": 8080, "name": "metrics"})
    probe_cmd = ["bash", "-c", "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz"
                 " | grep success"]
    return {
        "name": "ray-head" if role == "head" else "ray-worker",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "ports": ports,
        "env": _env(rng, role, index),
        "envFrom": [{"configMapRef": {"name": "ray-common-env"}}],
        "resources": {"requests": {"cpu": str(cpu), "memory": f"{memory_gi}Gi"},
                      "limits": limits},
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "ray-logs", "mountPath": "/tmp/ray"},
            {"name": "ray-config", "mountPath": "/etc/ray", "readOnly": True},
            {"name": "s3-credentials", "mountPath": "/var/run/secrets/s3", "readOnly": True},
        ],
        "readinessProbe": {"exec": {"command": probe_cmd}, "initialDelaySeconds": 10,
                           "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 10},
        "livenessProbe": {"exec": {"command": probe_cmd}, "initialDelaySeconds": 30,
                          "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 120},
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}},
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
    }


def _pod_template(rng: random.Random, role: str, index: int, *, cpu: int, memory_gi: int,
                  gpus: int = 0, instance: str = "m6i.4xlarge") -> Manifest:
    tolerations: list[Manifest] = [{"key": "ray.io/dedicated", "operator": "Equal",
                                    "value": "true", "effect": "NoSchedule"}]
    if gpus:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists",
                            "effect": "NoSchedule"})
    return {
        "metadata": {"labels": {"app.kubernetes.io/component": f"ray-{role}",
                                "cost-center": f"cc-{index % 13:02d}"},
                     "annotations": {"prometheus.io/scrape": "true",
                                     "prometheus.io/port": "8080"}},
        "spec": {
            "serviceAccountName": "ray-workload",
            "priorityClassName": "ray-batch" if role != "head" else "ray-critical",
            "terminationGracePeriodSeconds": 60,
            "nodeSelector": {"node.kubernetes.io/instance-type": instance,
                             "topology.kubernetes.io/zone": rng.choice(
                                 ["eu-west-1a", "eu-west-1b", "eu-west-1c"])},
            "tolerations": tolerations,
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {
                        "app.kubernetes.io/component": f"ray-{role}"}}}}]}},
            "securityContext": {"runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100},
            "containers": [_container(rng, role, index, cpu, memory_gi, gpus)],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory",
                                              "sizeLimit": f"{max(1, memory_gi // 4)}Gi"}},
                {"name": "ray-logs", "emptyDir": {}},
                {"name": "ray-config", "configMap": {"name": "ray-config"}},
                {"name": "s3-credentials", "secret": {"secretName": "s3-credentials"}},
            ],
        },
    }


def _worker_group(rng: random.Random, index: int, name: str, *, cpu: int, memory_gi: int,
                  gpus: int, instance: str, max_replicas: int) -> Manifest:
    return {
        "groupName": name,
        "replicas": rng.randint(1, 3),
        "minReplicas": 1,
        "maxReplicas": max_replicas,
        "rayStartParams": {"num-cpus": str(cpu), **({"num-gpus": str(gpus)} if gpus else {})},
        "template": _pod_template(rng, "worker", index, cpu=cpu, memory_gi=memory_gi,
                                  gpus=gpus, instance=instance),
    }


def raycluster(wl: Workload, index: int, *, tracked: bool = True) -> Manifest:
    """The RayCluster ``index`` as rendered from git (with tracking, as gitops-ray sends it)."""
    rng = wl.rng(index, "spec")
    app = wl.app_of(index)
    meta: Manifest = {"name": wl.cluster_name(index), "namespace": wl.namespace(app),
                      "labels": {"app.kubernetes.io/name": "raycluster",
                                 "app.kubernetes.io/part-of": wl.app_name(app)}}
    if tracked:
        meta["labels"][APP_LABEL] = wl.app_name(app)
        meta["annotations"] = {TRACKING_ANNOTATION: (
            f"{wl.app_name(app)}:ray.io/RayCluster:{meta['namespace']}/{meta['name']}")}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
        "spec": {
            "rayVersion": RAY_VERSION,
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": {"upscalingMode": "Default", "idleTimeoutSeconds": 120,
                                  "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                                                "limits": {"cpu": "500m", "memory": "512Mi"}}},
            "headGroupSpec": {
                "serviceType": "ClusterIP",
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
                "template": _pod_template(rng, "head", index, cpu=4, memory_gi=16),
            },
            "workerGroupSpecs": [
                _worker_group(rng, index, "cpu", cpu=8, memory_gi=32, gpus=0,
                              instance="m6i.4xlarge", max_replicas=rng.choice([10, 20, 50])),
                _worker_group(rng, index, "gpu", cpu=8, memory_gi=64, gpus=1,
                              instance="g5.2xlarge", max_replicas=rng.choice([4, 8])),
                _worker_group(rng, index, "highmem", cpu=16, memory_gi=128, gpus=0,
                              instance="r6i.4xlarge", max_replicas=rng.choice([2, 4, 6])),
            ],
        },
    }


def application(wl: Workload, app: int, *, repo_url: str, revision: str = "HEAD") -> Manifest:
    """The Argo CD ``Application`` of one app, with the recommended ignoreDifferences."""
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": wl.app_name(app), "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": repo_url, "targetRevision": revision,
                       "path": f"clusters/{wl.app_name(app)}"},
            "destination": {"server": "https://kubernetes.default.svc",
                            "namespace": wl.namespace(app)},
            "ignoreDifferences": [copy.deepcopy(REPLICAS_RULE)],
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"]},
        },
    }


def cluster_path(wl: Workload, index: int) -> str:
    return f"clusters/{wl.app_name(wl.app_of(index))}/{wl.cluster_name(index)}.yaml"


def repo_files(wl: Workload, *, repo_url: str) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of every file of the config repo."""
    for app in range(wl.apps):
        yield f"apps/{wl.app_name(app)}.yaml", dump_yaml(application(wl, app, repo_url=repo_url))
    for index in range(wl.clusters):
        yield cluster_path(wl, index), dump_yaml(raycluster(wl, index, tracked=False))


def write_config_repo(wl: Workload, root: Path, *, repo_url: str) -> int:
    """Write the config repo's files under ``root``; returns how many were written."""
    count = 0
    for rel, text in repo_files(wl, repo_url=repo_url):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        count += 1
    return count


def one_line_change(wl: Workload, root: Path, index: int, value: str) -> str:
    """Edit one line of cluster ``index``'s file (the head's ``CONFIG_REVISION``)."""
    path = root / cluster_path(wl, index)
    lines = path.read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if "name: CONFIG_REVISION" in line)
    indent = lines[at + 1][: len(lines[at + 1]) - len(lines[at + 1].lstrip())]
    lines[at + 1] = f"{indent}value: '{value}'\n"
    path.write_text("".join(lines))
    return cluster_path(wl, index)


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # same bytes, 4x faster


def dump_yaml(obj: Manifest) -> str:
    text: str = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                          width=120)
    return text


# -- live: what the API server returns ----------------------------------------------------


def with_server_defaults(obj: Manifest) -> Manifest:
    """A copy with the defaults the local control plane's RayCluster CRD fills in."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    for template in _templates(spec):
        for container in template["spec"].get("containers", []):
            for port in container.get("ports", []):
                port.setdefault("protocol", "TCP")
    for group in spec.get("workerGroupSpecs", []):
        for key, default in (("replicas", 0), ("minReplicas", 0),
                             ("maxReplicas", 2147483647), ("numOfHosts", 1), ("priority", 0)):
            group.setdefault(key, default)
    return out


def _templates(spec: Manifest) -> list[Manifest]:
    return [spec["headGroupSpec"]["template"],
            *(g["template"] for g in spec.get("workerGroupSpecs", []))]


def fields_v1(obj: Any) -> Any:
    """The ``fieldsV1`` set of an applied object (atomic lists, keyed map-lists by name)."""
    if isinstance(obj, dict):
        return {f"f:{k}": _fields_of_value(k, v) for k, v in obj.items()}
    return {}


def _fields_of_value(key: str, value: Any) -> Any:
    if key == "workerGroupSpecs" or not isinstance(value, (dict, list)):
        return {}  # workerGroupSpecs is an atomic list in the RayCluster CRD
    if isinstance(value, dict):
        return fields_v1(value)
    if value and all(isinstance(v, dict) and "name" in v for v in value):
        return {f"k:{json.dumps({'name': v['name']}, separators=(',', ':'))}":
                {".": {}, **fields_v1(v)} for v in value}
    return {}


def _uid(name: str, namespace: str) -> str:
    return str(uuid.UUID(hashlib.md5(f"{namespace}/{name}".encode()).hexdigest()))


def _autoscaled(wl: Workload, index: int, spec: Manifest) -> Manifest:
    """The spec after the Ray autoscaler moved replicas (and asked to delete a worker)."""
    rng = wl.rng(index, "autoscaler")
    out = copy.deepcopy(spec)
    for group in out["workerGroupSpecs"]:
        group["replicas"] = rng.randint(group["minReplicas"], group["maxReplicas"])
        if rng.random() < 0.2:
            group["scaleStrategy"] = {"workersToDelete": [
                f"{group['groupName']}-worker-{rng.getrandbits(24):06x}"]}
    return out


def _drift(wl: Workload, index: int, spec: Manifest) -> Manifest:
    """A manual ``kubectl edit``: an image bump or a changed env var somewhere."""
    rng = wl.rng(index, "edit")
    out = copy.deepcopy(spec)
    container = rng.choice(_templates(out))["spec"]["containers"][0]
    if rng.random() < 0.5:
        container["image"] = f"rayproject/ray:{RAY_VERSION}-py311-hotfix"
    else:
        container["env"][3]["value"] = "debug"
    return out


def _status(wl: Workload, index: int, spec: Manifest, generation: int) -> Manifest:
    workers = sum(g["replicas"] for g in spec["workerGroupSpecs"])
    name = wl.cluster_name(index)
    rng = wl.rng(index, "status")
    ip = f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}"
    return {
        "state": "ready", "lastUpdateTime": UPDATED, "observedGeneration": generation,
        "desiredCPU": str(4 + 8 * workers), "desiredMemory": f"{16 + 64 * workers}Gi",
        "desiredGPU": str(spec["workerGroupSpecs"][1]["replicas"]), "desiredTPU": "0",
        "readyWorkerReplicas": workers, "availableWorkerReplicas": workers,
        "desiredWorkerReplicas": workers,
        "minWorkerReplicas": sum(g["minReplicas"] for g in spec["workerGroupSpecs"]),
        "maxWorkerReplicas": sum(g["maxReplicas"] for g in spec["workerGroupSpecs"]),
        "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379",
                      "metrics": "8080", "serve": "8000"},
        "head": {"podIP": ip, "podName": f"{name}-head-{rng.getrandbits(20):05x}",
                 "serviceIP": ip, "serviceName": f"{name}-head-svc"},
        "conditions": [
            {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
             "message": "", "lastTransitionTime": CREATED},
            {"type": "RayClusterProvisioned", "status": "True",
             "reason": "AllPodRunningAndReadyFirstTime", "message": "",
             "lastTransitionTime": CREATED}],
        "stateTransitionTimes": {"ready": CREATED},
    }


def _managed_fields(applied: Manifest, *, drifted: bool) -> list[Manifest]:
    entry = {"apiVersion": "ray.io/v1", "fieldsType": "FieldsV1", "time": UPDATED}
    applied_fields = {"f:metadata": fields_v1({k: v for k, v in applied["metadata"].items()
                                               if k in ("labels", "annotations")}),
                      "f:spec": fields_v1(applied["spec"])}
    fields = [
        {**entry, "manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": applied_fields},
        {**entry, "manager": AUTOSCALER_MANAGER, "operation": "Update",
         "fieldsV1": {"f:spec": {"f:workerGroupSpecs": {}}}},
        {**entry, "manager": OPERATOR_MANAGER, "operation": "Update", "subresource": "status",
         "fieldsV1": {"f:status": fields_v1({"state": 1, "conditions": 1, "head": 1,
                                             "endpoints": 1, "observedGeneration": 1})}},
    ]
    if drifted:
        fields.append({**entry, "manager": EDIT_MANAGER, "operation": "Update",
                       "fieldsV1": {"f:spec": {"f:headGroupSpec": {"f:template": {}}}}})
    return fields


def server_object(wl: Workload, index: int, desired: Manifest, *, spec: Manifest,
                  generation: int, drifted: bool) -> Manifest:
    """``desired`` as the API server returns it, with ``spec`` as the stored spec."""
    meta = desired["metadata"]
    out = copy.deepcopy(desired)
    out["metadata"] = {
        **copy.deepcopy(meta),
        "uid": _uid(meta["name"], meta["namespace"]),
        "resourceVersion": str(100000 + index * 7 + generation),
        "generation": generation,
        "creationTimestamp": CREATED,
        "managedFields": _managed_fields(desired, drifted=drifted),
    }
    out["spec"] = spec
    out["status"] = _status(wl, index, spec, generation)
    return out


@dataclass(frozen=True)
class DiffCase:
    """One object for the diff benchmark, and whether a correct diff reports it modified."""

    desired: Manifest
    predicted: Manifest
    live: Manifest
    drifted: bool


def diff_case(wl: Workload, index: int) -> DiffCase:
    desired = raycluster(wl, index)
    scaled = _autoscaled(wl, index, with_server_defaults(desired)["spec"])
    drifted = wl.drifted(index)
    generation = 3 + index % 5
    live_spec = _drift(wl, index, scaled) if drifted else scaled
    live = server_object(wl, index, desired, spec=live_spec, generation=generation,
                         drifted=drifted)
    predicted = server_object(wl, index, desired, spec=copy.deepcopy(scaled),
                              generation=generation + int(drifted), drifted=False)
    predicted["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    predicted["status"] = copy.deepcopy(live["status"])
    return DiffCase(desired, predicted, live, drifted)


def diff_cases(wl: Workload) -> list[DiffCase]:
    return [diff_case(wl, i) for i in range(wl.clusters)]


def ignore_rules() -> list[Manifest]:
    """The Applications' ``ignoreDifferences`` (identical for every app)."""
    return [copy.deepcopy(REPLICAS_RULE)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repo-url", default="https://git.example.com/ray-config.git")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    wl = Workload(args.clusters, args.apps, args.seed)
    count = write_config_repo(wl, args.out, repo_url=args.repo_url)
    print(f"wrote {count} files under {args.out}")


if __name__ == "__main__":
    main()
