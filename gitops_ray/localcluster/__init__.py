"""A real local Kubernetes control plane for tests and the demo (built, never downloaded)."""

from gitops_ray.localcluster.controlplane import ControlPlaneError, LocalControlPlane

__all__ = ["ControlPlaneError", "LocalControlPlane"]
