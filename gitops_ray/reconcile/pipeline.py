"""One pass of the pipeline for one app: source → render → predict → diff → health.

The stages are pure or nearly so; this module is where they meet the cluster. It keeps
two caches that make repeated passes cheap, which is what the controller relies on:

* renders are cached per source spec and commit, keyed by the cluster's facts too
  (:mod:`~gitops_ray.reconcile.desired`, :mod:`~gitops_ray.reconcile.facts`);
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
:class:`~gitops_ray.reconcile.live.LiveSource` (plain GETs for the CLI, the watch cache in
the controller), with a :class:`~gitops_ray.reconcile.live.LiveVersion` that lets the watch
cache answer a no-op pass from versions alone.

**Where the parts live** (split in issue 35): :mod:`~gitops_ray.reconcile.live` the live
reads, :mod:`~gitops_ray.reconcile.desired` git's objects and the render cache,
:mod:`~gitops_ray.reconcile.facts` the cluster's facts, :mod:`~gitops_ray.reconcile.memo`
the memo, :mod:`~gitops_ray.reconcile.comparison` the result, and
:mod:`gitops_ray.sync.dryrun` the apply preparation a prediction dry-runs. This module
is where they meet: :class:`Pipeline`; the names the rest of the program uses from it
are importable from here.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import structlog

from gitops_ray.diff import AppDiff, ResourceDiff, RuleSet, compare, compile_rules
from gitops_ray.diff.refusals import Refusal, operator_refusals, with_refusals
from gitops_ray.diff.rules import JQ_TIMEOUT
from gitops_ray.health import Health, aggregate, assess, pending_part
from gitops_ray.kube import Capabilities, Kube
from gitops_ray.reconcile.argocdcm import NO_SETTINGS, SystemSettings
from gitops_ray.reconcile.comparison import Comparison
from gitops_ray.reconcile.desired import DesiredObject, Renders
from gitops_ray.reconcile.facts import (
    Discovery,
    ShapesSource,
    SystemSource,
    configmap_shapes,
    digest,
)
from gitops_ray.reconcile.impacts import impacts_of
from gitops_ray.reconcile.live import EventSource, LiveReads, LiveSource, LiveVersion, reads_events
from gitops_ray.reconcile.memo import Generation, Memo, Memos, Reuse, marked, marked_content, same
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
from gitops_ray.render.apps import Application
from gitops_ray.render.shapes import ClusterShapes
from gitops_ray.render.tools import RenderTools
from gitops_ray.source import GitSource
from gitops_ray.sync.dryrun import Refused, predict
from gitops_ray.sync.records import AppRecord, InventoryEntry, RecordStore
from gitops_ray.sync.request import Landed
from gitops_ray.sync.tracking import is_tracked_by, shared_message, shared_with
from gitops_ray.types import AppCondition, ConditionType, Manifest, ResourceKey, SyncStatus

__all__ = ["Comparison", "DesiredObject", "EventSource", "Generation", "LiveSource",
           "LiveVersion", "Pipeline", "ShapesSource", "SystemSource",
           "configmap_shapes"]

log = structlog.get_logger(__name__)

_TOOLS = RenderTools()


@dataclass(frozen=True)
class _Pass:
    """What one :meth:`Pipeline.compare` works with, once its inputs are known."""

    app: Application
    sha: str
    desired: list[DesiredObject]
    system: SystemSettings
    project: Project | None
    conditions: tuple[AppCondition, ...]
    rules: RuleSet
    landed: Mapping[ResourceKey, Landed]
    local: bool


@dataclass
class _Verdicts:
    """Each of git's objects' memo entry in one pass, and what the pass read."""

    read: dict[ResourceKey, Manifest | None]
    memos: list[Memo] = field(default_factory=list)
    settled: set[ResourceKey] = field(default_factory=set)
    applied: dict[ResourceKey, tuple[str, str]] = field(default_factory=dict)
    proven: set[ResourceKey] = field(default_factory=set)

    def add(self, key: ResourceKey, memo: Memo) -> None:
        self.memos.append(memo)
        if memo.settled:
            self.settled.add(key)
        if memo.written:
            self.applied[key] = memo.version
        if memo.proven:
            self.proven.add(key)


class _Verdict(NamedTuple):
    """A new verdict on one object, and the live object (and version) it was reached on."""

    diff: ResourceDiff
    version: tuple[str, str]
    live: Manifest | None
    written: bool
    proven: bool


class Pipeline:
    """Runs source → render → diff for apps against one cluster."""

    def __init__(self, kube: Kube, source: GitSource, store: RecordStore, *,
                 tools: RenderTools = _TOOLS, builtin_rules: bool = True,
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
        self._facts = Discovery(kube)
        self._renders = Renders(source, tools, self._facts, shapes or ClusterShapes)
        self._live = LiveReads(kube, live, live_version, events)
        self._memos = Memos(generation)
        self.projects = projects  # None: no AppProject rules (git-only, no Argo CD)
        self.clusters = clusters  # destination clusters (reconcile.project.ResolveCluster)
        self.system: SystemSource = system or (lambda: NO_SETTINGS)
        self._warned: dict[str, tuple[str, ...]] = {}  # app -> rule warnings last logged
        self._compiled: dict[str, tuple[tuple[object, ...], RuleSet]] = {}  # app -> rules
        self._lock = threading.Lock()

    # -- stages ----------------------------------------------------------------------

    def rules(self, app: Application, system: SystemSettings | None = None) -> RuleSet:
        """The app's ignore rules, with the system-level ones of ``argocd-cm``.

        Compiled once per rule set: while the app's :class:`~gitops_ray.types.IgnoreRule` s
        and the ``argocd-cm`` settings stay the same, the comparison before a sync, the
        sync and the comparison after it share one :class:`RuleSet` (it holds no
        per-object state). One entry per app: the latest only.
        """
        system = self.system() if system is None else system
        key = (app.ignore_differences, system.digest)
        with self._lock:
            kept = self._compiled.get(app.name)
        if kept is not None and kept[0] == key:
            return kept[1]
        rules = compile_rules(app.ignore_differences, builtin=self.builtin_rules,
                              jq_timeout=self.jq_timeout, where=f"Application {app.name}",
                              system=system.diff)
        with self._lock:
            self._compiled[app.name] = (key, rules)
            changed = self._warned.get(app.name, ()) != rules.warnings
            self._warned[app.name] = rules.warnings
        for warning in rules.warnings if changed else ():
            log.warning("ignore_rule_warning", app=app.name, warning=warning)
        return rules

    def forget(self, name: str) -> None:
        """Drop what this pipeline keeps for the deleted app ``name``.

        Its compiled rules, last rule warnings and reusable comparison; renders are
        keyed by the app's spec, not its name, and turn over with the render cache.
        """
        with self._lock:
            self._compiled.pop(name, None)
            self._warned.pop(name, None)
        self._memos.forget(name)

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
        return self._renders.desired(app, revision=revision, local=local)

    def hooks(self, app: Application, *, revision: str | None = None
              ) -> tuple[str, tuple[DesiredObject, ...]]:
        """The commit SHA and git's resource hooks for ``app`` (:mod:`gitops_ray.sync.hooks`).

        Rendered as :meth:`desired` renders (cached by commit); for the ``PostDelete``
        hooks of an app being deleted, which nothing compares.
        """
        sha, _ = self.desired(app, revision=revision)
        rendered = self._renders.last(app, False)
        return sha, rendered.hooks if rendered is not None else ()

    def render_problems(self, app: Application, *, local: bool = False) -> tuple[str, ...]:
        """What the last render of ``app`` tolerated (see :mod:`gitops_ray.render.notes`)."""
        cached = self._renders.last(app, local)
        return cached.problems if cached is not None else ()

    def capabilities(self) -> Capabilities:
        return self._facts.capabilities()

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
                  self.clusters(app.destination), self._renders.last(app, False))
        generation = self._memos.generation_now()
        reusable = local is None and not landed and not untouched  # a plain refresh
        last = self._memos.last_reuse(app.name) if reusable else None
        if last is not None and generation[0] is not None and \
                last.generation == generation and last.inputs == inputs:
            return last.comparison  # nothing it was made of changed: not even looked at
        run = _Pass(app, sha, desired, system, project, conditions, self.rules(app, system),
                    landed or {}, local is not None)
        record = self.store.load(app.name, status=False)  # its inventory and applied marks
        if inventory is not None:
            record = dataclasses.replace(record, inventory=list(inventory))
        verdicts = self._verdicts(run, untouched, record)
        extraneous = self._extraneous(app, record, {o.key for o in desired}, project)
        if last is not None and not extraneous and last.inputs == inputs and \
                same(verdicts.memos, last.memos):
            self._memos.keep_reuse(app.name, dataclasses.replace(last, generation=generation),
                                   desired)
            return last.comparison  # each verdict is the one it was made of
        comparison = self._assemble(run, verdicts, extraneous)
        if reusable and not extraneous and not verdicts.read:
            self._memos.keep_reuse(app.name, Reuse(inputs, generation, tuple(verdicts.memos),
                                                   comparison), desired)
        return comparison

    def _verdicts(self, run: _Pass, untouched: frozenset[ResourceKey],
                  record: AppRecord) -> _Verdicts:
        """Every one of git's objects' verdict, read by LIST where that is cheaper."""
        snapshot = self._live.snapshot([o for o in run.desired
                                        if o.key not in run.landed and o.key not in untouched])
        rules_digest = _rules_digest(run.app, run.system)
        found = _Verdicts(read=dict(snapshot))
        for obj in run.desired:
            memo = self._diff(obj, run.rules, obj.digest + rules_digest, run.system,
                              landed=run.landed.get(obj.key), snapshot=snapshot,
                              untouched=obj.key in untouched, read=found.read,
                              marks=record.applied)
            if memo.proven and marked(record.applied, obj.key, memo.version):
                memo = self._memos.swap(obj.key, memo, dataclasses.replace(memo, proven=False))
            found.add(obj.key, memo)
        return found

    def _assemble(self, run: _Pass, verdicts: _Verdicts, extraneous: list[Manifest]
                  ) -> Comparison:
        """The comparison of one pass from its verdicts and the objects git no longer has."""
        app, desired, memos = run.app, run.desired, verdicts.memos
        diffs = [m.diff for m in memos] + [
            compare(desired=None, predicted=None, live=live, rules=run.rules)
            for live in extraneous]
        forbidden = self._forbidden(app, run.project, desired)
        app_diff = AppDiff(resources=_mark_forbidden(diffs, forbidden))
        rendered = self._renders.last(app, run.local)
        problems = rendered.problems if rendered is not None else ()
        healths = [m.health for m in memos]
        shared = {o.key: m.shared for o, m in zip(desired, memos, strict=True) if m.shared}
        said = [shared_message(key, app.name, other) for key, other in shared.items()]
        warnings = [*app.warnings, *run.rules.warnings, *run.system.warnings,
                    *app_diff.warnings, *said, *problems]
        return Comparison(
            app, run.sha, desired, app_diff, aggregate(healths), warnings, problems,
            shapes=rendered.shapes if rendered is not None else "",
            rollouts=tuple(f"{o.key}: {pending_part(h.message)}"
                           for o, h in zip(desired, healths, strict=True)
                           if h is not None and pending_part(h.message)),
            conditions=run.conditions + tuple(
                AppCondition(ConditionType.SHARED_RESOURCE, m) for m in said),
            project=run.project, forbidden=forbidden,
            resource_health={o.key: h for o, h in zip(desired, healths, strict=True)
                             if h is not None},
            live=verdicts.read, settled=frozenset(verdicts.settled),
            applied=verdicts.applied, proven=frozenset(verdicts.proven), shared=shared,
            hooks=rendered.hooks if rendered is not None else (),
            impacts=impacts_of(app_diff.resources,
                               self._live.impact_reads(verdicts.read, run.landed)))

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
            (o.key, _or(self._facts.namespaced(o.api_version, o.key.kind),
                        bool(o.key.namespace)))
            for o in desired], cluster)

    def _diff(self, desired: DesiredObject, rules: RuleSet, content: str,
              system: SystemSettings = NO_SETTINGS, *, landed: Landed | None = None,
              snapshot: Mapping[ResourceKey, Manifest | None] | None = None,
              untouched: bool = False,
              read: dict[ResourceKey, Manifest | None] | None = None,
              marks: Mapping[str, str] | None = None, standby: bool = False) -> Memo:
        """Diff and health of one object, or the last ones if nothing changed.

        Reused while its desired content, the app's ignore rules, the live
        ``resourceVersion`` and the Events and Pods health reads stay the same: no read,
        no dry run, no normalisation (:meth:`_known`). When only the Events or Pods
        changed (a worker Pod started), health is assessed again and the diff is reused:
        no dry run. ``landed``: the object as the sync's apply left it, live and
        prediction at once. ``untouched``: the sync just done did not write it, so the
        last verdict for this content stands (see the module docstring). ``read``: where
        to leave the live object of an OutOfSync one, if it had to be read (not a synced
        one: at start-up that would hold an app's objects decoded for its whole
        comparison). ``marks``: the record's applied marks: live as our apply of this
        content left it needs no dry run (it would predict live itself). ``standby``:
        raise :class:`_LeftToOwner` instead of dry-running an object whose content our
        last apply did not write (:meth:`prepare_standby`).
        """
        known = self._known(desired, content, landed, untouched, marks)
        if known is not None:
            return known
        if standby and not marked_content(marks, desired.key, content):
            raise _LeftToOwner  # before reading it: the owner reads it anyway
        obj = desired.manifest()
        live = self._live.live_of(desired, landed, snapshot or {})
        reads = self._live.health_reads(desired.key, live, landed)
        version = (content, str((live or {}).get("metadata", {}).get("resourceVersion", "")))
        hit = self._memos.recall(desired.key, version)
        if hit is not None and hit.signals == reads.signals and hit.written >= (landed is not None):
            return hit if hit.written else self._marked_since(hit, desired.key, marks)
        if hit is not None:  # only Events or Pods changed: health again, never a dry run
            verdict = _Verdict(hit.diff, version, live, landed is not None or hit.written,
                               hit.proven)
        else:
            verdict = self._verdict(desired.key, obj, live, landed=landed, rules=rules,
                                    version=version, marks=marks)
        if read is not None and landed is None and verdict.diff.out_of_sync:
            read[desired.key] = verdict.live  # for the sync that may follow; only what it applies
        health = assess(verdict.live, events=reads.events, pods=reads.pods,
                        custom=system.health, workloads=reads.workloads)
        return self._keep(desired.key, verdict, reads.signals, health, obj)

    def _known(self, desired: DesiredObject, content: str, landed: Landed | None,
               untouched: bool, marks: Mapping[str, str] | None) -> Memo | None:
        """The remembered verdict, when it is known to hold without reading the object.

        With the watch cache the versions are known without unpacking the live object, so
        a no-op pass unpacks nothing (the watch cache may not have seen a sync's write
        yet, so a landed object's version is not asked).
        """
        if untouched and landed is None:
            last = self._memos.get(desired.key)
            if last is not None and last.version[0] == content:
                return last
        known = self._live.version(*desired.coordinates) if landed is None else None
        if known is not None and (self._live.events.cached or not reads_events(desired.key)):
            hit = self._memos.recall(desired.key, (content, known))
            if hit is not None and hit.signals == self._live.signals(desired.key, (), ()):
                return hit if hit.written else self._marked_since(hit, desired.key, marks)
        return None

    def _verdict(self, key: ResourceKey, obj: Manifest, live: Manifest | None, *,
                 landed: Landed | None, rules: RuleSet, version: tuple[str, str],
                 marks: Mapping[str, str] | None) -> _Verdict:
        """A new diff of ``obj``: against the sync's apply, live (marked), or a dry run."""
        written = landed is not None or (live is not None and marked(marks, key, version))
        predicted = landed.live if landed is not None else live if written else None
        refused: tuple[Refusal, ...] = ()
        proven = False
        if predicted is None and live is not None:
            try:
                predicted, proven, live = predict(self.kube, self._live.get, obj, live, rules)
            except Refused as e:  # the API server's rules: a two-way diff shows it
                refused = e.refusals
            version = (version[0], str(live["metadata"].get("resourceVersion", "")))
            predicted, written = live if proven else predicted, proven
        result = with_refusals(compare(desired=obj, predicted=predicted, live=live,
                                       rules=rules), refused + operator_refusals(obj, live))
        return _Verdict(result, version, live, written, proven)

    def _keep(self, key: ResourceKey, verdict: _Verdict, signals: str,
              health: Health | None, obj: Manifest) -> Memo:
        """Remember a verdict, and return it whole.

        A Synced one is remembered without its normalized copies: only the verdict is
        reused, and at 1,000 RayClusters two extra copies of each are ~100s of MB.
        """
        result = verdict.diff
        slim = result if result.out_of_sync else dataclasses.replace(
            result, desired_normalized=None, live_normalized=None)
        kept = Memo(verdict.version, signals, slim, health, verdict.written,
                    verdict.proven, shared_with(obj, verdict.live))
        self._memos.put(key, kept)
        return kept if slim is result else dataclasses.replace(kept, diff=result)

    def _marked_since(self, hit: Memo, key: ResourceKey, marks: Mapping[str, str] | None
                      ) -> Memo:
        """``hit``, known to be what our apply left if the record's marks now say so.

        A verdict reached by a dry run (say while another replica was still syncing the
        app and had not written its marks yet) stays valid while the versions do; but
        without this, the object would never count as settled, and a takeover or the
        next commit would re-apply all of them.
        """
        if not marked(marks, key, hit.version):
            return hit
        return self._memos.swap(key, hit, dataclasses.replace(hit, written=True))

    # -- cluster reads ---------------------------------------------------------------

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
            live = self._live.live(entry.api_version, entry.kind, entry.namespace, entry.name)
            if live is not None and is_tracked_by(app.name, live):
                out.append(live)
        return out


def _mark_forbidden(diffs: list[ResourceDiff], forbidden: dict[ResourceKey, str]
                    ) -> list[ResourceDiff]:
    """Argo CD shows a resource its project forbids as Unknown; the reason says which rule."""
    return [dataclasses.replace(d, status=SyncStatus.UNKNOWN, reason=forbidden[d.key])
            if d.key in forbidden else d for d in diffs]


def _or(value: bool | None, default: bool) -> bool:
    return default if value is None else value


class _LeftToOwner(Exception):
    """A verdict :meth:`Pipeline.prepare_standby` leaves to the owner (see there)."""


def _rules_digest(app: Application, system: SystemSettings) -> str:
    """What of the app's and Argo CD's ignore rules a remembered verdict depends on."""
    return digest([r.as_spec() for r in app.ignore_differences]) + system.digest
