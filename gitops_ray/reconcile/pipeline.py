"""One pass of the pipeline for one app: source → render → predict → diff → health.

The stages are pure or nearly so; this module is where they meet the cluster. It keeps
two caches that make repeated passes cheap, which is what the controller relies on:

* renders are cached per source spec: an unchanged revision is never re-rendered, and a
  commit that does not touch a plain-directory app's files reuses its render;
* per-object diffs (server-side dry run included) are cached by (desired content, ignore
  rules, live resourceVersion), as Argo CD caches server-side diffs: an unchanged pair
  costs no API request and no normalisation.

Live objects come from a :class:`LiveSource`: plain GETs for the CLI, the watch cache in
the controller.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff import AppDiff, ResourceDiff, RuleSet, compare, compile_rules
from gitops_ray.errors import DiffError, SourceError
from gitops_ray.health import Health, aggregate, assess
from gitops_ray.kube import Kube, KubeError, UnknownKind
from gitops_ray.render import render_app
from gitops_ray.render.apps import Application
from gitops_ray.safepath import safe_path
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import prepare
from gitops_ray.sync.records import InventoryEntry, RecordStore
from gitops_ray.sync.tracking import is_tracked_by, with_tracking
from gitops_ray.types import Manifest, ResourceKey

LiveSource = Callable[[str, str, str, str], "Manifest | None"]
"""(apiVersion, kind, namespace, name) -> live object or None."""


@dataclass
class Comparison:
    """The state of one app after a pass: what git wants, what is live, how they differ."""

    app: Application
    revision: str
    desired: list[Manifest]
    diff: AppDiff
    live: dict[ResourceKey, Manifest] = field(default_factory=dict)
    health: Health | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def out_of_sync(self) -> frozenset[ResourceKey]:
        return frozenset(r.key for r in self.diff.resources if r.status == "OutOfSync")


@dataclass(frozen=True)
class RenderTools:
    """External tools and cluster facts the render stage needs."""

    helm_bin: str = "helm"
    kubectl_bin: str = "kubectl"
    kube_version: str = "1.36.3"


class Pipeline:
    """Runs source → render → diff for apps against one cluster."""

    def __init__(self, kube: Kube, source: GitSource, store: RecordStore, *,
                 tools: RenderTools = RenderTools(), builtin_rules: bool = True,
                 jq_timeout: float = 1.0, live: LiveSource | None = None) -> None:
        self.kube = kube
        self.source = source
        self.store = store
        self.tools = tools
        self.builtin_rules = builtin_rules
        self.jq_timeout = jq_timeout
        self._live = live or self._get
        # Latest entry per app spec / per object only: a long-running controller must not
        # grow with every commit or every resourceVersion it has ever seen.
        self._renders: dict[str, tuple[str, list[Manifest]]] = {}
        self._inputs: dict[str, str | None] = {}
        self._tracked: dict[str, tuple[str, list[Manifest], list[tuple[Manifest, str]]]] = {}
        self._diffs: dict[ResourceKey, tuple[tuple[str, str], ResourceDiff]] = {}
        self._lock = threading.Lock()

    # -- stages ----------------------------------------------------------------------

    def rules(self, app: Application) -> RuleSet:
        return compile_rules(app.ignore_differences, builtin=self.builtin_rules,
                             jq_timeout=self.jq_timeout, where=f"Application {app.name}")

    def render(self, app: Application, *, revision: str | None = None,
               local: Path | None = None) -> tuple[str, list[Manifest]]:
        """The commit SHA and the rendered manifests.

        Cached per source spec: a known SHA costs nothing, and a new commit that leaves a
        plain-directory app's files untouched (see :func:`input_digest`) reuses its render,
        so a one-line commit re-renders one app, not every app in the repo.
        """
        if local is not None:
            return "local", self._render_at(app, local)
        spec = repr(app.source) + app.destination.namespace + app.name
        with self._lock:
            cached = self._renders.get(spec)
        if cached is not None and revision == cached[0]:
            return cached  # a known commit SHA: no git call at all
        checkout = self.source.checkout(app.source.repo_url,
                                        revision or app.source.target_revision)
        if cached is None or cached[0] != checkout.sha:
            inputs = input_digest(app, checkout.root)
            if cached is not None and inputs is not None and inputs == self._inputs.get(spec):
                cached = (checkout.sha, cached[1])  # the commit did not touch this app
            else:
                cached = (checkout.sha, self._render_at(app, checkout.root))
            with self._lock:
                self._renders[spec] = cached
                self._inputs[spec] = inputs
        return cached

    def _render_at(self, app: Application, root: Path) -> list[Manifest]:
        return render_app(app, root, helm_bin=self.tools.helm_bin,
                          kubectl_bin=self.tools.kubectl_bin,
                          kube_version=self.tools.kube_version, is_namespaced=self._namespaced)

    def _namespaced(self, api_version: str, kind: str) -> bool | None:
        try:
            return self.kube.resource(api_version, kind).namespaced
        except UnknownKind:
            return None

    def compare(self, app: Application, *, revision: str | None = None,
                local: Path | None = None) -> Comparison:
        """Render and diff one app against the cluster."""
        sha, rendered = self.render(app, revision=revision, local=local)
        tracked = self._desired(app, sha, rendered, cacheable=local is None)
        desired = [obj for obj, _ in tracked]
        rules = self.rules(app)
        rules_digest = _digest(app.ignore_differences)
        diffs, live_by_key = [], {}
        for obj, digest in tracked:
            key = ResourceKey.of(obj)
            live = self._live_of(obj)
            if live is not None:
                live_by_key[key] = live
            diffs.append(self._diff(key, obj, live, rules, digest + rules_digest))
        for live in self._extraneous(app, {ResourceKey.of(o) for o in desired}):
            live_by_key[ResourceKey.of(live)] = live
            diffs.append(compare(desired=None, predicted=None, live=live, rules=rules))
        app_diff = AppDiff(resources=diffs)
        health = aggregate(assess(live_by_key.get(ResourceKey.of(o))) for o in desired)
        return Comparison(app, sha, desired, app_diff, live_by_key, health,
                          list(app.warnings) + list(app_diff.warnings))

    def _desired(self, app: Application, sha: str, rendered: list[Manifest], *,
                 cacheable: bool) -> list[tuple[Manifest, str]]:
        """Git's objects with our tracking id, each with a digest of its content.

        Computed once per render (not per refresh), so a new commit that changes one
        object out of a thousand costs one dry run and one diff, not a thousand.
        """
        with self._lock:
            hit = self._tracked.get(app.name)
        if cacheable and hit is not None and hit[0] == sha and hit[1] is rendered:
            return hit[2]
        tracked = [(o, _digest(o)) for o in (with_tracking(app.name, r) for r in rendered)]
        if cacheable:
            with self._lock:
                self._tracked[app.name] = (sha, rendered, tracked)
        return tracked

    def _diff(self, key: ResourceKey, obj: Manifest, live: Manifest | None, rules: RuleSet,
              content: str) -> ResourceDiff:
        """Diff one object, or reuse the last diff of it.

        Reused while its desired content, the app's ignore rules and the live
        ``resourceVersion`` stay the same: no dry run, no normalisation, no diff.
        """
        version = (content, str((live or {}).get("metadata", {}).get("resourceVersion", "")))
        with self._lock:
            hit = self._diffs.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        predicted = self._predict(obj, live, rules) if live is not None else None
        result = compare(desired=obj, predicted=predicted, live=live, rules=rules)
        # A Synced diff is remembered without its normalized copies: only the verdict is
        # reused, and at 1,000 RayClusters two extra copies of each are ~100s of MB.
        slim = result if result.out_of_sync else dataclasses.replace(
            result, desired_normalized=None, live_normalized=None)
        with self._lock:
            self._diffs[key] = (version, slim)
        return result

    # -- cluster reads ---------------------------------------------------------------

    def _live_of(self, obj: Manifest) -> Manifest | None:
        meta = obj.get("metadata") or {}
        return self._live(str(obj.get("apiVersion")), str(obj.get("kind")),
                          str(meta.get("namespace") or ""), str(meta.get("name")))

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
        try:
            return self.kube.get(api_version, kind, name, namespace or None)
        except UnknownKind:
            return None

    def _extraneous(self, app: Application, wanted: set[ResourceKey]) -> list[Manifest]:
        """Live objects in the app's inventory, tracked by it, that git no longer has."""
        out = []
        for entry in self.store.load(app.name).inventory:
            if entry.key in wanted:
                continue
            live = self._live(entry.api_version, entry.kind, entry.namespace, entry.name)
            if live is not None and is_tracked_by(app.name, live):
                out.append(live)
        return out

    def _predict(self, obj: Manifest, live: Manifest, rules: RuleSet) -> Manifest | None:
        """Server-side dry-run apply of what sync would write.

        Not cached on its own: it only runs when the per-object diff memo missed, which
        is keyed by the same live ``resourceVersion``.
        """
        body = prepare(obj, live, rules)
        body["metadata"].pop("resourceVersion", None)
        try:
            return self.kube.apply(body, field_manager=FIELD_MANAGER, force=True,
                                   dry_run=True)
        except KubeError as e:
            raise DiffError(f"{ResourceKey.of(obj)}: server-side dry run failed: {e}") from e


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def inventory_keys(entries: Sequence[InventoryEntry]) -> set[ResourceKey]:
    return {e.key for e in entries}


def input_digest(app: Application, root: Path) -> str | None:
    """A digest of everything a plain-directory app's render reads, or ``None``.

    That is every file below the app's path and the repo's ``.gitops-ray/`` (pod shapes).
    Helm and Kustomize apps can read files elsewhere (``../base``, root-relative value
    files), so they get ``None`` and are re-rendered on every new commit.
    """
    source = app.source
    if source.helm is not None or source.kustomize is not None:
        return None
    try:
        app_dir = safe_path(root, source.path or ".")
    except SourceError:
        return None
    if any((app_dir / name).exists() for name in
           ("Chart.yaml", "kustomization.yaml", "kustomization.yml", "Kustomization")):
        return None
    digest = hashlib.sha256()
    for base in (app_dir, root / ".gitops-ray"):
        for path in sorted(base.rglob("*")) if base.is_dir() else ():
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()
