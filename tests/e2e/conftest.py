"""The end-to-end tier: git → gitops-ray controller → KubeRay operator → running Pods.

Tests here get the Ray stack (:mod:`localcluster.raystack`) instead of the bare control
plane: the fixtures ``control_plane``, ``kube`` and ``namespace`` are overridden with ones
bound to :func:`ray_stack` (a separate package fixture, so a session running other tiers
too keeps both stacks apart, and stops it after this tier), and ``start_controller`` is
the integration tier's in-process controller on top of them.

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
from localcluster.kueue import start_kueue
from localcluster.raystack import enable_raycronjobs
from tests.harness.namespaces import fresh_namespace


@pytest.fixture(scope="package")
def ray_stack() -> Iterator[LocalControlPlane]:
    """The Ray stack for this tier's tests: package-scoped, so a worker stops it when it
    moves on to other tiers (the tier's tests run in a row, :mod:`tests.harness.groups`)."""
    with LocalControlPlane(kuberay=True) as cp:
        yield cp


@pytest.fixture(scope="package")
def control_plane(ray_stack: LocalControlPlane) -> LocalControlPlane:
    return ray_stack


@pytest.fixture(scope="package")
def kube(ray_stack: LocalControlPlane) -> Kube:
    return Kube.connect(str(ray_stack.kubeconfig))


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    yield from fresh_namespace(kube, "e2e")


@pytest.fixture(scope="package")
def kueue(ray_stack: LocalControlPlane) -> LocalControlPlane:
    """Kueue v0.17.0 on the Ray stack (:mod:`localcluster.kueue`), for the stack's life.

    Its feature gate ``ElasticJobsViaWorkloadSlices`` (alpha) is on: without it Kueue's
    validation refuses ``enableInTreeAutoscaling`` on every queued RayCluster, and the
    autoscaler-beside-Kueue test needs one. Only objects that also carry the annotation
    ``kueue.x-k8s.io/elastic-job: "true"`` are elastic; the others are refused still.
    Kueue manages only objects labelled ``kueue.x-k8s.io/queue-name``, so the other
    tests of the session are not queued.
    """
    start_kueue(ray_stack, gates={"ElasticJobsViaWorkloadSlices": True})
    return ray_stack


@pytest.fixture(scope="package")
def raycronjobs(ray_stack: LocalControlPlane) -> LocalControlPlane:
    """The Ray stack's operator with its alpha RayCronJob controller on, and that CRD.

    For the rest of the stack's life (:func:`localcluster.raystack.enable_raycronjobs`): the
    operator restarts once; what it had made stays, and it picks its objects up again.
    """
    enable_raycronjobs(ray_stack)
    return ray_stack
