"""Which cluster an app's destination names: Argo CD's resolution among the cluster Secrets.

Why a module of its own, below the runtime: the controller (its cluster registry,
:mod:`gitops_ray.runtime.clusters`, which watches the Secrets) and the one-shot commands
(:mod:`gitops_ray.cli.destinations`, which list them once) must resolve a destination
with the same rules and the same messages, and the one-shot commands never import the
runtime. Everything here is a function of the Secrets as read (parsed by
:mod:`gitops_ray.kube.clusters`), except :func:`answers`, one bounded probe.

Argo CD's ``GetDestinationCluster``: ``name`` by the Secret's ``name`` (several with one
name is an error), ``server`` by its ``server``; ``in-cluster``,
``https://kubernetes.default.svc`` or no destination at all is the controller's own
cluster. A destination that resolves to nothing is refused by the pipeline with Argo
CD's message (an ``InvalidSpecError``): nothing rendered, applied or pruned anywhere. A
Secret that cannot be used (:class:`Broken`) answers with its own error; no message
names a credential (servers pass :func:`~gitops_ray.redact.redact`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from gitops_ray.errors import GitOpsRayError
from gitops_ray.kube import Kube, KubeError
from gitops_ray.kube.clusters import (
    ClusterConfig,
    ClusterSecretError,
    normalize_server,
    parse_cluster_secret,
)
from gitops_ray.reconcile.project import IN_CLUSTER, IN_CLUSTER_NAME, Cluster
from gitops_ray.redact import redact
from gitops_ray.render.applications import IN_CLUSTER_SERVER
from gitops_ray.render.apps import Destination
from gitops_ray.types import Manifest

PROBE_TIMEOUT = 5.0  # seconds a probe of a destination cluster may take


class ClusterUnavailable(GitOpsRayError):
    """The app's destination cluster cannot be reached (or its client not built)."""

    stage = "cluster"


@dataclass(frozen=True)
class Broken:
    """A cluster Secret we cannot use: who it claims to be, and why not."""

    name: str
    server: str
    error: str


def read_secret(secret: Manifest) -> ClusterConfig | Broken:
    """A cluster Secret parsed, or who it claims to be and why it cannot be used."""
    try:
        return parse_cluster_secret(secret)
    except ClusterSecretError as e:
        claimed, server = claimed_identity(secret)
        return Broken(claimed, server, str(e))


def resolve_destination(dest: Destination, configs: Sequence[ClusterConfig],
                        broken: Sequence[Broken], *, forbidden_in: str = "") -> Cluster | str:
    """Argo CD's ``GetDestinationCluster`` among these Secrets: the cluster, or its error.

    ``forbidden_in``: the namespace whose cluster Secrets we may not list (RBAC), named in
    the error so that it says why no cluster was found.
    """
    if dest.server and dest.name:
        return ("application destination can't have both name and server defined: "
                f"{dest.name} {redact(dest.server)}")
    if is_local(dest):
        return IN_CLUSTER
    found = find_cluster(dest, configs, broken)
    if isinstance(found, str) and forbidden_in:
        return f"{found} (gitops-ray may not list the cluster Secrets in {forbidden_in})"
    return found


def unreachable(cluster: Cluster) -> ClusterUnavailable:
    """The error of every app of a cluster that does not answer (never its credentials)."""
    return ClusterUnavailable(
        f"destination cluster '{cluster.name or redact(cluster.server)}' "
        f"({redact(cluster.server)}) is unreachable: its API server does not answer; "
        "retried when it does")


def answers(kube: Kube) -> bool:
    """One bounded ``GET /version`` (:data:`PROBE_TIMEOUT`): whether the cluster answered."""
    with contextlib.suppress(KubeError):
        kube.call("GET", "/version", verb="probe", timeout=PROBE_TIMEOUT)
        return True
    return False


def find_cluster(dest: Destination, configs: Sequence[ClusterConfig],
                 broken: Sequence[Broken]) -> Cluster | str:
    """The remote cluster ``dest`` names among the Secrets, or Argo CD's message.

    By ``name`` (several Secrets with one name is an error, as in Argo CD), else by
    ``server``; a Secret we cannot use answers with its own error.
    """
    if dest.name:
        found = [c for c in configs if c.name == dest.name]
        unusable = [b for b in broken if b.name == dest.name]
        if unusable and not found:
            return unusable[0].error
        if len(found) > 1:
            servers = " ".join(sorted(redact(c.server) for c in found))
            return f"there are {len(found)} clusters with the same name: [{servers}]"
        return as_cluster(found[0]) if found else \
            f"there are no clusters with this name: {dest.name}"
    server = normalize_server(dest.server)
    found = [c for c in configs if c.server == server]
    unusable = [b for b in broken if b.server == server]
    if found:
        return as_cluster(found[0])
    if unusable:
        return unusable[0].error
    shown = redact(server)
    return f'error getting cluster by server "{shown}": cluster "{shown}" not found'


def is_local(dest: Destination) -> bool:
    """Whether ``dest`` is the controller's own cluster, whatever the Secrets say."""
    return (not dest.server and dest.name in ("", IN_CLUSTER_NAME)) or \
        normalize_server(dest.server) == IN_CLUSTER_SERVER


def as_cluster(config: ClusterConfig) -> Cluster:
    """The cluster a usable Secret describes, as the pipeline and the project rules see it."""
    return Cluster(config.name, config.server, config.namespaces, config.cluster_resources)


def claimed_identity(secret: Manifest) -> tuple[str, str]:
    """The ``name`` and ``server`` an unusable Secret claims, as far as they decode."""
    data = secret.get("data") or {}
    out = []
    for key in ("name", "server"):
        try:
            out.append(base64.b64decode(str(data.get(key, "")), validate=True).decode().strip())
        except (binascii.Error, UnicodeDecodeError):
            out.append("")
    return out[0], normalize_server(out[1])
