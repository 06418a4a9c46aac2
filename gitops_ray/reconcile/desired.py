"""Desired state: git's objects for an app, rendered once per source spec and commit.

Split from the pipeline (issue 35): the render cache is its own room. Renders are cached
per source spec: an unchanged revision is never re-rendered, and a commit that does not
touch what a plain-directory app's render reads (:func:`gitops_ray.render.input_digest`)
reuses its render; if git's changed paths miss every place the app's inputs live, they
are not even read. The cluster's facts are part of the key: its APIs (for Helm) and the
in-cluster pod-shape ConfigMaps (:data:`~gitops_ray.reconcile.facts.ShapesSource`), so
editing the instance-types ConfigMap re-renders. Objects are kept packed
(:class:`DesiredObject`), one per content.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from gitops_ray.errors import ChildMemoryExceeded, ChildTimedOut
from gitops_ray.packed import SHELF, Piece
from gitops_ray.reconcile.facts import AskedFacts, Discovery, ShapesSource, digest
from gitops_ray.render import render_app, render_inputs, touches
from gitops_ray.render.apps import REVISIONS_SEPARATOR, Application, split_revisions
from gitops_ray.render.notes import collecting
from gitops_ray.render.shapes import ClusterShapes, cluster_concerns
from gitops_ray.render.tools import HELM_BIN, KUBECTL_BIN
from gitops_ray.source import Checkout, GitSource
from gitops_ray.sync.hooks import split as split_hooks
from gitops_ray.sync.order import WAVE_ANNOTATION
from gitops_ray.sync.tracking import with_tracking
from gitops_ray.types import Manifest, ResourceKey

log = structlog.get_logger(__name__)

EXHAUSTED_BACKOFF = (10.0, 2.0, 600.0)
"""(first wait, factor, cap) before a render that ran out of memory or time is tried again
at the same commit: each try costs a child process its whole memory limit, or a worker
for the whole deadline."""


@dataclass(frozen=True)
class DesiredObject:
    """One of git's objects (with our tracking id) as the pipeline keeps it between passes.

    Identity and content digest are at hand; the object itself is packed on the shared
    :data:`~gitops_ray.packed.SHELF` (what it repeats of other objects, git's or live,
    is stored once) and unpacked only when a diff, a dry run or a sync needs it.

    One per content: while an object of the same content is kept (an unchanged file in
    the previous render of a new commit, the same app on standby), :meth:`of` returns
    it instead of packing again. Packing was two fifths of re-rendering a 60-file app
    for a one-file commit (py-spy, 3 x 1,000 fleet failover).
    """

    api_version: str
    key: ResourceKey
    digest: str
    piece: Piece = field(repr=False)
    wave: str | None = None  # its sync-wave annotation, as written (outline)

    @classmethod
    def of(cls, obj: Manifest) -> DesiredObject:
        content = digest(obj)  # covers apiVersion, kind and metadata: the key too
        with _KNOWN_LOCK:
            known = _KNOWN.get(content)
        if known is not None:
            return known
        wave = ((obj.get("metadata") or {}).get("annotations") or {}).get(WAVE_ANNOTATION)
        made = cls(str(obj.get("apiVersion", "")), ResourceKey.of(obj), content,
                   SHELF.pack(obj), None if wave is None else str(wave))
        with _KNOWN_LOCK:
            return _KNOWN.setdefault(content, made)

    def manifest(self) -> Manifest:
        """A private copy of the object."""
        return self.piece.unpack()

    def outline(self) -> Manifest:
        """What a sync needs of an object it will not apply: identity and sync wave.

        For a settled object (:attr:`~gitops_ray.reconcile.comparison.Comparison.settled`):
        the sync orders it, keeps it in the inventory and may check its wave's health, all
        by identity; unpacking every one of a big app's objects for that was a tenth of a
        takeover's CPU.
        """
        meta: Manifest = {"name": self.key.name}
        if self.key.namespace:
            meta["namespace"] = self.key.namespace
        if self.wave is not None:
            meta["annotations"] = {WAVE_ANNOTATION: self.wave}
        return {"apiVersion": self.api_version, "kind": self.key.kind, "metadata": meta}

    @property
    def coordinates(self) -> tuple[str, str, str, str]:
        """(apiVersion, kind, namespace, name), as a live source takes them."""
        return self.api_version, self.key.kind, self.key.namespace, self.key.name


_KNOWN: weakref.WeakValueDictionary[str, DesiredObject] = weakref.WeakValueDictionary()
_KNOWN_LOCK = threading.Lock()


@dataclass(frozen=True)
class RenderTools:
    """External tools the render stage needs (cluster facts come from discovery)."""

    helm_bin: str = HELM_BIN
    kubectl_bin: str = KUBECTL_BIN
    value_file_hosts: tuple[str, ...] = ()  # setting render.valueFileHosts


@dataclass(frozen=True)
class Render:
    """One render of an app (or of a multi-source app's sources, merged)."""

    sha: str
    inputs: str | None  # see gitops_ray.render.input_digest
    objects: list[DesiredObject]
    problems: tuple[str, ...] = ()  # see render.notes
    facts: str = ""  # the digest of the cluster's capabilities, if the render asked them
    cluster: str = ""  # ClusterShapes.version it was rendered with (pod-shape ConfigMaps)
    shapes: str = ""  # ClusterShapes.version if they can change this app (cluster_concerns)
    scope: tuple[str, ...] | None = None  # where all inputs live (render.Inputs.scope)
    hooks: tuple[DesiredObject, ...] = ()  # resource hooks (sync.hooks): run, not compared


@dataclass(frozen=True)
class _Exhausted:
    """An app's render at ``sha`` ran out of memory or time; not tried again before ``until``."""

    sha: str
    error: ChildMemoryExceeded | ChildTimedOut
    until: float  # time.monotonic()
    wait: float


def _next_wait(last: float) -> float:
    first, factor, cap = EXHAUSTED_BACKOFF
    return min(cap, last * factor) if last else first


def spec_key(app: Application) -> str:
    """What the render cache keys an app by: its sources, destination namespace and name."""
    return repr(app.all_sources) + app.destination.namespace + app.name


class Renders:
    """The render cache: the latest render per app spec (module docstring)."""

    def __init__(self, source: GitSource, tools: RenderTools, discovery: Discovery,
                 shapes: ShapesSource) -> None:
        self.source = source
        self.tools = tools
        self._discovery = discovery
        self._shapes = shapes
        self._lock = threading.Lock()
        # Latest entry per app spec only: a long-running controller must not grow with
        # every commit it has ever seen.
        self._renders: dict[str, Render] = {}
        self._exhausted: dict[str, _Exhausted] = {}  # per app spec: its last memory failure

    def desired(self, app: Application, *, revision: str | None = None,
                local: Path | None = None) -> tuple[str, list[DesiredObject]]:
        """The commit SHA and git's objects for ``app``, tracking id included.

        See :meth:`gitops_ray.reconcile.pipeline.Pipeline.desired`.
        """
        cluster = self._shapes()
        if local is not None:
            rendered = self._render(app, local, "local", None, cluster)
            with self._lock:
                self._renders["local:" + app.name] = rendered
            return "local", rendered.objects
        spec = spec_key(app)
        with self._lock:
            cached = self._renders.get(spec)
        if cached is not None and not self._facts_hold(cached, cluster):
            cached = None  # the cluster's APIs (a chart's) or pod shapes changed: render again
        if cached is not None and revision == cached.sha:
            return cached.sha, cached.objects  # a known commit SHA: no git call at all
        if app.sources:
            return self._desired_sources(app, spec, cached, revision, cluster)
        checkout = self.source.checkout(app.source.repo_url,
                                        revision or app.source.target_revision,
                                        chart=app.source.chart)
        if cached is None or cached.sha != checkout.sha:
            cached = self._at_commit(app, cached, checkout, cluster)
            with self._lock:
                self._renders[spec] = cached
        return cached.sha, cached.objects

    def _at_commit(self, app: Application, cached: Render | None, checkout: Checkout,
                   cluster: ClusterShapes) -> Render:
        """The render at a new commit: the last one if git says its inputs are untouched."""
        if cached is not None and self._untouched(app, cached, checkout.sha):
            return dataclasses.replace(cached, sha=checkout.sha)  # nothing read
        found = render_inputs(app, checkout.root, cluster=cluster)
        inputs = found.digest if found is not None else None
        if cached is not None and inputs is not None and inputs == cached.inputs:
            cached = dataclasses.replace(cached, sha=checkout.sha)  # app untouched
        else:
            cached = self._render(app, checkout.root, checkout.sha, inputs, cluster)
        return dataclasses.replace(cached, scope=found.scope if found else None)

    def _desired_sources(self, app: Application, spec: str, cached: Render | None,
                         revision: str | None, cluster: ClusterShapes
                         ) -> tuple[str, list[DesiredObject]]:
        """A multi-source app: each source at its revision, rendered, merged in order.

        The app's revision is its sources' joined (:data:`REVISIONS_SEPARATOR`); a pinned
        one (a rollback's) checks every source out at its own part.
        """
        pinned = split_revisions(revision or "", len(app.sources))
        checkouts = [self.source.checkout(s.repo_url, pinned[i] if pinned else s.target_revision,
                                          chart=s.chart) for i, s in enumerate(app.sources)]
        joined = REVISIONS_SEPARATOR.join(c.sha for c in checkouts)
        if cached is None or cached.sha != joined:
            cached = self._render_sources(app, checkouts, joined, cluster)
            with self._lock:
                self._renders[spec] = cached
        return cached.sha, cached.objects

    def _render_sources(self, app: Application, checkouts: Sequence[Checkout], joined: str,
                        cluster: ClusterShapes) -> Render:
        """Render every source that is not ``ref:`` only; a later source's object wins."""
        refs = {s.ref: c.root for s, c in zip(app.sources, checkouts, strict=True) if s.ref}
        parts = [self._render(dataclasses.replace(app, source=s, sources=()), c.root, joined,
                              None, cluster, refs=refs)
                 for s, c in zip(app.sources, checkouts, strict=True) if not s.ref_only]
        merged: dict[ResourceKey, DesiredObject] = {}
        problems = [p for part in parts for p in part.problems]
        for obj in (o for part in parts for o in part.objects):
            if obj.key in merged:  # Argo CD: RepeatedResourceWarning, the last one is used
                problems.append(f"{obj.key} is rendered by more than one source; the last "
                                "source's is used")
            merged[obj.key] = obj
        return Render(joined, None, list(merged.values()), tuple(problems),
                      next((p.facts for p in parts if p.facts), ""), cluster.version,
                      next((p.shapes for p in parts if p.shapes), ""),
                      hooks=tuple(h for part in parts for h in part.hooks))

    def _untouched(self, app: Application, cached: Render, sha: str) -> bool:
        """Whether git says commit ``sha`` changed nothing where ``cached``'s inputs live."""
        if cached.scope is None or cached.inputs is None or app.source.chart:
            return False
        changed = self.source.changed_paths(app.source.repo_url, cached.sha, sha)
        return changed is not None and not touches(changed, cached.scope)

    def last(self, app: Application, local: bool) -> Render | None:
        """The last render of ``app`` (``local``: of a local directory), if any."""
        key = "local:" + app.name if local else spec_key(app)
        with self._lock:
            return self._renders.get(key)

    def _render(self, app: Application, root: Path, sha: str, inputs: str | None,
                cluster: ClusterShapes, *, refs: Mapping[str, Path] | None = None) -> Render:
        """The render of ``app`` at ``sha``, or its last memory failure at ``sha``.

        A render that ran out of memory (or time) is not tried again at the same commit
        before its backoff (:data:`EXHAUSTED_BACKOFF`) ends: the error is raised again,
        so every watch event does not start another child.
        """
        spec, now = spec_key(app), time.monotonic()
        with self._lock:
            last = self._exhausted.get(spec)
        if last is not None and last.sha == sha and now < last.until:
            raise type(last.error)(str(last.error))  # a new one: a traceback per raise
        try:
            rendered = self._rendered(app, root, sha, inputs, cluster, refs=refs)
        except (ChildMemoryExceeded, ChildTimedOut) as e:
            wait = _next_wait(last.wait if last is not None and last.sha == sha else 0.0)
            with self._lock:
                self._exhausted[spec] = _Exhausted(sha, e, now + wait, wait)
            event = "render_out_of_memory" if isinstance(e, ChildMemoryExceeded) \
                else "render_timed_out"
            log.warning(event, app=app.name, retry_s=wait)
            raise
        with self._lock:
            self._exhausted.pop(spec, None)
        return rendered

    def _rendered(self, app: Application, root: Path, sha: str, inputs: str | None,
                  cluster: ClusterShapes, *, refs: Mapping[str, Path] | None = None
                  ) -> Render:
        asked = AskedFacts(self._discovery.now)
        with collecting() as problems:
            rendered = render_app(app, root, helm_bin=self.tools.helm_bin,
                                  kubectl_bin=self.tools.kubectl_bin, cluster_facts=asked,
                                  is_namespaced=self._discovery.namespaced,
                                  cluster_shapes=cluster,
                                  value_file_hosts=self.tools.value_file_hosts, refs=refs)
        resources, hooks = split_hooks(rendered)
        objects = [DesiredObject.of(with_tracking(app.name, obj)) for obj in resources]
        shapes = cluster.version if cluster_concerns(cluster, rendered) else ""
        return Render(sha, inputs, objects, tuple(problems), asked.digest, cluster.version,
                      shapes, hooks=tuple(DesiredObject.of(with_tracking(app.name, obj))
                                          for obj in hooks))

    def _facts_hold(self, cached: Render, cluster: ClusterShapes) -> bool:
        """Whether ``cached`` was rendered with the pod shapes and (a chart) APIs of now.

        A render that did not ask for the cluster's APIs (not a chart) does not depend on
        them, so checking it asks the API server nothing.
        """
        return cached.cluster == cluster.version and \
            (not cached.facts or cached.facts == self._discovery.now()[1])
