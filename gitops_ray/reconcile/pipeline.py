"""One pass of the pipeline for one app: source → render → predict → diff → health.

The stages are pure or nearly so; this module is where they meet the cluster. It keeps
two caches that make repeated passes cheap, which is what the controller relies on:

* renders are cached per source spec: an unchanged revision is never re-rendered, and a
  commit that does not touch what a plain-directory app's render reads
  (:func:`gitops_ray.render.input_digest`) reuses its render; if git's changed paths
  miss every place the app's inputs live, they are not even read. The cluster's facts are
  part of the key: its APIs (for Helm) and the in-cluster pod-shape ConfigMaps (a
  :data:`ShapesSource`), so editing the instance-types ConfigMap re-renders;
* per-object diffs and health (server-side dry run included) are cached by (desired
  content, ignore rules, live resourceVersion), as Argo CD caches server-side diffs: an
  unchanged pair costs no API request and no normalisation. The ``argocd-cm`` settings
  (a :data:`SystemSource`) are part of the rules: editing them re-compares every object.

**What a comparison reads.** Without a cached live source (the CLI), the objects of one
app that share a kind and namespace are read with one paged LIST (bounded: a namespace
holding many more objects of the kind than the app has falls back to one GET each), not
one GET per object. What it read is kept on the :class:`Comparison`
(:attr:`~Comparison.live`) so the sync that follows looks nothing up again. (With the
watch cache, an object the cache does not hold is read with a GET: a LIST of its
namespace would also send every object the cache does hold, and a fleet's cold sync,
where namespaces fill while their apps are compared, ran slower with one.) The
comparison after a sync is given the sync's apply responses
(:class:`~gitops_ray.sync.engine.Landed`): each is the live object *and* the dry-run
prediction (applying the same body again changes nothing), so an object the sync just
applied costs no read and no dry run; a RayCluster it just created has no
Events or Pods to read yet (any there are name an earlier object of the same name). Only
objects the sync did not write (outside a selective sync's selection, or settled, below) keep the
verdict the comparison before the sync gave them moments ago: no read, as in a refresh.

**Settled objects.** An object whose live ``resourceVersion`` is the one our own apply of
the same desired content (and rules) left is *settled*: applying it again would change
nothing, so the sync does not re-assert it (:attr:`Comparison.settled`). The memo knows it
(``_Memo.written``); any other writer moves the ``resourceVersion`` and ends it.

**Proven by a dry run.** A server-side dry run that answers with the live object itself
(``managedFields`` included, and nothing for a takeover to remove) says our apply of this
content would change nothing: live is what that apply leaves, exactly as if it had just
run. So the verdict counts as written (settled when in sync), and a refresh records its
applied mark (:attr:`Comparison.proven`), as a sync does. Without this, an app whose
sync was cut short (a lost lease) and then found in sync by dry runs had no marks, and
the replica that took it over dry-ran every object again. A dry run that would add our
manager to a field another one owns is not a no-op, so an object someone else wrote is
never marked this way.

**A pass that changed nothing.** At 10,000 RayClusters even memo hits add up (a version
lookup, the Events and Pods tokens and a few dict reads per object: most of a no-op
cycle's CPU). The live source may say how many watch events it has heard
(:data:`Generation`); while that count, the memo and everything else the comparison is made
of (the app, its render, settings, AppProject, destination) stay the same objects, an
app's last comparison is handed back whole: nothing it read can have changed. When the
count moved, every object is looked at again, and if each one's memo entry is the very
one the last comparison was made of, that comparison is still handed back (its derived
parts, health, rows and conditions, are not rebuilt). Only a comparison built wholly
from memo entries and that read no live object is kept for this, so it holds nothing the
memo does not (a first comparison's normalised copies would be 10,000 RayClusters' worth).

What is kept between passes is packed (:mod:`gitops_ray.packed`): at 1,000 RayClusters
decoded objects would be most of the controller's memory. Live objects come from a
:class:`LiveSource` (plain GETs for the CLI, the watch cache in the controller), with a
:class:`LiveVersion` that lets the watch cache answer a no-op pass from versions alone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff import AppDiff, ResourceDiff, RuleSet, compare, compile_rules
from gitops_ray.diff.compare import DELETING
from gitops_ray.diff.paths import json_equal
from gitops_ray.diff.refusals import Refusal, operator_refusals, server_refusals, with_refusals
from gitops_ray.diff.rules import JQ_TIMEOUT
from gitops_ray.errors import ChildMemoryExceeded, ChildTimedOut, DiffError
from gitops_ray.health import Health, aggregate, assess, awaits_operator, pending_part
from gitops_ray.health.impact import Impact
from gitops_ray.health.queued import waits_for_admission
from gitops_ray.kube import Capabilities, Conflict, Invalid, Kube, KubeError, UnknownKind
from gitops_ray.kube.workloads import workloads_in
from gitops_ray.packed import SHELF, Piece
from gitops_ray.reconcile.argocdcm import NO_SETTINGS, SystemSettings
from gitops_ray.reconcile.impacts import ImpactReads, impacts_of
from gitops_ray.reconcile.project import (
    IN_CLUSTER,
    Cluster,
    Project,
    Projects,
    ResolveCluster,
    cluster_conditions,
    forbidden_resources,
    in_cluster_only,
    live_permitted,
    load,
    stops_sync,
)
from gitops_ray.render import render_app, render_inputs, touches
from gitops_ray.render.apps import REVISIONS_SEPARATOR, Application, split_revisions
from gitops_ray.render.notes import collecting
from gitops_ray.render.shapes import ClusterShapes, cluster_concerns
from gitops_ray.render.tools import HELM_BIN, KUBECTL_BIN
from gitops_ray.source import Checkout, GitSource
from gitops_ray.sync.engine import Landed, prepare
from gitops_ray.sync.hooks import split as split_hooks
from gitops_ray.sync.order import WAVE_ANNOTATION
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore, applied_mark, markable
from gitops_ray.sync.takeover import predicted_after_takeover
from gitops_ray.sync.tracking import is_tracked_by, shared_message, shared_with, with_tracking
from gitops_ray.types import AppCondition, ConditionType, Manifest, ResourceKey, SyncStatus

log = structlog.get_logger(__name__)

LiveSource = Callable[[str, str, str, str], "Manifest | None"]
"""(apiVersion, kind, namespace, name) -> live object or None."""

LiveVersion = Callable[[str, str, str, str], "str | None"]
"""(apiVersion, kind, namespace, name) -> the live ``resourceVersion``, or None when only a
read of the object itself can tell (the watch cache answers this from memory)."""

ShapesSource = Callable[[], ClusterShapes]
"""The in-cluster pod-shape ConfigMaps as they are now (see :func:`configmap_shapes`)."""

SystemSource = Callable[[], SystemSettings]
"""Argo CD's ``argocd-cm`` settings as they are now (see :mod:`gitops_ray.reconcile.argocdcm`)."""

