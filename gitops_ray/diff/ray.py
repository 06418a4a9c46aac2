"""Built-in ignore rules: the fields the Ray autoscaler, Kueue and KubeRay own are not drift.

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

Kueue owns ``spec.suspend`` of a RayCluster or RayJob labelled ``kueue.x-k8s.io/queue-name``:
its webhook suspends it at creation and its job reconciler unsuspends it on admission and
suspends it on eviction (``jobframework`` in ``sigs.k8s.io/kueue`` v0.17.0). The rule is
active when either side carries the label, so git's ``suspend`` is applied only when the
object is created (there is no live value to keep then). The per-group ``suspend`` of a
RayCluster's worker group is "not a user-facing API" (KubeRay's ``raycluster_types.go``):
the RayJob controller sets it on a cluster it runs on (``DeletionStrategy`` DeleteWorkers),
so it is always the live value that stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitops_ray.types import IgnoreRule, Manifest

RAY_GROUP = "ray.io"
AUTOSCALER_FIELDS = ("replicas", "scaleStrategy")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class BuiltinRule:
    """An Argo-style ``ignoreDifferences`` entry (typed) plus the condition that activates it."""

    label: str
    rule: IgnoreRule
    cluster_spec: tuple[str, ...]  # where the RayClusterSpec sits under ``.spec``
    when: str = "autoscaling"  # "autoscaling" | "queued" | "always"

    def active(self, sides: Sequence[Manifest | None]) -> bool:
        if self.when == "always":
            return True
        if self.when == "queued":
            return any(queued(side) for side in sides)
        return any(_autoscaling(side, self.cluster_spec) for side in sides)


def queued(obj: Manifest | None) -> bool:
    """Whether ``obj`` is queue-managed: labelled ``kueue.x-k8s.io/queue-name``."""
    labels = ((obj or {}).get("metadata") or {}).get("labels")
    return isinstance(labels, dict) and bool(labels.get(QUEUE_LABEL))


def _autoscaling(obj: Manifest | None, cluster_spec: tuple[str, ...]) -> bool:
    node: Any = (obj or {}).get("spec")
    for key in cluster_spec:
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict) and node.get("enableInTreeAutoscaling") is True


def _rule(kind: str, cluster_spec: tuple[str, ...]) -> BuiltinRule:
    prefix = "".join(f".{key}" for key in ("spec", *cluster_spec))
    exprs = tuple(f"{prefix}.workerGroupSpecs[]?.{field}" for field in AUTOSCALER_FIELDS)
    return BuiltinRule(label=f"built-in {kind} autoscaler rule",
                       rule=IgnoreRule(kind, RAY_GROUP, jq_path_expressions=exprs),
                       cluster_spec=cluster_spec)


def _suspend_rule(kind: str) -> BuiltinRule:
    return BuiltinRule(label=f"built-in {kind} Kueue suspend rule",
                       rule=IgnoreRule(kind, RAY_GROUP, jq_path_expressions=(".spec.suspend",)),
                       cluster_spec=(), when="queued")


BUILTIN_RULES = (
    _rule("RayCluster", ()),
    _rule("RayJob", ("rayClusterSpec",)),
    _rule("RayService", ("rayClusterConfig",)),
    _suspend_rule("RayCluster"),
    _suspend_rule("RayJob"),
    BuiltinRule(label="built-in RayCluster worker-group suspend rule",
                rule=IgnoreRule("RayCluster", RAY_GROUP,
                                jq_path_expressions=(".spec.workerGroupSpecs[]?.suspend",)),
                cluster_spec=(), when="always"),
)
