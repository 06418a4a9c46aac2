"""The end-to-end tier: git → gitops-ray controller → KubeRay operator → running Pods.

Tests here get the Ray stack (:mod:`localcluster.raystack`) instead of the bare control
plane: the fixtures ``control_plane``, ``kube`` and ``namespace`` are overridden with ones
bound to :func:`ray_stack` (a separate session fixture, so a session running other tiers
too keeps both stacks apart), and ``start_controller`` is the integration tier's in-process
controller on top of them.

Not covered here: RayJob and RayService past the point where the operator needs the Ray
dashboard of a real head (kwok Pods run no containers; ``test_rayjob_rayservice`` says
exactly where each stops), and the autoscaler's own decision loop (its provider is driven
one step at a time instead).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.conftest import fresh_namespace
from tests.integration.test_controller import start_controller

__all__ = ["start_controller"]


@pytest.fixture(scope="session")
def control_plane(ray_stack: LocalControlPlane) -> LocalControlPlane:
    return ray_stack


@pytest.fixture(scope="session")
def kube(ray_stack: LocalControlPlane) -> Kube:
    return Kube.connect(str(ray_stack.kubeconfig))


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    yield from fresh_namespace(kube, "e2e")
