"""Stage 5, health: assess live objects with Argo CD's vocabulary, Ray kinds included.

Pure functions only: ``assess`` judges one live object (Ray kinds per KubeRay's own status
signals, built-in kinds with gitops-engine's rules) and ``aggregate`` folds resource
verdicts into the app's health with Argo CD's rules, so this tool and an Argo CD with the
Lua checks from ``argocd/health/`` agree on every object.
"""

from gitops_ray.health.assess import assess, check_for
from gitops_ray.health.ray import REJECTION_REASONS, awaits_operator
from gitops_ray.health.rollout import pending_part
from gitops_ray.health.status import Health, HealthStatus, aggregate

__all__ = ["REJECTION_REASONS", "Health", "HealthStatus", "aggregate", "assess",
           "awaits_operator", "check_for", "pending_part"]
