"""gitops-ray: a GitOps reconciler for Ray clusters on Kubernetes.

The pipeline reads a config repository (``source``), renders the desired manifests
(``render``), compares them with the live cluster while ignoring what the Ray autoscaler
owns (``diff``), applies and prunes (``sync``), assesses health (``health``) and ties the
stages together per app (``reconcile``). ``runtime`` runs that continuously and ``cli``
is the user's entry point. Only ``kube`` talks to the Kubernetes API server.
"""

__version__ = "0.1.0"

FIELD_MANAGER = "gitops-ray"
"""The server-side apply field manager. Load-bearing: never make it configurable per run."""
