"""Which apps the controller manages: app-of-apps directories in git, plus inline Applications.

Why a catalog of its own: the set of apps changes while the controller runs (a team adds
an Application to the app-of-apps directory), and the controller must add, update and
drop per-app jobs when it does, without ever dropping apps because the config repo was
briefly unreachable. So:

* each app source is resolved cheaply first (``ls-remote``-style) and only checked out
  and parsed again when its commit changed;
* a source that fails to load keeps the apps it had (and says so in the log);
* app names are unique: a duplicate is reported and the first definition wins
  (inline Applications come first).

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

import structlog

from gitops_ray.errors import GitOpsRayError
from gitops_ray.render import load_applications
from gitops_ray.render.apps import Application
from gitops_ray.runtime.logs import redact_url
from gitops_ray.runtime.settings import AppSourceSpec
from gitops_ray.source import GitSource

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class CatalogChange:
    """What a reload changed, by app name; ``failed`` lists sources that did not load."""

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
                 inline: Sequence[Application] = ()) -> None:
        self._source = source
        self.specs = tuple(specs)
        self._inline = tuple(inline)
        self._loaded: dict[AppSourceSpec, tuple[str, list[Application]]] = {}
        self._apps: dict[str, Application] = {}  # empty until the first reload
        self._lock = threading.Lock()

    def apps(self) -> dict[str, Application]:
        with self._lock:
            return dict(self._apps)

    def get(self, name: str) -> Application | None:
        with self._lock:
            return self._apps.get(name)

    def reload(self, specs: Iterable[AppSourceSpec] | None = None) -> CatalogChange:
        """Re-read ``specs`` (default: all) and return what changed."""
        failed = tuple(s for s in (self.specs if specs is None else specs) if not self._load(s))
        merged = self._merge()
        with self._lock:
            old, self._apps = self._apps, merged
        removed = tuple(sorted(old.keys() - merged.keys()))
        return CatalogChange(
            added=tuple(sorted(merged.keys() - old.keys())), removed=removed,
            gone=tuple(old[n] for n in removed),
            changed=tuple(sorted(n for n in merged.keys() & old.keys() if merged[n] != old[n])),
            failed=failed)

    def _load(self, spec: AppSourceSpec) -> bool:
        repo = redact_url(spec.repo)
        try:
            sha = self._source.resolve(spec.repo, spec.revision)
            if self._loaded.get(spec, ("", []))[0] == sha:
                return True
            checkout = self._source.checkout(spec.repo, sha)
            apps = load_applications(checkout.root, spec.path)
        except GitOpsRayError as e:
            log.warning("app_source_failed", repo=repo, path=spec.path, stage=e.stage,
                        error=str(e))
            return False
        self._loaded[spec] = (sha, list(apps))
        log.info("app_source_loaded", repo=repo, path=spec.path, revision=sha[:12],
                 apps=len(apps))
        return True

    def _merge(self) -> dict[str, Application]:
        merged: dict[str, Application] = {}
        from_git = [a for spec in self.specs for a in self._loaded.get(spec, ("", []))[1]]
        for app in [*self._inline, *from_git]:
            if app.name in merged:
                if merged[app.name] != app:
                    log.error("duplicate_app", app=app.name,
                              detail="defined twice; the first definition is used")
                continue
            merged[app.name] = app
        return merged
