"""The Application cache of Argo CD mode keeps the newest copy of each Application.

Our own status write's result is remembered until its watch event arrives, but never over
a later change the watch already delivered: ``argocd app sync`` asks for a refresh (an
annotation) right after the operation's status lands, and a remembered older copy would
hide that request for good (the CLI then waits for a refresh that never comes).
"""

from __future__ import annotations

import copy
from typing import Any

from gitops_ray.reconcile.argostatus import (
    MANAGED_ANNOTATION,
    REFRESH_ANNOTATION,
    SKIP_RECONCILE_ANNOTATION,
    refresh_requested,
)
from gitops_ray.runtime.argocd import ClusterApplications
from gitops_ray.settings import ArgoCD


def application(version: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "demo", "namespace": "argocd", "resourceVersion": version,
                     "annotations": {MANAGED_ANNOTATION: "true",
                                     SKIP_RECONCILE_ANNOTATION: "true", **annotations}},
        "spec": {"project": "default",
                 "source": {"repoURL": "https://git.example/r.git", "path": "p"},
                 "destination": {"server": "https://kubernetes.default.svc",
                                 "namespace": "ray"}}}


def apps() -> ClusterApplications:
    return ClusterApplications(None, ArgoCD(enabled=True),  # type: ignore[arg-type]
                               notify=lambda name, change: None)


def test_our_write_is_remembered_until_its_event_arrives() -> None:
    cache = apps()
    cache._on_event("ADDED", application("1"))
    cache.remember("demo", application("2"), replacing="1")
    assert cache.object("demo")["metadata"]["resourceVersion"] == "2"


def test_a_later_change_already_seen_is_not_replaced_by_our_older_write() -> None:
    cache = apps()
    cache._on_event("ADDED", application("1"))
    ours = application("2")
    cache._on_event("MODIFIED", copy.deepcopy(ours))  # the watch: our write ...
    cache._on_event("MODIFIED", application("3", **{REFRESH_ANNOTATION: "normal"}))  # ... then
    cache.remember("demo", ours, replacing="1")  # the writer remembers only now
    assert refresh_requested(cache.object("demo") or {}) == "normal"