CAPABILITIES_TTL = 300.0
PREDICT_ATTEMPTS = 3
"""Dry runs of one object per comparison when it keeps changing under them (409)."""
EXHAUSTED_BACKOFF = (10.0, 2.0, 600.0)
"""(first wait, factor, cap) before a render that ran out of memory or time is tried again
at the same commit: each try costs a child process its whole memory limit, or a worker
for the whole deadline."""
LIST_AT_LEAST = 2
"""Objects of one kind and namespace from which a comparison LISTs them rather than GETs."""
LIST_BOUND = 500
"""A LIST stops (and GETs are used instead) past max(this, 4 x the app's objects) items."""
REJECTIONS = "type=Warning,involvedObject.kind=RayCluster"
"""The Events a RayCluster's health reads: the operator's Warnings about it."""


RAY_CLUSTER_LABEL = "ray.io/cluster"
"""The label KubeRay puts on every Pod of a RayCluster (value: the cluster's name)."""


class EventSource(Protocol):
    """What a RayCluster's health reads besides the object: its Events and its Pods.

    ``about``: the operator's Warning Events about it; ``pods``: its Pods, for a rollout
    the operator has not made (:mod:`gitops_ray.health.rollout`).

    ``cached``: answering costs no request, so the pipeline asks for every RayCluster and
    keys its memo by the events' and Pods' versions (the watch cache); otherwise it asks
    for Events only for clusters whose health depends on them (:func:`awaits_operator`)
    and for Pods only for clusters that exist.
    """

    cached: bool

    def about(self, namespace: str, name: str) -> Sequence[Manifest]: ...

    def pods(self, namespace: str, name: str) -> Sequence[Manifest]: ...

    def signals(self, namespace: str, name: str) -> str:
        """For a ``cached`` source: a token that changes when ``about`` or ``pods`` would.

        Answered without unpacking anything, so a no-op pass stays cheap.
        """
        ...


class ClusterEvents:
    """Events read from the API server, one list per RayCluster that needs them."""

    cached = False

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def about(self, namespace: str, name: str) -> Sequence[Manifest]:
        return self._list("Event", namespace,
                          field_selector=f"{REJECTIONS},involvedObject.name={name}")

    def pods(self, namespace: str, name: str) -> Sequence[Manifest]:
        return self._list("Pod", namespace, label_selector=f"{RAY_CLUSTER_LABEL}={name}")

    def signals(self, namespace: str, name: str) -> str:
        return ""  # not cached: the pipeline derives signals from the objects it read

    def _list(self, kind: str, namespace: str, **selectors: str) -> Sequence[Manifest]:
        try:
            return self.kube.list("v1", kind, namespace, **selectors)[0]
        except KubeError:  # e.g. no right to list them: health without that signal
            return ()


def event_token(event: Manifest) -> str:
    """What changes when an Event about an object does: its ``resourceVersion``."""
    return str((event.get("metadata") or {}).get("resourceVersion", ""))


def pod_token(pod: Manifest) -> str:
    """What changes when a Pod's template match can: its labels, annotations, spec, deletion.

    Not its ``resourceVersion``: Pod status changes all the time while a cluster starts,
    and each would otherwise cost a server-side dry run of the RayCluster.
    """
    meta = pod.get("metadata") or {}
    return hashlib.sha256(json.dumps(
        [meta.get("name"), meta.get("labels"), meta.get("annotations"),
         bool(meta.get("deletionTimestamp")), pod.get("spec")],
        sort_keys=True, default=str).encode()).hexdigest()[:16]


def events_token(events: Sequence[Manifest]) -> str:
    """What changes when the Events about an object do."""
    return ",".join(sorted(event_token(e) for e in events))


def workloads_token(workloads: Sequence[Manifest]) -> str:
    """What changes when Kueue's word on a queued object can: its Workloads' versions."""
    return ",".join(sorted(event_token(w) for w in workloads))


def pods_token(pods: Sequence[Manifest]) -> str:
    """What changes when any of a cluster's Pods' template match can (:func:`pod_token`)."""
    return ",".join(sorted(pod_token(p) for p in pods))


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
        digest = _digest(obj)  # covers apiVersion, kind and metadata: the key too
        with _KNOWN_LOCK:
            known = _KNOWN.get(digest)
        if known is not None:
            return known
        wave = ((obj.get("metadata") or {}).get("annotations") or {}).get(WAVE_ANNOTATION)
        made = cls(str(obj.get("apiVersion", "")), ResourceKey.of(obj), digest,
                   SHELF.pack(obj), None if wave is None else str(wave))
        with _KNOWN_LOCK:
            return _KNOWN.setdefault(digest, made)

    def manifest(self) -> Manifest:
        """A private copy of the object."""
        return self.piece.unpack()

    def outline(self) -> Manifest:
        """What a sync needs of an object it will not apply: identity and sync wave.

        For a settled object (:attr:`Comparison.settled`): the sync orders it, keeps it
        in the inventory and may check its wave's health, all by identity; unpacking
        every one of a big app's objects for that was a tenth of a takeover's CPU.
        """
        meta: Manifest = {"name": self.key.name}
        if self.key.namespace:
            meta["namespace"] = self.key.namespace
        if self.wave is not None:
            meta["annotations"] = {WAVE_ANNOTATION: self.wave}
        return {"apiVersion": self.api_version, "kind": self.key.kind, "metadata": meta}

    @property
    def coordinates(self) -> tuple[str, str, str, str]:
        """(apiVersion, kind, namespace, name), as :data:`LiveSource` takes them."""
        return self.api_version, self.key.kind, self.key.namespace, self.key.name


