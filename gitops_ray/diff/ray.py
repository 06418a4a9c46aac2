"""Built-in ignore rules: the fields the Ray autoscaler owns are not drift.

With ``enableInTreeAutoscaling: true`` the autoscaler sidecar patches exactly two fields
of the RayCluster spec, ``workerGroupSpecs[i].replicas`` and
``workerGroupSpecs[i].scaleStrategy`` (``worker_replica_patch`` and ``worker_delete_patch`` in
Ray's ``python/ray/autoscaler/_private/kuberay/node_provider.py``,
https://github.com/ray-project/ray). Reverting them fights the autoscaler (kuberay #4149,
ray #55736), which is why the Ray docs tell Argo CD users to add an ``ignoreDifferences``
rule by hand. We ship that rule, on by default, for the
RayCluster and for the clusters embedded in RayJob (``spec.rayClusterSpec``) and
RayService (``spec.rayClusterConfig``).

The rule is active when *either* side (git's object, the dry-run prediction or the live
object) has autoscaling on in that spec. Turning autoscaling on in git therefore does not
reset the current scale, and turning it off keeps the autoscaler's last values for one
sync (live still has it on); git's ``replicas`` take effect from the next sync, once live
agrees that autoscaling is off. Expressions use ``[]?`` so that a cluster without worker
groups yields no warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitops_ray.types import Manifest

RAY_GROUP = "ray.io"
AUTOSCALER_FIELDS = ("replicas", "scaleStrategy")


@dataclass(frozen=True)
class BuiltinRule:
    """An Argo-style ``ignoreDifferences`` entry plus the condition that activates it."""

    label: str
    spec: dict[str, Any]
    cluster_spec: tuple[str, ...]  # where the RayClusterSpec sits under ``.spec``

    def active(self, sides: Sequence[Manifest | None]) -> bool:
        return any(_autoscaling(side, self.cluster_spec) for side in sides)


def _autoscaling(obj: Manifest | None, cluster_spec: tuple[str, ...]) -> bool:
    node: Any = (obj or {}).get("spec")
    for key in cluster_spec:
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict) and node.get("enableInTreeAutoscaling") is True


def _rule(kind: str, cluster_spec: tuple[str, ...]) -> BuiltinRule:
    prefix = "".join(f".{key}" for key in ("spec", *cluster_spec))
    exprs = [f"{prefix}.workerGroupSpecs[]?.{field}" for field in AUTOSCALER_FIELDS]
    return BuiltinRule(label=f"built-in {kind} autoscaler rule",
                       spec={"group": RAY_GROUP, "kind": kind, "jqPathExpressions": exprs},
                       cluster_spec=cluster_spec)


BUILTIN_RULES = (
    _rule("RayCluster", ()),
    _rule("RayJob", ("rayClusterSpec",)),
    _rule("RayService", ("rayClusterConfig",)),
)
