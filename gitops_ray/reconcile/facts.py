"""The cluster's facts a render depends on: its version and APIs, and its pod shapes.

Split from the pipeline (issue 35) because the facts have their own cache and lock
discipline: a chart that tests ``.Capabilities.APIVersions.Has "ray.io/v1"`` renders as it
does under Argo CD, which passes the destination cluster's APIs, and a CRD installed
later is seen within :data:`CAPABILITIES_TTL`; only one worker refreshes them at a time.
The pod-shape ConfigMaps (:data:`ShapesSource`) and ``argocd-cm`` (:data:`SystemSource`)
are read through the callables the runtime passes in (the watch cache, or GETs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable

from gitops_ray.errors import DiffError
from gitops_ray.kube import Capabilities, Kube, KubeError, UnknownKind
from gitops_ray.reconcile.argocdcm import SystemSettings
from gitops_ray.render.shapes import ClusterShapes
from gitops_ray.types import Manifest

ShapesSource = Callable[[], ClusterShapes]
"""The in-cluster pod-shape ConfigMaps as they are now (see :func:`configmap_shapes`)."""

SystemSource = Callable[[], SystemSettings]
"""Argo CD's ``argocd-cm`` settings as they are now (see :mod:`gitops_ray.reconcile.argocdcm`)."""

CAPABILITIES_TTL = 300.0


def digest(value: object) -> str:
    """A stable digest of a JSON-like value (what a cache key holds of it)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class Discovery:
    """The target cluster's version and APIs for Helm, cached for :data:`CAPABILITIES_TTL`."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        self._capabilities: tuple[float, Capabilities, str] | None = None
        self._discovering = threading.Lock()  # one refresh of the capabilities at a time

    def capabilities(self) -> Capabilities:
        return self.now()[0]

    def now(self) -> tuple[Capabilities, str]:
        """The target cluster's version and APIs for Helm, and their digest.

        One refresh at a time: the workers that find the facts due while another one
        refreshes them go on with the last ones (all of them asked the API server at
        once before, 8 x 3 discovery requests in the cycle that found them due).
        """
        cached = self._if_fresh()
        if cached is not None:
            return cached[1], cached[2]
        last = self._capabilities
        if last is not None and not self._discovering.acquire(blocking=False):
            return last[1], last[2]
        if last is None:
            self._discovering.acquire()  # the first facts: wait for whoever asks
        try:
            return self._refresh()
        finally:
            self._discovering.release()

    def namespaced(self, api_version: str, kind: str) -> bool | None:
        """Whether the kind is namespaced (None: the cluster does not know it)."""
        try:
            return self.kube.resource(api_version, kind).namespaced
        except UnknownKind:
            return None

    def _if_fresh(self) -> tuple[float, Capabilities, str] | None:
        with self._lock:
            cached = self._capabilities
        return cached if cached is not None and \
            time.monotonic() - cached[0] < CAPABILITIES_TTL else None

    def _refresh(self) -> tuple[Capabilities, str]:
        """Ask the API server (unless a refresh just finished); the last facts if it fails."""
        cached = self._if_fresh()
        if cached is not None:
            return cached[1], cached[2]
        last, now = self._capabilities, time.monotonic()
        try:
            found = self.kube.capabilities()
        except KubeError as e:
            if last is not None:
                return last[1], last[2]
            raise DiffError(f"cannot read the cluster's version and APIs: {e}") from e
        entry = (now, found, digest(dataclasses.asdict(found)))
        with self._lock:
            self._capabilities = entry
        return found, entry[2]


class AskedFacts:
    """The cluster's facts for one render, asked of the pipeline only if the render does.

    A :data:`~gitops_ray.render.pipeline.ClusterFacts`; :attr:`digest` is then what the
    render depended on ("" if it asked nothing: only charts ask).
    """

    def __init__(self, ask: Callable[[], tuple[Capabilities, str]]) -> None:
        self._ask = ask
        self.digest = ""

    def __call__(self) -> tuple[str, tuple[str, ...]]:
        capabilities, self.digest = self._ask()
        return capabilities.kube_version, tuple(capabilities.api_versions)


def configmap_shapes(get: Callable[[str, str], Manifest | None], *, namespace: str,
                     instance_types: str = "", patches: str = "") -> ShapesSource:
    """A :data:`ShapesSource` reading the named ConfigMaps of ``namespace`` with ``get``.

    ``get(namespace, name)`` is a plain GET for the CLI, the watch cache in the controller.
    An empty name is not read; a ConfigMap that does not exist counts as empty.
    """
    def read(name: str) -> Manifest | None:
        if not name:
            return None
        try:
            return get(namespace, name)
        except KubeError as e:
            raise DiffError(f"cannot read pod-shape ConfigMap {namespace}/{name}: {e}") from e

    return lambda: ClusterShapes.of(read(instance_types), read(patches))