@dataclass
class Comparison:
    """The state of one app after a pass: what git wants and how the cluster differs."""

    app: Application
    revision: str
    desired: list[DesiredObject]
    diff: AppDiff
    health: Health | None = None
    warnings: list[str] = field(default_factory=list)
    render_problems: tuple[str, ...] = ()  # tolerated by the render: see render.notes
    shapes: str = ""  # version of the in-cluster pod shapes the render depends on, if any
    rollouts: tuple[str, ...] = ()  # "<key>: group g 2/3 pods on an older template; ..."
    conditions: tuple[AppCondition, ...] = ()  # e.g. an AppProject's InvalidSpecError
    project: Project | None = None  # the app's AppProject, when projects are enforced
    forbidden: dict[ResourceKey, str] = field(default_factory=dict)  # by the project: why
    resource_health: dict[ResourceKey, Health] = field(default_factory=dict)  # None: no check
    live: dict[ResourceKey, Manifest | None] = field(default_factory=dict, repr=False)
    """Live objects this comparison read (None: absent): by LIST (no cache), and those of
    the OutOfSync resources, so the sync that follows looks none of them up again."""
    settled: frozenset[ResourceKey] = frozenset()
    """In sync and live as our last apply of the same content left them (module doc)."""
    applied: dict[ResourceKey, tuple[str, str]] = field(default_factory=dict, repr=False)
    """(content, live ``resourceVersion``) of the objects whose live version our last apply
    of that content left, in sync or not: their applied marks
    (:func:`~gitops_ray.sync.records.applied_mark`), digested only when a sync's status is
    saved, not on every refresh."""
    proven: frozenset[ResourceKey] = frozenset()
    """Of :attr:`applied`: those a no-op dry run proved and the record has no mark for
    yet (module doc): a refresh records their marks (:func:`~gitops_ray.reconcile.status.
    proven_marks`)."""
    shared: dict[ResourceKey, str] = field(default_factory=dict)
    """Git's objects whose live tracking id names another app, and that app: each is a
    ``SharedResourceWarning`` condition and a warning (``FailOnSharedResource=true``
    refuses the sync, :mod:`gitops_ray.reconcile.reconciler`)."""
    hooks: tuple[DesiredObject, ...] = ()
    """git's resource hooks (:mod:`gitops_ray.sync.hooks`): not compared, run by a sync."""
    impacts: tuple[Impact, ...] = ()
    """What the KubeRay operator will do with each changed Ray object
    (:mod:`gitops_ray.health.impact`)."""

    @functools.cached_property
    def out_of_sync(self) -> frozenset[ResourceKey]:
        """Once per comparison: a no-op refresh may be handed the same one back."""
        return frozenset(r.key for r in self.diff.resources if r.out_of_sync)

    @property
    def deleting(self) -> frozenset[ResourceKey]:
        """Pruned objects whose deletion was accepted but which are not gone yet."""
        return frozenset(r.key for r in self.diff.resources if r.reason == DELETING)

    def manifests(self, *, outlined: frozenset[ResourceKey] = frozenset()) -> list[Manifest]:
        """Git's objects, unpacked (what a sync applies); ``outlined`` ones only outlined.

        See :meth:`DesiredObject.outline`: for the objects a sync will not apply.
        """
        return [d.outline() if d.key in outlined else d.manifest() for d in self.desired]


Generation = Callable[[], "int | None"]
"""How many watch events the live source has heard; ``None``: it cannot say now."""


@dataclass(frozen=True)
class _Reuse:
    """An app's last comparison and what it was made of (see "A pass that changed nothing")."""

    inputs: tuple[object, ...]  # the app, SHA, render, settings, project, destination
    generation: tuple[int | None, int]  # (live source's events heard, memo writes) before
    memos: tuple[_Memo, ...]
    comparison: Comparison


@dataclass(frozen=True)
class RenderTools:
    """External tools the render stage needs (cluster facts come from discovery)."""

    helm_bin: str = HELM_BIN
    kubectl_bin: str = KUBECTL_BIN
    value_file_hosts: tuple[str, ...] = ()  # setting render.valueFileHosts


@dataclass(frozen=True)
class _Render:
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


@dataclass(frozen=True)
class _Memo:
    version: tuple[str, str]  # (desired content + rules, live resourceVersion): the diff's
    signals: str  # and with what health read besides the object (Events, Pods): health's
    diff: ResourceDiff
    health: Health | None
    written: bool = False  # version's live object is what our apply of this content left
    proven: bool = False  # written, known by a no-op dry run; the record has no mark yet
    shared: str = ""  # the other app the live object's tracking id names, if any

    @property
    def settled(self) -> bool:
        """In sync, and live is exactly what our last apply of this content left."""
        return self.written and not self.diff.out_of_sync


