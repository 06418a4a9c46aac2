"""The default namespace: ``destination.namespace`` for namespaced objects that name none.

Argo CD (``DeduplicateTargetObjects``) sets the destination namespace on every namespaced
object without one and *clears* the namespace of cluster-scoped objects, treating kinds it
cannot look up as namespaced. We do the same, so resource keys agree with the cluster and
with Argo CD. Scope is decided, in order, by the caller's discovery (``is_namespaced``),
then by CustomResourceDefinitions rendered in the same app (a CRD and its objects often
ship together, before discovery knows the kind), then by a table of well-known
cluster-scoped kinds (for ``render`` without a cluster), else "namespaced".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gitops_ray.types import Manifest, split_api_version

IsNamespaced = Callable[[str, str], bool | None]
"""``(apiVersion, kind) -> namespaced?``; ``None`` when the kind is unknown."""

CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset({
    ("", "Namespace"), ("", "Node"), ("", "PersistentVolume"), ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("storage.k8s.io", "StorageClass"), ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"), ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"), ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"), ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"), ("resource.k8s.io", "ResourceSlice"),
    ("storagemigration.k8s.io", "StorageVersionMigration"),
    # Cluster-scoped CRDs often deployed next to Ray: Kueue, Volcano, cert-manager.
    ("kueue.x-k8s.io", "ClusterQueue"), ("kueue.x-k8s.io", "ResourceFlavor"),
    ("kueue.x-k8s.io", "Cohort"), ("kueue.x-k8s.io", "AdmissionCheck"),
    ("kueue.x-k8s.io", "WorkloadPriorityClass"), ("kueue.x-k8s.io", "Topology"),
    ("scheduling.volcano.sh", "Queue"), ("cert-manager.io", "ClusterIssuer"),
})


def crd_scopes(manifests: Iterable[Manifest]) -> dict[tuple[str, str], bool]:
    """``(group, kind) -> namespaced`` for the CustomResourceDefinitions among ``manifests``."""
    scopes = {}
    for obj in manifests:
        if obj.get("kind") != "CustomResourceDefinition" or \
                split_api_version(str(obj.get("apiVersion", "")))[0] != "apiextensions.k8s.io":
            continue
        spec = obj.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        if isinstance(kind, str) and isinstance(spec.get("group"), str):
            scopes[(spec["group"], kind)] = spec.get("scope") != "Cluster"
    return scopes


def is_namespaced_kind(api_version: str, kind: str, *, lookup: IsNamespaced | None,
                       crds: Mapping[tuple[str, str], bool]) -> bool:
    """Scope of a kind (see module docstring for the order of sources)."""
    if lookup is not None:
        known = lookup(api_version, kind)
        if known is not None:
            return known
    key = (split_api_version(api_version)[0], kind)
    if key in crds:
        return crds[key]
    return key not in CLUSTER_SCOPED


def apply_default_namespace(manifests: list[Manifest], namespace: str, *,
                            lookup: IsNamespaced | None = None) -> list[Manifest]:
    """Copies of ``manifests`` with namespaces set or cleared as Argo CD does."""
    crds = crd_scopes(manifests)
    return [_scoped(obj, namespace, is_namespaced_kind(
        str(obj["apiVersion"]), str(obj["kind"]), lookup=lookup, crds=crds))
        for obj in manifests]


def _scoped(obj: Manifest, namespace: str, namespaced: bool) -> Manifest:
    meta = obj.get("metadata") or {}
    if not namespaced:
        if "namespace" not in meta:
            return obj
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "namespace"}}
    if meta.get("namespace") or not namespace:
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}
