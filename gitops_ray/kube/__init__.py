"""The only package that talks to the Kubernetes API server (import-linter enforces it)."""

from gitops_ray.kube.client import MERGE_PATCH, Capabilities, Kube, ResourceInfo, WatchEvent
from gitops_ray.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    LeaseExpired,
    NotFound,
    Unauthorized,
    UnknownKind,
    Unreachable,
)

__all__ = [
    "MERGE_PATCH",
    "AlreadyExists",
    "Capabilities",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "Kube",
    "KubeError",
    "LeaseExpired",
    "NotFound",
    "ResourceInfo",
    "Unauthorized",
    "UnknownKind",
    "Unreachable",
    "WatchEvent",
]
