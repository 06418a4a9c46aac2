"""Helpers for the end-to-end tier: live Pods, operator conditions, a node pool per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gitops_ray.kube import Kube
from localcluster.raystack import fake_node, ready_and_untainted
from tests.harness import eventually
from tests.harness.runtime import RC_API

POOL_LABEL = "gitops-ray.io/e2e-pool"


def pods(kube: Kube, namespace: str, cluster: str) -> list[dict[str, Any]]:
    items, _ = kube.list("v1", "Pod", namespace, label_selector=f"ray.io/cluster={cluster}")
    return items


def phases(kube: Kube, namespace: str, cluster: str) -> dict[str, str]:
    """``{pod name: phase}`` of the cluster's Pods that are not being deleted."""
    return {p["metadata"]["name"]: p.get("status", {}).get("phase", "")
            for p in pods(kube, namespace, cluster)
            if not p["metadata"].get("deletionTimestamp")}


def live_status(kube: Kube, namespace: str, cluster: str) -> dict[str, Any]:
    live = kube.get(RC_API, "RayCluster", name=cluster, namespace=namespace) or {}
    return dict(live.get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, str]:
    """``{type: status}`` of the operator's conditions."""
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def operator_ready(kube: Kube, namespace: str, cluster: str) -> bool:
    """What the KubeRay operator says: ``state: ready`` and the cluster provisioned."""
    status = live_status(kube, namespace, cluster)
    return (status.get("state") == "ready"
            and conditions(status).get("RayClusterProvisioned") == "True"
            and conditions(status).get("HeadPodReady") == "True")


@contextmanager
def node_pool(kube: Kube, pool: str, count: int = 1) -> Iterator[list[str]]:
    """Fake nodes labelled ``POOL_LABEL=pool`` (8 CPU, 32Gi), Ready and untainted."""
    names = [f"{pool}-{i}" for i in range(count)]
    for name in names:
        node = fake_node(name, "m5.2xlarge", 8, "32Gi")
        node["metadata"]["labels"][POOL_LABEL] = pool
        kube.apply(node, field_manager="tests", force=True)
    try:
        eventually(lambda: all([ready_and_untainted(kube, n) for n in names]),
                   message=f"nodes of pool {pool} Ready")
        yield names
    finally:
        for name in names:
            kube.delete("v1", "Node", name=name)


def wait(condition: Callable[[], Any], describe: Callable[[], Any], timeout: float,
         message: str) -> None:
    """:func:`eventually`, and on timeout say what was seen last (``describe()``)."""
    try:
        eventually(condition, timeout, message)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {describe()}") from None
