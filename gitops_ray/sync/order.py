"""Apply order: sync waves first, then kind order, then name (as gitops-engine does).

Namespaces and CRDs come before anything that needs them; kinds we do not know,
custom resources such as RayCluster among them, go last, so their CRDs, namespaces,
ServiceAccounts and ConfigMaps exist when they are applied.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitops_ray.types import Manifest, ResourceKey, SyncOptions

WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS_ANNOTATION = "argocd.argoproj.io/sync-options"

# gitops-engine's kind order (pkg/sync/sync_tasks.go), trimmed to kinds that exist today.
KIND_ORDER = [
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap",
    "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
    "ClusterRole", "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role",
    "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
    "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
]
_KIND_RANK = {kind: rank for rank, kind in enumerate(KIND_ORDER)}


HELM_WEIGHT_ANNOTATION = "helm.sh/hook-weight"


def wave_of(obj: Manifest) -> int:
    """The ``sync-wave`` annotation as an int, else Helm's hook weight, else 0.

    As gitops-engine's ``syncwaves.Wave``: an absent or unparsable ``sync-wave`` falls
    back to ``helm.sh/hook-weight`` (unparsable counts as 0).
    """
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    for key in (WAVE_ANNOTATION, HELM_WEIGHT_ANNOTATION):
        try:
            return int(str(annotations[key]).strip())
        except (KeyError, ValueError):
            continue
    return 0


def sort_key(obj: Manifest) -> tuple[int, int, str, str]:
    key = ResourceKey.of(obj)
    return wave_of(obj), _KIND_RANK.get(key.kind, len(KIND_ORDER)), key.namespace, key.name


def apply_order(objs: Iterable[Manifest]) -> list[Manifest]:
    """Objects in the order they should be applied."""
    return sorted(objs, key=sort_key)


def prune_order(objs: Iterable[Manifest]) -> list[Manifest]:
    """Objects in the order they should be pruned: the reverse of apply order."""
    return sorted(objs, key=sort_key, reverse=True)


def sync_options(obj: Manifest) -> SyncOptions:
    """The per-resource ``argocd.argoproj.io/sync-options`` values, trimmed."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(SYNC_OPTIONS_ANNOTATION, "")
    return SyncOptions.of_annotation(raw)


def kind_groups(objs: Iterable[Manifest]) -> list[list[Manifest]]:
    """Objects of one wave split where the kind order's rank changes, in apply order.

    The objects of one group may be applied at the same time: nothing in it needs
    another member first (Namespaces and CRDs are in earlier groups than what uses them).
    """
    groups: list[list[Manifest]] = []
    rank: int | None = None
    for obj in apply_order(objs):
        current = _KIND_RANK.get(ResourceKey.of(obj).kind, len(KIND_ORDER))
        if current != rank:
            groups.append([])
            rank = current
        groups[-1].append(obj)
    return groups


def waves(objs: Iterable[Manifest]) -> list[tuple[int, list[Manifest]]]:
    """Objects grouped by sync wave, lowest wave first, each group in apply order."""
    grouped: dict[int, list[Manifest]] = {}
    for obj in apply_order(objs):
        grouped.setdefault(wave_of(obj), []).append(obj)
    return list(grouped.items())
