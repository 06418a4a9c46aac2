"""Argo CD Applications in the cluster as an app source, and their status written back.

Why: teams that run Argo CD keep its UI, CLI, AppProjects and ApplicationSets, and hand
only their Ray apps to gitops-ray by annotating the Application (see
:mod:`gitops_ray.reconcile.argostatus` for the two annotations and the status schema).
This module is the runtime half:

* :class:`ClusterApplications` watches ``argoproj.io/v1alpha1`` Applications in Argo CD's
  namespace (and ``argocd.applicationNamespaces``), keeps the opted-in ones (the two
  annotations on the Application, or on the cluster Secret of its destination: Argo CD
  >= 3.4 skips every app of a cluster whose Secret says ``skip-reconcile``) parsed like
  Applications from git (a bad one is that app's problem: invalid, with its error in its
  status), and tells the runner what an event means: the definition changed (the
  catalog is re-merged, no git call), an operation was requested or a refresh asked
  for (that app is refreshed at once), or only the status changed (our own write:
  nothing). A half opt-in is logged as a warning and posted as an Event on the
  Application, once until its annotations change.
* :class:`StatusWriter` projects an app's record into the Application's ``status`` and
  writes it with a JSON Patch guarded by the object's ``resourceVersion`` (a concurrent
  writer, such as argocd-server setting ``.operation``, wins and we re-read), only when
  the projection differs from what is there. The same patch clears ``.operation`` once
  the operation it started is finished (never a newer one) and removes the
  ``argocd.argoproj.io/refresh`` annotation after the refresh it asked for.
* :meth:`StatusWriter.release` removes Argo CD's resources finalizer after gitops-ray
  deleted the app's objects (or orphaned them), so a deleted Application goes away as
  it does under Argo CD.

Only the leader writes (the controller calls in under its write guard, and every write
passes the lease fence of :mod:`gitops_ray.kube.fence`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import structlog

from gitops_ray.errors import GitOpsRayError
from gitops_ray.kube import Conflict, Kube, KubeError, NotFound
from gitops_ray.reconcile.argostatus import (
    REFRESH_ANNOTATION,
    RESOURCES_FINALIZERS,
    ManualOperation,
    OptIn,
    Projection,
    app_name,
    application_destination,
    application_status,
    cluster_application,
    opt_in,
    refresh_requested,
    requested_operation,
)
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.render.applications import API_VERSION
from gitops_ray.render.apps import Application, Destination
from gitops_ray.runtime.argoredis import ArgoViews
from gitops_ray.runtime.kindwatch import KindWatch, WatchOptions
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.settings import ArgoCD
from gitops_ray.sync.appstatus import AppStatus, decode_status
from gitops_ray.sync.events import post_event
from gitops_ray.types import Manifest, OperationPhase

log = structlog.get_logger(__name__)
WRITE_ATTEMPTS = 5


class Change(StrEnum):
    """What an Application event means to the controller."""

    DEFINITION = "definition"  # added, removed, spec/annotations/finalizers changed
    OPERATION = "operation"  # `.operation` set (Sync button, argocd app sync) or terminated
    REFRESH = "refresh"  # the argocd.argoproj.io/refresh annotation
    PROJECT = "project"  # the app's AppProject changed
    NONE = "none"  # status only (our own write), or not ours


@dataclass(frozen=True)
class _Entry:
    """One opted-in Application as last seen."""

    obj: Manifest
    app: Application | None  # None: invalid (see error)
    error: str = ""


Notify = Callable[[str, Change], None]  # (app name, what changed)


class ClusterApplications:
    """The opted-in Applications of the watched namespaces, by gitops-ray app name."""

    def __init__(self, kube: Kube, settings: ArgoCD, *, notify: Notify,
                 options: WatchOptions | None = None, metrics: Metrics | None = None
                 ) -> None:
        self.kube, self.settings = kube, settings
        self._notify = notify
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._deleting: dict[str, Manifest] = {}  # deletionTimestamp set, finalizers left
        self._handed_back: set[str] = set()  # opted out while it exists: objects stay
        self._warned: dict[tuple[str, str], OptIn] = {}  # (ns, name) -> what was said
        opts = dataclasses.replace(options or WatchOptions(), label_selector=None,
                                   field_selector=None)
        self.watches = [KindWatch(kube, API_VERSION, "Application", ns, options=opts,
                                  on_event=self._on_event, stop=self._stop, metrics=metrics)
                        for ns in settings.watched]
        self.projects = KindWatch(kube, API_VERSION, "AppProject", settings.namespace,
                                  options=opts, on_event=self._on_project, stop=self._stop,
                                  metrics=metrics)
        self._options = opts
        self.handed_over: Callable[[Destination], bool] = lambda _dest: False
        """Whether a destination's cluster Secret hands all its apps over (the runner
        sets the cluster registry's :meth:`~gitops_ray.runtime.clusters.ClusterRegistry.
        handed_over`; call :meth:`reconsider` when it may have changed)."""

    def reconsider(self) -> None:
        """Take or give back the apps whose cluster's hand-over changed (a Secret event)."""
        for watch in self.watches:
            for obj in watch.everything():
                self._on_event("MODIFIED", obj)

    def start(self) -> None:
        for watch in [*self.watches, self.projects]:
            threading.Thread(target=watch.run, name=f"watch-{watch.kind}-{watch.namespace}",
                             daemon=True).start()
            log.info("watch_started", kind=watch.kind, namespace=watch.namespace)

    def stop(self) -> None:
        self._stop.set()

    def unsynced(self) -> list[str]:
        """The Application/AppProject watches not listed yet, or refused (readiness).

        Unlike the managed kinds, these have no fallback: a namespace whose Applications
        cannot be listed is a namespace whose apps are not reconciled.
        """
        return sorted(f"{API_VERSION}/{w.kind} in {w.namespace}"
                      + (" (forbidden)" if w.forbidden else "")
                      for w in [*self.watches, self.projects] if not w.synced.is_set())

    # -- the catalog's view ----------------------------------------------------------

    def items(self) -> list[Application | tuple[str, str]]:
        """Apps and (name, error) pairs of invalid ones, in a stable order."""
        with self._lock:
            entries = sorted(self._entries.items())
        return [e.app if e.app is not None else (name, e.error) for name, e in entries]

    def object(self, name: str) -> Manifest | None:
        """The Application behind app ``name`` as last seen (``None``: not a cluster app)."""
        with self._lock:
            entry = self._entries.get(name)
        return entry.obj if entry is not None else None

    def handed_back(self, name: str) -> bool:
        """Whether app ``name`` left because its annotations were removed (not deleted).

        Such an app goes back to Argo CD (or to nobody): its objects are never deleted,
        whatever finalizer its Application carries; only gitops-ray's record goes.
        """
        with self._lock:
            return name in self._handed_back

    def deleting(self, name: str) -> Manifest | None:
        """The Application of app ``name`` while it is being deleted (finalizers left)."""
        with self._lock:
            return self._deleting.get(name)

    def operation(self, name: str) -> ManualOperation | None:
        """The operation requested on app ``name`` (a malformed one carries its error)."""
        obj = self.object(name)
        return requested_operation(obj.get("operation")) if obj is not None else None

    def refresh(self, name: str) -> str:
        """``normal``/``hard`` while a refresh is requested on app ``name``, else ""."""
        obj = self.object(name)
        return refresh_requested(obj) if obj is not None else ""

    def terminating(self, name: str) -> bool:
        """Whether ``argocd app terminate-op`` asked to end app ``name``'s operation."""
        return _terminating(self.object(name) or {})

    def project(self, namespace: str, name: str) -> Manifest | None:
        """An AppProject of Argo CD's namespace (a GET until its watch has listed)."""
        if namespace == self.settings.namespace and self.projects.ready(self._options.sync_wait):
            return self.projects.get(namespace, name)
        return self.kube.get(API_VERSION, "AppProject", name=name, namespace=namespace)

    def remember(self, name: str, obj: Manifest, *, replacing: str) -> None:
        """Our own write's result: newer than the watch's copy until its event arrives.

        Only while the watch's copy is still the one the write replaced (resourceVersion
        ``replacing``): if the watch already delivered our write *and* a later change
        (``argocd app sync`` asks for a refresh right after the operation's status lands),
        that later copy stays, or its refresh request would never be seen again.
        """
        with self._lock:
            entry = self._entries.get(name)
            if entry is not None and _version(entry.obj) == replacing:
                self._entries[name] = dataclasses.replace(entry, obj=obj)

    # -- events ----------------------------------------------------------------------

    def _on_event(self, kind: str, obj: Manifest) -> None:
        meta = obj.get("metadata") or {}
        namespace, raw_name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        name = app_name(namespace, raw_name, argocd_namespace=self.settings.namespace)
        choice = opt_in(obj) if kind != "DELETED" else OptIn.NOT_OURS
        if kind != "DELETED" and choice is not OptIn.MANAGED and \
                self.handed_over(application_destination(obj)):
            choice = OptIn.MANAGED  # its cluster's Secret hands every app of it over
        self._warn(choice, obj)
        ours = choice is OptIn.MANAGED and not meta.get("deletionTimestamp")
        with self._lock:
            before = self._entries.get(name)
            if choice is OptIn.MANAGED and meta.get("deletionTimestamp"):
                self._deleting[name] = obj
            else:
                self._deleting.pop(name, None)
            if before is not None and kind != "DELETED" and choice is not OptIn.MANAGED:
                self._handed_back.add(name)
            elif ours:
                self._handed_back.discard(name)
            if ours:
                self._entries[name] = entry = self._entry(name, obj)
            else:
                self._entries.pop(name, None)
        change = _change(before, entry if ours else None)
        if change is not Change.NONE:
            self._notify(name, change)

    def _on_project(self, kind: str, obj: Manifest) -> None:
        """An AppProject changed: refresh the apps in it (their conditions may change)."""
        project = str((obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            names = [n for n, e in self._entries.items()
                     if e.app is not None and e.app.project == project]
        for name in names:
            self._notify(name, Change.PROJECT)

    def _entry(self, name: str, obj: Manifest) -> _Entry:
        try:
            return _Entry(obj, cluster_application(obj, name))
        except GitOpsRayError as e:
            return _Entry(obj, None, str(e))

    def _warn(self, choice: OptIn, obj: Manifest) -> None:
        """A half opt-in: a warning and an Event, once until its annotations change.

        Not once per version: Argo CD rewrites the status of a ``managed``-only app every
        few minutes, and a warning each time would be noise.
        """
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        with self._lock:
            said = self._warned.pop(key, None)
            if choice.warning:
                self._warned[key] = choice
        if not choice.warning or said is choice:
            return
        log.warning("application_half_opted_in", namespace=key[0], application=key[1],
                    problem=choice.value, detail=choice.warning)
        post_event(self.kube, obj, reason="GitOpsRayNotManaging", message=choice.warning,
                   warning=True)


def _change(before: _Entry | None, after: _Entry | None) -> Change:
    if before is None and after is None:
        return Change.NONE
    if before is None or after is None or (before.app, before.error) != (after.app, after.error):
        return Change.DEFINITION
    if before.obj.get("operation") != after.obj.get("operation") and after.obj.get("operation"):
        return Change.OPERATION
    if refresh_requested(after.obj) and refresh_requested(after.obj) != \
            refresh_requested(before.obj):
        return Change.REFRESH
    if _terminating(after.obj) and not _terminating(before.obj):
        return Change.OPERATION
    return Change.NONE


class StatusWriter:
    """Writes apps' records into their Applications' status (see the module docstring)."""

    def __init__(self, kube: Kube, apps: ClusterApplications, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.kube, self.apps = kube, apps
        self._clock = clock
        self._deployed: dict[str, float] = {}  # app -> startedAt last added to its history
        self._current: dict[str, tuple[Mapping[str, Any], str]] = {}
        """app -> (the record, the Application's resourceVersion) its status is current for."""

    def publish(self, name: str, record: Mapping[str, Any], app: Application | None, *,
                refreshed: bool = False) -> bool:
        """Write app ``name``'s status if it changed; ``True`` when something was written.

        ``refreshed``: a requested refresh was done, so its annotation goes (and
        ``reconciledAt`` says when).
        """
        obj = self.apps.object(name)
        if obj is None:
            self._current.pop(name, None)
            return False
        seen = self._current.get(name)
        if not refreshed and seen is not None and seen[0] is record and \
                seen[1] == _version(obj):  # a no-op refresh: nothing to project again
            return False
        typed = decode_status(record)
        for _ in range(WRITE_ATTEMPTS):
            ops = self._patch(name, obj, typed, app, refreshed)
            if not ops:
                self._current[name] = (record, _version(obj))
                return False
            try:
                written = self._write(obj, ops)
            except Conflict:
                obj = self._read(obj)
                if obj is None:
                    return False
                continue
            self.apps.remember(name, written, replacing=_version(obj))
            self._remember_deploy(name, typed)
            self._current[name] = (record, _version(written))
            return True
        raise Conflict(f"Application of app {name!r} kept changing; gave up after "
                       f"{WRITE_ATTEMPTS} tries")

    def _remember_deploy(self, name: str, record: AppStatus) -> None:
        op = record.operation
        if op is not None and op.phase == OperationPhase.SUCCEEDED and op.started_at \
                and not op.dry_run:
            self._deployed[name] = float(op.started_at)

    def _patch(self, name: str, obj: Manifest, record: AppStatus,
               app: Application | None, refreshed: bool) -> list[dict[str, Any]]:
        now = self._clock()
        if refreshed:
            record = dataclasses.replace(record, compared_at=now)
        status = application_status(Projection(record, app, obj, now,
                                               self._deployed.get(name)))
        state = status.get("operationState") or {}
        if _terminating(obj) and state.get("phase") == "Running":
            state["phase"] = "Terminating"  # asked for, not done yet: do not undo it
        ops: list[dict[str, Any]] = []
        if status != obj.get("status"):
            ops.append({"op": "add", "path": "/status", "value": status})
        if obj.get("operation") and _finished(record, obj["operation"]):
            ops.append({"op": "remove", "path": "/operation"})
        if refreshed and refresh_requested(obj):
            ops.append({"op": "remove",
                        "path": "/metadata/annotations/" + _escape(REFRESH_ANNOTATION)})
        return ops

    def _write(self, obj: Manifest, ops: list[dict[str, Any]]) -> Manifest:
        meta = obj.get("metadata") or {}
        guard = {"op": "test", "path": "/metadata/resourceVersion",
                 "value": str(meta.get("resourceVersion") or "")}
        try:
            return self.kube.patch(API_VERSION, "Application", name=str(meta.get("name")),
                                   namespace=str(meta.get("namespace")), patch=[guard, *ops])
        except KubeError as e:
            if e.status == 422 and "test" in str(e).lower():
                raise Conflict("the Application changed since it was read") from e
            raise

    def _read(self, obj: Manifest) -> Manifest | None:
        meta = obj.get("metadata") or {}
        try:
            return self.kube.get(API_VERSION, "Application", name=str(meta.get("name")),
                                 namespace=str(meta.get("namespace")))
        except NotFound:
            return None

    def release(self, app: Application, obj: Manifest | None) -> None:
        """Remove Argo CD's resources finalizer from a deleted Application.

        Its objects were deleted (or orphaned) already, so Kubernetes may remove it now.
        """
        for _ in range(WRITE_ATTEMPTS):
            meta = (obj or {}).get("metadata") or {}
            finalizers = list(meta.get("finalizers") or [])
            kept = [f for f in finalizers if f not in RESOURCES_FINALIZERS]
            if obj is None or kept == finalizers:
                return
            try:
                self._write(obj, [{"op": "replace", "path": "/metadata/finalizers",
                                   "value": kept}])
            except (Conflict, NotFound):
                obj = self._read(obj)  # changed meanwhile: again, from what is there
                continue
            log.info("application_finalizer_removed", app=app.name)
            return


def _version(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _terminating(obj: Manifest) -> bool:
    state = (obj.get("status") or {}).get("operationState") or {}
    return state.get("phase") == "Terminating"


def _finished(record: AppStatus, requested: object) -> bool:
    """Whether the last finished operation is the one ``.operation`` still asks for."""
    op = record.operation
    return (op is not None and op.argocd_operation == requested and not op.retrying
            and record.running is None)


def _escape(key: str) -> str:
    """A JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


class ArgoBridge:
    """What the controller asks of Argo CD's side: operations, refreshes, status, release.

    ``views``: the apps' resource trees and managed resources written into Argo CD's
    Redis (:mod:`gitops_ray.runtime.argoredis`), before the status that ends a refresh.
    """

    def __init__(self, apps: ClusterApplications, writer: StatusWriter,
                 views: ArgoViews | None = None) -> None:
        self.apps, self.writer, self.views = apps, writer, views

    def compared(self, name: str, comparison: Comparison, cache: Any) -> None:
        """The app's newest comparison (and its destination's watch cache), for the views."""
        if self.views is not None and self.manages(name):
            self.views.compared(name, comparison, cache)

    def forget(self, name: str) -> None:
        if self.views is not None:
            self.views.forget(name)

    def manages(self, name: str) -> bool:
        return self.apps.object(name) is not None

    def operation(self, name: str) -> ManualOperation | None:
        return self.apps.operation(name)

    def refresh(self, name: str) -> str:
        return self.apps.refresh(name)

    def terminating(self, name: str) -> bool:
        return self.apps.terminating(name)

    def publish(self, name: str, record: Mapping[str, Any], app: Application | None, *,
                refreshed: bool = False) -> bool:
        if self.views is not None:  # first: argocd-server reads them once the refresh ends
            self.views.publish(name, record)
        return self.writer.publish(name, record, app, refreshed=refreshed)

    def release(self, app: Application) -> None:
        """The app's objects were deleted (or orphaned): let its Application go."""
        self.writer.release(app, self.apps.deleting(app.name))
