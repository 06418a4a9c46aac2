"""The hand-over annotations of a cluster Secret (``strconv.ParseBool`` for Argo CD's)."""

from __future__ import annotations

import pytest

from gitops_ray.kube.clusters import hand_over


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"gitops-ray.io/managed": "true", "argocd.argoproj.io/skip-reconcile": "true"},
     (True, True)),
    ({"gitops-ray.io/managed": "True", "argocd.argoproj.io/skip-reconcile": "1"}, (True, True)),
    ({"gitops-ray.io/managed": "true", "argocd.argoproj.io/skip-reconcile": "yes"},
     (True, False)),  # Go's ParseBool refuses "yes": Argo CD reconciles that cluster
    ({"argocd.argoproj.io/skip-reconcile": "t"}, (False, True)),
    ({}, (False, False)), (None, (False, False)), ("nonsense", (False, False)),
])
def test_hand_over(annotations: object, expected: tuple[bool, bool]) -> None:
    assert hand_over(annotations) == expected