class Pipeline:
    """Runs source → render → diff for apps against one cluster."""

    def __init__(self, kube: Kube, source: GitSource, store: RecordStore, *,
                 tools: RenderTools = RenderTools(), builtin_rules: bool = True,
                 jq_timeout: float = JQ_TIMEOUT, live: LiveSource | None = None,
                 live_version: LiveVersion | None = None,
                 events: EventSource | None = None,
                 shapes: ShapesSource | None = None,
                 projects: Projects | None = None,
                 system: SystemSource | None = None,
                 clusters: ResolveCluster = in_cluster_only,
                 generation: Generation | None = None) -> None:
        self.kube = kube
        self.source = source
        self.store = store
        self.tools = tools
        self.builtin_rules = builtin_rules
        self.jq_timeout = jq_timeout
        self._live = live or self._get
        self._listing = live is None  # no cache: LIST an app's objects per kind and namespace
        self._live_version = live_version or _unknown_version
        self._events: EventSource = events or ClusterEvents(kube)
        self._shapes: ShapesSource = shapes or ClusterShapes
        self.projects = projects  # None: no AppProject rules (git-only, no Argo CD)
        self.clusters = clusters  # destination clusters (reconcile.project.ResolveCluster)
        self.system: SystemSource = system or (lambda: NO_SETTINGS)
        self._warned: dict[str, tuple[str, ...]] = {}  # app -> rule warnings last logged
        # Latest entry per app spec / per object only: a long-running controller must not
        # grow with every commit or every resourceVersion it has ever seen.
        self._renders: dict[str, _Render] = {}
        self._memo: dict[ResourceKey, _Memo] = {}
        self._memo_writes = 0  # part of every reuse's generation: a memo entry replaced
        self._generation = generation
        self._reused: dict[str, _Reuse] = {}  # per app name (see "A pass that changed nothing")
        self._lock = threading.Lock()
        self._capabilities: tuple[float, Capabilities, str] | None = None
        self._exhausted: dict[str, _Exhausted] = {}  # per app spec: its last memory failure
        self._discovering = threading.Lock()  # one refresh of the capabilities at a time

    # -- stages ----------------------------------------------------------------------

    def rules(self, app: Application, system: SystemSettings | None = None) -> RuleSet:
        """The app's ignore rules, with the system-level ones of ``argocd-cm``."""
        system = self.system() if system is None else system
        rules = compile_rules(app.ignore_differences, builtin=self.builtin_rules,
                              jq_timeout=self.jq_timeout, where=f"Application {app.name}",
                              system=system.diff)
        with self._lock:
            changed = self._warned.get(app.name, ()) != rules.warnings
            self._warned[app.name] = rules.warnings
        for warning in rules.warnings if changed else ():
            log.warning("ignore_rule_warning", app=app.name, warning=warning)
        return rules

    def desired(self, app: Application, *, revision: str | None = None,
                local: Path | None = None) -> tuple[str, list[DesiredObject]]:
        """The commit SHA and git's objects for ``app``, tracking id included.

        What the render tolerated (:mod:`gitops_ray.render.notes`) is in
        :meth:`render_problems` afterwards.

        Cached per source spec: a known SHA costs nothing, and a new commit that leaves
        what a plain-directory app's render reads untouched (see
        :func:`gitops_ray.render.input_digest`) reuses its render, so a one-line commit
        re-renders one app, not every app in the repo. A change of the cluster's APIs
        re-renders every chart (only a Helm render asks for them: checking a plain
        directory's render asks the API server nothing); a change of its pod-shape
        ConfigMaps, every app.
        """
        cluster = self._shapes()
        if local is not None:
            rendered = self._render(app, local, "local", None, cluster)
            with self._lock:
                self._renders["local:" + app.name] = rendered
            return "local", rendered.objects
        spec = _spec_key(app)
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
            if cached is not None and self._untouched(app, cached, checkout.sha):
                cached = dataclasses.replace(cached, sha=checkout.sha)  # nothing read
            else:
                found = render_inputs(app, checkout.root, cluster=cluster)
                inputs = found.digest if found is not None else None
                if cached is not None and inputs is not None and inputs == cached.inputs:
                    cached = dataclasses.replace(cached, sha=checkout.sha)  # app untouched
                else:
                    cached = self._render(app, checkout.root, checkout.sha, inputs, cluster)
                cached = dataclasses.replace(cached, scope=found.scope if found else None)
            with self._lock:
                self._renders[spec] = cached
        return cached.sha, cached.objects

    def _desired_sources(self, app: Application, spec: str, cached: _Render | None,
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
                        cluster: ClusterShapes) -> _Render:
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
        return _Render(joined, None, list(merged.values()), tuple(problems),
                       next((p.facts for p in parts if p.facts), ""), cluster.version,
                       next((p.shapes for p in parts if p.shapes), ""),
                       hooks=tuple(h for part in parts for h in part.hooks))

    def _untouched(self, app: Application, cached: _Render, sha: str) -> bool:
        """Whether git says commit ``sha`` changed nothing where ``cached``'s inputs live."""
        if cached.scope is None or cached.inputs is None or app.source.chart:
            return False
        changed = self.source.changed_paths(app.source.repo_url, cached.sha, sha)
        return changed is not None and not touches(changed, cached.scope)

    def hooks(self, app: Application, *, revision: str | None = None
              ) -> tuple[str, tuple[DesiredObject, ...]]:
        """The commit SHA and git's resource hooks for ``app`` (:mod:`gitops_ray.sync.hooks`).

        Rendered as :meth:`desired` renders (cached by commit); for the ``PostDelete``
        hooks of an app being deleted, which nothing compares.
        """
        sha, _ = self.desired(app, revision=revision)
        rendered = self._last_render(app, False)
        return sha, rendered.hooks if rendered is not None else ()

    def render_problems(self, app: Application, *, local: bool = False) -> tuple[str, ...]:
        """What the last render of ``app`` tolerated (see :mod:`gitops_ray.render.notes`)."""
        cached = self._last_render(app, local)
        return cached.problems if cached is not None else ()

    def _last_render(self, app: Application, local: bool) -> _Render | None:
        key = "local:" + app.name if local else _spec_key(app)
        with self._lock:
            return self._renders.get(key)

    def _render(self, app: Application, root: Path, sha: str, inputs: str | None,
                cluster: ClusterShapes, *, refs: Mapping[str, Path] | None = None) -> _Render:
        """The render of ``app`` at ``sha``, or its last memory failure at ``sha``.

        A render that ran out of memory (or time) is not tried again at the same commit
        before its backoff (:data:`EXHAUSTED_BACKOFF`) ends: the error is raised again,
        so every watch event does not start another child.
        """
        spec, now = _spec_key(app), time.monotonic()
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
                  ) -> _Render:
        asked = _AskedFacts(self._cluster_facts)
        with collecting() as problems:
            rendered = render_app(app, root, helm_bin=self.tools.helm_bin,
                                  kubectl_bin=self.tools.kubectl_bin, cluster_facts=asked,
                                  is_namespaced=self._namespaced, cluster_shapes=cluster,
                                  value_file_hosts=self.tools.value_file_hosts, refs=refs)
        resources, hooks = split_hooks(rendered)
        objects = [DesiredObject.of(with_tracking(app.name, obj)) for obj in resources]
        shapes = cluster.version if cluster_concerns(cluster, rendered) else ""
        return _Render(sha, inputs, objects, tuple(problems), asked.digest, cluster.version,
                       shapes, hooks=tuple(DesiredObject.of(with_tracking(app.name, obj))
                                           for obj in hooks))

    def _facts_hold(self, cached: _Render, cluster: ClusterShapes) -> bool:
        """Whether ``cached`` was rendered with the pod shapes and (a chart) APIs of now.

        A render that did not ask for the cluster's APIs (not a chart) does not depend on
        them, so checking it asks the API server nothing.
        """
        return cached.cluster == cluster.version and \
            (not cached.facts or cached.facts == self._cluster_facts()[1])

    def capabilities(self) -> Capabilities:
        return self._cluster_facts()[0]

    def _cluster_facts(self) -> tuple[Capabilities, str]:
        """The target cluster's version and APIs for Helm, and their digest.

        A chart that tests ``.Capabilities.APIVersions.Has "ray.io/v1"`` renders as it
        does under Argo CD, which passes the destination cluster's APIs; a CRD installed
        later is seen within :data:`CAPABILITIES_TTL`.

        One refresh at a time: the workers that find the facts due while another one
        refreshes them go on with the last ones (all of them asked the API server at
        once before, 8 x 3 discovery requests in the cycle that found them due).
        """
        cached = self._facts_if_fresh()
        if cached is not None:
            return cached[1], cached[2]
        last = self._capabilities
        if last is not None and not self._discovering.acquire(blocking=False):
            return last[1], last[2]
        if last is None:
            self._discovering.acquire()  # the first facts: wait for whoever asks
        try:
            return self._refresh_facts()
        finally:
            self._discovering.release()

    def _facts_if_fresh(self) -> tuple[float, Capabilities, str] | None:
        with self._lock:
            cached = self._capabilities
        return cached if cached is not None and \
            time.monotonic() - cached[0] < CAPABILITIES_TTL else None

    def _refresh_facts(self) -> tuple[Capabilities, str]:
        """Ask the API server (unless a refresh just finished); the last facts if it fails."""
        cached = self._facts_if_fresh()
        if cached is not None:
            return cached[1], cached[2]
        last, now = self._capabilities, time.monotonic()
        try:
            found = self.kube.capabilities()
        except KubeError as e:
            if last is not None:
                return last[1], last[2]
            raise DiffError(f"cannot read the cluster's version and APIs: {e}") from e
        entry = (now, found, _digest(dataclasses.asdict(found)))
        with self._lock:
            self._capabilities = entry
        return found, entry[2]

    def _namespaced(self, api_version: str, kind: str) -> bool | None:
        try:
            return self.kube.resource(api_version, kind).namespaced
        except UnknownKind:
            return None

    def compare(self, app: Application, *, revision: str | None = None,
                local: Path | None = None,
                landed: Mapping[ResourceKey, Landed] | None = None,
                untouched: frozenset[ResourceKey] = frozenset(),
                inventory: Sequence[InventoryEntry] | None = None) -> Comparison:
        """Render and diff one app against the cluster, under its AppProject's rules.

        An app its project does not allow is not rendered (Argo CD does not fetch its
        repository either): sync status Unknown, and the conditions say why.
        ``landed``: the apply responses of the sync just done; ``untouched``: the objects
        that sync did not write, whose last verdict still holds (see the module docstring);
        ``inventory``: the inventory that sync ended with, not recorded yet
        (:attr:`~gitops_ray.sync.engine.SyncResult.inventory`).
        """
        project, conditions = self._project(app, local is not None)
        if stops_sync(conditions):
            return Comparison(app, "", [], AppDiff(unknown=True), None, list(app.warnings),
                              conditions=conditions)
        sha, desired = self.desired(app, revision=revision, local=local)
        system = self.system()
        inputs = (app, sha, desired, system, project, conditions,
                  self.clusters(app.destination), self._last_render(app, False))
        generation = self._generation_now()
        reusable = local is None and not landed and not untouched  # a plain refresh
        last = self._last_reuse(app.name) if reusable else None
        if last is not None and generation[0] is not None and \
                last.generation == generation and last.inputs == inputs:
            return last.comparison  # nothing it was made of changed: not even looked at
        rules = self.rules(app, system)
        rules_digest = _rules_digest(app, system)
        landed = landed or {}
        snapshot = self._snapshot([o for o in desired
                                   if o.key not in landed and o.key not in untouched])
        record = self.store.load(app.name, status=False)  # its inventory and applied marks
        if inventory is not None:
            record = dataclasses.replace(record, inventory=list(inventory))
        diffs, healths, settled, read = [], [], set(), dict(snapshot)
        applied: dict[ResourceKey, tuple[str, str]] = {}
        memos, proven = [], set()
        for obj in desired:
            memo = self._diff(obj, rules, obj.digest + rules_digest, system,
                              landed=landed.get(obj.key), snapshot=snapshot,
                              untouched=obj.key in untouched, read=read,
                              marks=record.applied)
            if memo.proven and _marked(record.applied, obj.key, memo.version):
                memo = self._swap(obj.key, memo, dataclasses.replace(memo, proven=False))
            memos.append(memo)
            diffs.append(memo.diff)
            healths.append(memo.health)
            if memo.settled:
                settled.add(obj.key)
            if memo.written:
                applied[obj.key] = memo.version
            if memo.proven:
                proven.add(obj.key)
        extraneous = self._extraneous(app, record, {o.key for o in desired}, project)
        if last is not None and not extraneous and last.inputs == inputs and \
                _same(memos, last.memos):
            self._keep_reuse(app.name, dataclasses.replace(last, generation=generation),
                             desired)
            return last.comparison  # each verdict is the one it was made of
        for live in extraneous:
            diffs.append(compare(desired=None, predicted=None, live=live, rules=rules))
        forbidden = self._forbidden(app, project, desired)
        app_diff = AppDiff(resources=_mark_forbidden(diffs, forbidden))
        rendered = self._last_render(app, local is not None)
        problems = rendered.problems if rendered is not None else ()
        rollouts = tuple(f"{obj.key}: {pending_part(h.message)}"
                         for obj, h in zip(desired, healths, strict=True)
                         if h is not None and pending_part(h.message))
        shared = {o.key: m.shared for o, m in zip(desired, memos, strict=True) if m.shared}
        said = [shared_message(key, app.name, other) for key, other in shared.items()]
        warnings = [*app.warnings, *rules.warnings, *system.warnings, *app_diff.warnings,
                    *said]
        conditions += tuple(AppCondition(ConditionType.SHARED_RESOURCE, m) for m in said)
        comparison = Comparison(app, sha, desired, app_diff, aggregate(healths),
                                warnings + list(problems),
                                problems, rendered.shapes if rendered is not None else "",
                                rollouts, conditions, project, forbidden,
                                {o.key: h for o, h in zip(desired, healths, strict=True)
                                 if h is not None},
                                read,
                                frozenset(settled), applied, frozenset(proven), shared,
                                rendered.hooks if rendered is not None else (),
                                impacts_of(app_diff.resources, self._impact_reads(read, landed)))
        if reusable and not extraneous and not read:
            self._keep_reuse(app.name, _Reuse(inputs, generation, tuple(memos), comparison),
                             desired)
        return comparison

    def _generation_now(self) -> tuple[int | None, int]:
        """(watch events heard, memo writes) now; see "A pass that changed nothing"."""
        heard = self._generation() if self._generation is not None else None
        with self._lock:
            return heard, self._memo_writes

    def _last_reuse(self, name: str) -> _Reuse | None:
        with self._lock:
            return self._reused.get(name)

    def _keep_reuse(self, name: str, reuse: _Reuse, desired: list[DesiredObject]) -> None:
        """Keep ``reuse`` if every verdict in it is the memo's own entry (module doc)."""
        with self._lock:
            if all(self._memo.get(o.key) is m for o, m in zip(desired, reuse.memos,
                                                                strict=True)):
                self._reused[name] = reuse
            else:
                self._reused.pop(name, None)

    def prepare_standby(self, app: Application, *, revision: str,
                        thorough: bool = False) -> tuple[int, int]:
        """Render ``app`` and work out the verdicts git did not change: a standby pass.

        For another replica's app whose successor this replica is
        (:mod:`gitops_ray.runtime.shards`): a takeover's first comparison then finds git's
        objects rendered and the verdicts of the unchanged ones remembered, so it
        normalises and dry-runs only what the latest commit changed. Writes nothing. An
        object the record's applied marks do not name with this content is left to the
        owner, unread: a commit changed it (the owner dry-runs it anyway), or it has no
        mark (the owner may be creating it right now: a cold sync's marks are written at
        its end; a Secret is never marked). One whose content is marked but whose live
        version moved since (the autoscaler wrote it) costs a dry run here, once per live
        version. Reads go through the live source (the watch cache, in the controller).
        The verdicts are the ones :meth:`compare` would reach (the same memo, the same
        inputs). Returns how many objects' verdicts are known and how many are left.
        ``thorough``: the owner has gone silent (:mod:`gitops_ray.runtime.shards`), so
        nobody else is dry-running or creating these objects: every verdict is worked out,
        a commit's changes and unmarked objects too, and none is left.
        """
        _, desired = self.desired(app, revision=revision)
        system = self.system()
        rules = self.rules(app, system)
        rules_digest = _rules_digest(app, system)
        marks = self.store.load(app.name, status=False).applied
        known = 0
        for obj in desired:
            try:
                self._diff(obj, rules, obj.digest + rules_digest, system, marks=marks,
                           standby=not thorough)
            except _LeftToOwner:
                continue
            known += 1
        return known, len(desired) - known

    def project(self, app: Application) -> Project | None:
        """The app's AppProject (``None``: projects are not enforced, or it is unreadable)."""
        return self._project(app, False)[0]

    def refuses(self, app: Application) -> bool:
        """Whether the app's project (or destination) stops it before its source is read.

        The controller asks before resolving the revision, so a repository, Helm index or
        registry the AppProject's ``sourceRepos`` does not allow is never contacted.
        """
        return bool(stops_sync(self._project(app, False)[1]))

    def _project(self, app: Application, local: bool
                 ) -> tuple[Project | None, tuple[AppCondition, ...]]:
        """The app's AppProject and its conditions (none when projects are not enforced)."""
        if self.projects is None:
            return None, cluster_conditions(app, self.clusters)
        return load(app, self.projects, check_source=not local, resolve=self.clusters)

    def cluster_of(self, app: Application) -> Cluster:
        """The app's destination cluster (ours when it resolves to none: it is refused)."""
        cluster = self.clusters(app.destination)
        return IN_CLUSTER if isinstance(cluster, str) else cluster

    def _forbidden(self, app: Application, project: Project | None,
                   desired: list[DesiredObject]) -> dict[ResourceKey, str]:
        """Git's objects the project or the cluster's Secret forbids, with why for each."""
        cluster = self.clusters(app.destination)
        if isinstance(cluster, str):  # a destination that left since the check: no sync
            return {o.key: cluster for o in desired}
        if project is None and not cluster.namespaces:
            return {}
        return forbidden_resources(project, [
            (o.key, _or(self._namespaced(o.api_version, o.key.kind), bool(o.key.namespace)))
            for o in desired], cluster)

    def _diff(self, desired: DesiredObject, rules: RuleSet, content: str,
              system: SystemSettings = NO_SETTINGS, *, landed: Landed | None = None,
              snapshot: Mapping[ResourceKey, Manifest | None] | None = None,
              untouched: bool = False,
              read: dict[ResourceKey, Manifest | None] | None = None,
              marks: Mapping[str, str] | None = None, standby: bool = False) -> _Memo:
        """Diff and health of one object, or the last ones if nothing changed.

        Reused while its desired content, the app's ignore rules, the live
        ``resourceVersion`` and the Events and Pods health reads stay the same: no read,
        no dry run, no normalisation. When only the Events or Pods changed (a worker Pod
        started), health is assessed again and the diff is reused: no dry run. With the
        watch cache the versions are known without unpacking the live object, so a no-op
        pass unpacks nothing. ``landed``: the object as the sync's apply left it, live
        and prediction at once (the watch cache may not have seen that write yet, so its
        version is not asked). ``untouched``: the sync just done did not write it, so the
        last verdict for this content stands (see the module docstring). ``read``: where
        to leave the live object of an OutOfSync one, if it had to be read (not a synced
        one: at start-up that would hold an app's objects decoded for its whole
        comparison). ``marks``: the record's applied
        marks: live as our apply of this content left it needs no dry run (it would
        predict live itself). ``standby``: raise :class:`_LeftToOwner` instead of
        dry-running an object whose content our last apply did not write
        (:meth:`prepare_standby`).
        """
        if untouched and landed is None:
            with self._lock:
                last = self._memo.get(desired.key)
            if last is not None and last.version[0] == content:
                return last
        known = self._live_version(*desired.coordinates) if landed is None else None
        if known is not None and (self._events.cached or not _reads_events(desired.key)):
            hit = self._recall(desired.key, (content, known))
            if hit is not None and hit.signals == self._signals(desired.key, (), ()):
                return hit if hit.written else self._marked_since(hit, desired.key, marks)
        if standby and not _marked_content(marks, desired.key, content):
            raise _LeftToOwner  # before reading it: the owner reads it anyway
        obj = desired.manifest()
        live = self._live_of(desired, landed, snapshot or {})
        fresh = landed is not None and landed.created and not self._events.cached
        events = () if fresh else self._events_about(desired.key, live)
        pods = () if fresh else self._pods_of(desired.key, live)
        workloads = self._workloads_of(live)
        live_version = str((live or {}).get("metadata", {}).get("resourceVersion", ""))
        version, signals = (content, live_version), self._signals(desired.key, events, pods)
        if live is not None and waits_for_admission(live):
            signals += "|workloads:" + workloads_token(workloads)
        written = landed is not None
        hit = self._recall(desired.key, version)
        if hit is not None and hit.signals == signals and hit.written >= written:
            return hit if hit.written else self._marked_since(hit, desired.key, marks)
        proven = False
        if hit is not None:  # only Events or Pods changed: health again, never a dry run
            result, written, proven = hit.diff, written or hit.written, hit.proven
        else:
            written = written or (live is not None and _marked(marks, desired.key, version))
            predicted = landed.live if landed is not None else live if written else None
            refused: tuple[Refusal, ...] = ()
            if predicted is None and live is not None:
                try:
                    predicted, proven, live = self._predict(obj, live, rules)
                except _Refused as e:  # the API server's rules: a two-way diff shows it
                    refused = e.refusals
                version = (content, str(live["metadata"].get("resourceVersion", "")))
                predicted, written = live if proven else predicted, proven
            result = with_refusals(compare(desired=obj, predicted=predicted, live=live,
                                           rules=rules),
                                   refused + operator_refusals(obj, live))
        if read is not None and landed is None and result.out_of_sync:
            read[desired.key] = live  # for the sync that may follow; only what it applies
        health = assess(live, events=events, pods=pods, custom=system.health,
                        workloads=workloads)
        # A Synced diff is remembered without its normalized copies: only the verdict is
        # reused, and at 1,000 RayClusters two extra copies of each are ~100s of MB.
        slim = result if result.out_of_sync else dataclasses.replace(
            result, desired_normalized=None, live_normalized=None)
        kept = _Memo(version, signals, slim, health, written, proven, shared_with(obj, live))
        with self._lock:
            self._memo[desired.key] = kept
            self._memo_writes += 1
        return kept if slim is result else dataclasses.replace(kept, diff=result)

    def _marked_since(self, hit: _Memo, key: ResourceKey, marks: Mapping[str, str] | None
                      ) -> _Memo:
        """``hit``, known to be what our apply left if the record's marks now say so.

        A verdict reached by a dry run (say while another replica was still syncing the
        app and had not written its marks yet) stays valid while the versions do; but
        without this, the object would never count as settled, and a takeover or the
        next commit would re-apply all of them.
        """
        if not _marked(marks, key, hit.version):
            return hit
        return self._swap(key, hit, dataclasses.replace(hit, written=True))

    def _swap(self, key: ResourceKey, old: _Memo, new: _Memo) -> _Memo:
        """``new`` in the memo in place of ``old``, unless another pass replaced it first."""
        with self._lock:
            if self._memo.get(key) is old:
                self._memo[key] = new
                self._memo_writes += 1
        return new

    def _live_of(self, desired: DesiredObject, landed: Landed | None,
                 snapshot: Mapping[ResourceKey, Manifest | None]) -> Manifest | None:
        if landed is not None:
            return landed.live
        if desired.key in snapshot:
            return snapshot[desired.key]
        return self._live(*desired.coordinates)

    def _snapshot(self, desired: Iterable[DesiredObject]) -> dict[ResourceKey, Manifest | None]:
        """Live objects of ``desired`` read by LIST, per kind and namespace (see module doc).

        Only without a cached live source, only for groups of :data:`LIST_AT_LEAST` or
        more; a group whose LIST is refused or too long is left out (GETs answer it).
        """
        if not self._listing:
            return {}
        groups: dict[tuple[str, str, str], list[DesiredObject]] = {}
        for obj in desired:
            groups.setdefault((obj.api_version, obj.key.kind, obj.key.namespace), []
                              ).append(obj)
        out: dict[ResourceKey, Manifest | None] = {}
        for (api_version, kind, namespace), members in groups.items():
            if len(members) >= LIST_AT_LEAST:
                out.update(self._listed(api_version, kind, namespace, members))
        return out

    def _listed(self, api_version: str, kind: str, namespace: str,
                members: list[DesiredObject]) -> dict[ResourceKey, Manifest | None]:
        """``members`` as one LIST finds them (absent: None); ``{}`` when it cannot tell."""
        bound, found = max(LIST_BOUND, 4 * len(members)), {}
        try:
            seen = 0
            for page, _ in self.kube.list_pages(api_version, kind, namespace or None):
                seen += len(page)
                if seen > bound:
                    return {}
                found.update({str(o["metadata"]["name"]): o for o in page})
        except UnknownKind:
            return {o.key: None for o in members}  # as a GET says: no such kind, no object
        except KubeError:
            return {}  # e.g. RBAC allows GET but not LIST
        return {o.key: found.get(o.key.name) for o in members}

    def _signals(self, key: ResourceKey, events: Sequence[Manifest],
                 pods: Sequence[Manifest]) -> str:
        """The part of the memo key for what health reads besides the object itself.

        A cached source answers from its index (nothing unpacked); otherwise it is
        derived from the Events and Pods just read.
        """
        if not _reads_events(key):
            return ""
        if self._events.cached:
            return self._events.signals(key.namespace, key.name)
        return f"{events_token(events)}|{pods_token(pods)}"

    def _events_about(self, key: ResourceKey, live: Manifest | None) -> Sequence[Manifest]:
        """The Events a RayCluster's health reads (none for other kinds)."""
        if not _reads_events(key):
            return ()
        if not self._events.cached and (live is None or not awaits_operator(live)):
            return ()
        return self._events.about(key.namespace, key.name)

    def _workloads_of(self, live: Manifest | None) -> Sequence[Manifest]:
        """Kueue's Workloads beside a queued object waiting for admission (none for others).

        Read on every pass while it waits: its memo's signals then carry them
        (:func:`workloads_token`), so Kueue's changing reason is seen and a pass that
        reuses nothing else still reads them; once admitted, nothing is read.
        """
        if live is None or not waits_for_admission(live):
            return ()
        return workloads_in(self.kube, str(live["metadata"].get("namespace") or ""))

    def _pods_of(self, key: ResourceKey, live: Manifest | None) -> Sequence[Manifest]:
        """A RayCluster's Pods, for a rollout the operator has not made (none for others)."""
        if not _reads_events(key) or (not self._events.cached and live is None):
            return ()
        return self._events.pods(key.namespace, key.name)

    def _impact_reads(self, read: Mapping[ResourceKey, Manifest | None],
                      landed: Mapping[ResourceKey, Landed]) -> ImpactReads:
        """How :func:`~gitops_ray.reconcile.impacts.impacts_of` reads live Ray objects.

        A changed object's whole live object (read by this pass if it was) and its Pods.
        """
        def live(key: ResourceKey, api_version: str) -> Manifest | None:
            if key in landed:
                return landed[key].live
            if key in read:
                return read[key]
            return self._live(api_version, key.kind, key.namespace, key.name)
        return ImpactReads(live, self._events.pods)

    def _recall(self, key: ResourceKey, version: tuple[str, str]) -> _Memo | None:
        with self._lock:
            memo = self._memo.get(key)
        return memo if memo is not None and memo.version == version else None

    # -- cluster reads ---------------------------------------------------------------

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
        try:
            return self.kube.get(api_version, kind, name=name, namespace=namespace or None)
        except UnknownKind:
            return None

    def _extraneous(self, app: Application, record: AppRecord, wanted: set[ResourceKey],
                    project: Project | None = None) -> list[Manifest]:
        """Live objects in the app's inventory, tracked by it, that git no longer has.

        Not those its project forbids: Argo CD leaves them out of the live state.
        """
        out = []
        for entry in record.inventory:
            if entry.key in wanted or (project is not None and not live_permitted(
                    project, entry.key, self.cluster_of(app))):
                continue
            live = self._live(entry.api_version, entry.kind, entry.namespace, entry.name)
            if live is not None and is_tracked_by(app.name, live):
                out.append(live)
        return out

    def _predict(self, obj: Manifest, live: Manifest, rules: RuleSet
                 ) -> tuple[Manifest | None, bool, Manifest]:
        """Server-side dry run of what sync would write; a no-op?; the live it predicted on.

        Not cached on its own: it only runs when the per-object diff memo missed, which
        is keyed by the same live ``resourceVersion``. An object kubectl or Argo CD
        applied shows what sync's takeover will remove (:mod:`gitops_ray.sync.takeover`).
        A no-op (module doc, "Proven by a dry run"): the API server answers with live
        itself, ``managedFields`` and all, and there is nothing for a takeover to remove.
        The dry run carries live's ``resourceVersion``: a prediction made on a newer
        object than the one it is compared with (another writer, Kueue say, wrote in
        between) would show that writer's change as drift, so a 409 reads the object
        again and predicts on that (a few times at most).
        """
        for _ in range(PREDICT_ATTEMPTS):
            body = prepare(obj, live, rules)
            try:
                raw = self.kube.apply(body, field_manager=FIELD_MANAGER, force=True,
                                      dry_run=True)
            except Conflict:
                fresh = self._get(*_coordinates(live))
                if fresh is None:
                    break
                live = fresh
                continue
            except Invalid as e:  # a rule of the CRD (CEL) or the type refuses the change
                raise _Refused(server_refusals(ResourceKey.of(obj), e.details, str(e))) from e
            except KubeError as e:
                raise DiffError(f"{ResourceKey.of(obj)}: server-side dry run failed: {e}") \
                    from e
            predicted = predicted_after_takeover(raw, body=body, live=live)
            return predicted, predicted is raw and json_equal(raw, live), live
        raise DiffError(f"{ResourceKey.of(obj)}: server-side dry run failed: the object "
                        f"kept changing ({PREDICT_ATTEMPTS} attempts)")


