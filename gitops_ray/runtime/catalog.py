"""Which apps the controller manages: app-of-apps directories in git, plus inline Applications.

Why a catalog of its own: the set of apps changes while the controller runs (a team adds
an Application to the app-of-apps directory), and the controller must add, update and
drop per-app jobs when it does, without ever dropping apps because the config repo was
briefly unreachable. So:

* each app source is resolved cheaply first (``ls-remote``-style) and only checked out
  and parsed again when its commit changed;
* a source that fails to load keeps the apps it had (and says so in the log);
* **one bad Application is that app's problem**: an Application that can be named but
  not used (a bad field, ``path: ../../etc``, a duplicate name) is kept as *invalid*
  with its error, which the controller writes into that app's status; the source's
  other apps load as usual. A file that cannot be read at all (invalid YAML, over a
  bound) names no app: every app it held before stays, invalid with the file's error,
  and the file is counted in the ``gitops_ray_app_source_errors`` metric and logged.
  An invalid app is never synced and never pruned: its objects stay as they are;
* app names are unique: a duplicate is reported and the first definition wins
  (inline Applications come first, then Applications in the cluster, then git's);
* Applications in the cluster (Argo CD's, opted in: :mod:`gitops_ray.runtime.argocd`) are
  a source too. Their watch keeps them current, so re-merging them costs no git call
  (``reload(())``); an Application deleted from the cluster is removed like one that
  left git.

Removing an Application from git deletes the app as Argo CD deletes an Application: its
objects too when it carries the resources finalizer, else they are left in place
(:mod:`gitops_ray.sync.teardown`). ``CatalogChange.gone`` hands over the last definition
of each removed app for that. An app only counts as removed when its manifest is gone
from a source that *loaded*: a failed source keeps its apps, so an unreachable repo or a
broken file can never delete anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from gitops_ray.errors import GitOpsRayError
from gitops_ray.logs import redact_url
from gitops_ray.render import AppScan, scan_applications
from gitops_ray.render.apps import Application
from gitops_ray.settings import AppSourceSpec
from gitops_ray.source import GitSource

log = structlog.get_logger(__name__)


class ClusterSource(Protocol):
    """Applications that live in the cluster (:mod:`gitops_ray.runtime.argocd`)."""

    def items(self) -> list[Application | tuple[str, str]]:
        """Apps, and (name, error) of invalid ones."""


@dataclass(frozen=True)
class _Loaded:
    """One source's last load: its commit, apps, invalid apps (name -> error), files."""

    sha: str = ""
    apps: tuple[Application, ...] = ()
    invalid: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # app name -> file
    broken_files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogChange:
    """What a reload changed, by app name (invalid apps too); ``failed``: sources not loaded."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    failed: tuple[AppSourceSpec, ...] = field(default=())
    gone: tuple[Application, ...] = ()  # the last definitions of the removed apps

    @property
    def touched(self) -> tuple[str, ...]:
        return self.added + self.changed


class Catalog:
    """The managed apps by name, reloaded from their sources on demand."""

    def __init__(self, source: GitSource, specs: Sequence[AppSourceSpec],
                 inline: Sequence[Application] = (), *,
                 cluster: ClusterSource | None = None) -> None:
        self._source = source
        self.specs = tuple(specs)
        self._inline = tuple(inline)
        self._cluster = cluster
        self._loaded: dict[AppSourceSpec, _Loaded] = {}
        self._apps: dict[str, Application] = {}  # empty until the first reload
        self._invalid: dict[str, str] = {}
        self._lock = threading.Lock()
        self._reloading = threading.Lock()  # one reload at a time (see reload)

    def apps(self) -> dict[str, Application]:
        with self._lock:
            return dict(self._apps)

    def get(self, name: str) -> Application | None:
        with self._lock:
            return self._apps.get(name)

    def error(self, name: str) -> str | None:
        """Why ``name`` is defined but cannot be used, or ``None``."""
        with self._lock:
            return self._invalid.get(name)

    def invalid(self) -> dict[str, str]:
        with self._lock:
            return dict(self._invalid)

    def errors(self, spec: AppSourceSpec) -> int:
        """Invalid apps plus unreadable files in ``spec``'s last load."""
        loaded = self._loaded.get(spec, _Loaded())
        return len(loaded.invalid) + len(loaded.broken_files)

    def reload(self, specs: Iterable[AppSourceSpec] | None = None) -> CatalogChange:
        """Re-read ``specs`` (default: all) and return what changed.

        Reloads run one at a time: a re-merge of the cluster's Applications racing a git
        load could otherwise install a view computed before that load finished, and
        report the apps it added as removed (which deletes apps).
        """
        with self._reloading:
            return self._reload(specs)

    def _reload(self, specs: Iterable[AppSourceSpec] | None) -> CatalogChange:
        failed = tuple(s for s in (self.specs if specs is None else specs) if not self._load(s))
        merged, invalid = self._merge()
        with self._lock:
            old = {**self._apps, **self._invalid}
            old_apps = self._apps
            self._apps, self._invalid = merged, invalid
        new: dict[str, object] = {**merged, **invalid}
        removed = tuple(sorted(old.keys() - new.keys()))
        return CatalogChange(
            added=tuple(sorted(new.keys() - old.keys())), removed=removed,
            gone=tuple(old_apps[n] for n in removed if n in old_apps),
            changed=tuple(sorted(n for n in new.keys() & old.keys() if new[n] != old[n])),
            failed=failed)

    def _load(self, spec: AppSourceSpec) -> bool:
        repo = redact_url(spec.repo)
        previous = self._loaded.get(spec, _Loaded())
        try:
            sha = self._source.resolve(spec.repo, spec.revision)
            if previous.sha == sha:
                return True
            checkout = self._source.checkout(spec.repo, sha)
            scan = scan_applications(checkout.root, spec.path)
        except GitOpsRayError as e:
            log.warning("app_source_failed", repo=repo, path=spec.path, stage=e.stage,
                        error=str(e))
            return False
        self._loaded[spec] = loaded = _from_scan(sha, scan, previous)
        for name, error in sorted(loaded.invalid.items()):
            log.warning("application_invalid", app=name, repo=repo, path=spec.path,
                        error=error)
        for file, error in sorted(loaded.broken_files.items()):
            log.warning("application_file_unreadable", file=file, repo=repo, path=spec.path,
                        error=error)
        log.info("app_source_loaded", repo=repo, path=spec.path, revision=sha[:12],
                 apps=len(loaded.apps), invalid=len(loaded.invalid),
                 broken_files=len(loaded.broken_files))
        return True

    def _merge(self) -> tuple[dict[str, Application], dict[str, str]]:
        merged: dict[str, Application | str] = {}
        cluster = self._cluster.items() if self._cluster is not None else []
        defined = [*self._inline, *cluster, *(item for spec in self.specs for item in _items(
            self._loaded.get(spec, _Loaded())))]
        for item in defined:
            name = item.name if isinstance(item, Application) else item[0]
            value = item if isinstance(item, Application) else item[1]
            if name in merged:
                if merged[name] != value:
                    log.error("duplicate_app", app=name,
                              detail="defined twice; the first definition is used")
                continue
            merged[name] = value
        return ({n: v for n, v in merged.items() if isinstance(v, Application)},
                {n: v for n, v in merged.items() if isinstance(v, str)})


def _items(loaded: _Loaded) -> list[Application | tuple[str, str]]:
    """A source's apps and (name, error) pairs for its invalid apps, in a stable order."""
    return [*loaded.apps, *sorted(loaded.invalid.items())]


def _from_scan(sha: str, scan: AppScan, previous: _Loaded) -> _Loaded:
    """The new load.

    Apps of files that became unreadable stay, invalid with the file's error. While any
    file is unreadable, apps that are simply missing keep their last definition too:
    the unreadable file may be where they went, so nothing is deleted until it reads.
    """
    invalid = {name: error for name, (_, error) in scan.invalid.items()}
    files = {name: file for name, (file, _) in (*scan.apps.items(), *scan.invalid.items())}
    for name, file in previous.files.items():
        if file in scan.broken_files and name not in files:
            invalid[name] = f"{scan.broken_files[file]} (the file defining this app)"
            files[name] = file
    kept: tuple[Application, ...] = ()
    if scan.broken_files:
        kept = tuple(a for a in previous.apps if a.name not in files)
        files.update({a.name: previous.files.get(a.name, "") for a in kept})
    return _Loaded(sha, (*(app for _, app in scan.apps.values()), *kept), invalid, files,
                   dict(scan.broken_files))
