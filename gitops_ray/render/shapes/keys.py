"""The ``gitops-ray.io/`` pod-template keys that pod shapes read and write.

They are the vocabulary shared by users (who set ``instance-type``, ``market-type`` and
``zone`` on a pod template), patch selectors (which match on all five) and the pods
themselves (``kubectl get pods -l gitops-ray.io/market-type=SPOT``). They are written as
both labels and annotations: labels for selection in the cluster, annotations because the
Anyscale operator's patch selectors are annotation selectors.
"""

from __future__ import annotations

PREFIX = "gitops-ray.io/"
INSTANCE_TYPE = PREFIX + "instance-type"
MARKET_TYPE = PREFIX + "market-type"
ZONE = PREFIX + "zone"
ACCELERATOR_TYPE = PREFIX + "accelerator-type"
RAY_NODE_TYPE = PREFIX + "ray-node-type"
COMPUTE_CONFIG = PREFIX + "compute-config"
"""Label on a RayCluster rendered from a ComputeConfig, naming it."""

SPOT, ON_DEMAND = "SPOT", "ON_DEMAND"
MARKET_TYPES = (SPOT, ON_DEMAND)
HEAD, WORKER = "head", "worker"

OPT_IN = (INSTANCE_TYPE, MARKET_TYPE, ZONE, ACCELERATOR_TYPE)
"""A pod template carrying any of these annotations is shaped (facts + default patches)."""


def pointer_token(key: str) -> str:
    """``key`` escaped as one JSON-pointer token (``a/b`` -> ``a~1b``)."""
    return key.replace("~", "~0").replace("/", "~1")
