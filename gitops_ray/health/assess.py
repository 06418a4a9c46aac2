"""Assess one live object: Argo CD's generic rules around a check chosen by kind.

The order is Argo CD's (``controller/health.go`` then gitops-engine ``GetResourceHealth``):
an object marked ``argocd.argoproj.io/ignore-healthcheck: "true"`` does not count, an
object being deleted is Progressing whatever its kind, then a custom Lua check of the
kind from ``argocd-cm`` (:mod:`gitops_ray.health.lua`), and only then the kind's own
check. A kind without a check yields ``None``: it is live but does not count towards the
app's health. Checks are total functions (see ``fields``), so there is no error path; a
failing Lua check is Unknown. A Lua check of a Secret sees its values masked
(:mod:`gitops_ray.secretmask`): its message is shown everywhere health is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from gitops_ray.health.builtin import CHECKS
from gitops_ray.health.fields import dig, mapping
from gitops_ray.health.lua import NO_CHECKS, LuaChecks, run_lua_health
from gitops_ray.health.queued import queued_health
from gitops_ray.health.ray import (
    raycluster_health,
    raycronjob_health,
    rayjob_health,
    rayservice_health,
)
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.secretmask import is_secret, masked
from gitops_ray.types import Manifest, ResourceKey, split_api_version

IGNORE_HEALTHCHECK = "argocd.argoproj.io/ignore-healthcheck"

Check = Callable[[Manifest], Health]

RAY_CHECKS: dict[str, Check] = {
    "RayJob": rayjob_health,
    "RayService": rayservice_health,
    "RayCronJob": raycronjob_health,
}


def assess(obj: Manifest | None, *, events: Sequence[Manifest] = (),
           pods: Sequence[Manifest] = (), custom: LuaChecks = NO_CHECKS,
           workloads: Sequence[Manifest] = ()) -> Health | None:
    """Health of a live object (``None`` = missing); ``None`` when it has no health check.

    ``events`` are Events that may concern the object, ``pods`` Pods that may belong to
    it; only the RayCluster check reads them. ``custom``: the ``argocd-cm`` Lua checks.
    ``workloads``: Kueue Workloads that may belong to it; a queued, suspended RayCluster
    or RayJob is Suspended waiting for admission (:mod:`gitops_ray.health.queued`).
    """
    if obj is None:
        return Health(HealthStatus.MISSING, "Resource does not exist in the cluster")
    if mapping(dig(obj, "metadata", "annotations")).get(IGNORE_HEALTHCHECK) == "true":
        return None
    if dig(obj, "metadata", "deletionTimestamp"):
        return Health(HealthStatus.PROGRESSING, "Pending deletion")
    script = custom.for_object(obj) if custom else None
    if script is not None:  # even without a verdict: Argo does not run the built-in then
        shown = masked(obj)[0] if is_secret(ResourceKey.of(obj)) else obj
        return run_lua_health(script, shown or obj)
    queued = queued_health(obj, workloads)
    if queued is not None:
        return queued
    check = check_for(obj, events=events, pods=pods)
    return check(obj) if check else None


def check_for(obj: Manifest, *, events: Sequence[Manifest] = (),
              pods: Sequence[Manifest] = ()) -> Check | None:
    """The health check for the object's API group and kind, if there is one."""
    group, _ = split_api_version(str(obj.get("apiVersion", "")))
    kind = str(obj.get("kind", ""))
    if group != "ray.io":
        return CHECKS.get((group, kind))
    if kind == "RayCluster":
        return partial(raycluster_health, events=events, pods=pods)
    return RAY_CHECKS.get(kind)
