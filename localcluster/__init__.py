"""A real local Kubernetes control plane for tests and the demo (built, never downloaded).

Development tooling, deliberately outside the ``gitops_ray`` package: it is not in the
wheel or the image, and the product may not import it (an import-linter contract).
``python -m localcluster`` runs one; ``python -m localcluster build`` builds the tools.
"""

from localcluster.controlplane import ControlPlaneError, LocalControlPlane

__all__ = ["ControlPlaneError", "LocalControlPlane"]