def _coordinates(obj: Manifest) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return (str(obj["apiVersion"]), str(obj["kind"]), str(meta.get("namespace") or ""),
            str(meta["name"]))


class _AskedFacts:
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


def _same(memos: Sequence[_Memo], last: Sequence[_Memo]) -> bool:
    return len(memos) == len(last) and all(a is b for a, b in zip(memos, last, strict=True))


def _mark_forbidden(diffs: list[ResourceDiff], forbidden: dict[ResourceKey, str]
                    ) -> list[ResourceDiff]:
    """Argo CD shows a resource its project forbids as Unknown; the reason says which rule."""
    return [dataclasses.replace(d, status=SyncStatus.UNKNOWN, reason=forbidden[d.key])
            if d.key in forbidden else d for d in diffs]


def _marked(marks: Mapping[str, str] | None, key: ResourceKey,
            version: tuple[str, str]) -> bool:
    """Whether the record says our apply of this content left this live version.

    The version is compared first: a stale mark costs no digest.
    """
    if not marks or not version[1] or not markable(key):
        return False
    mark = marks.get(str(key))
    return mark is not None and mark.partition("/")[0] == version[1] and \
        mark == applied_mark(*version)


def _marked_content(marks: Mapping[str, str] | None, key: ResourceKey, content: str) -> bool:
    """Whether the record marks this content of ``key`` as the one we last applied.

    Whatever live version that apply left: if live moved since, someone else wrote it.
    """
    mark = (marks or {}).get(str(key))
    return mark is not None and mark.partition("/")[2] == \
        applied_mark(content, "").partition("/")[2]


def _or(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def _reads_events(key: ResourceKey) -> bool:
    return key.kind == "RayCluster" and key.group == "ray.io"


def _spec_key(app: Application) -> str:
    return repr(app.all_sources) + app.destination.namespace + app.name


def _unknown_version(api_version: str, kind: str, namespace: str, name: str) -> None:
    return None


_KNOWN: weakref.WeakValueDictionary[str, DesiredObject] = weakref.WeakValueDictionary()
_KNOWN_LOCK = threading.Lock()


class _Refused(Exception):
    """A dry run the API server refused (422): what it refused, for the diff to say."""

    def __init__(self, refusals: tuple[Refusal, ...]) -> None:
        super().__init__()
        self.refusals = refusals


class _LeftToOwner(Exception):
    """A verdict :meth:`Pipeline.prepare_standby` leaves to the owner (see there)."""


def _rules_digest(app: Application, system: SystemSettings) -> str:
    """What of the app's and Argo CD's ignore rules a remembered verdict depends on."""
    return _digest(app.ignore_differences) + system.digest


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


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
