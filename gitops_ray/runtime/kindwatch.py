"""One list+watch of one kind into memory: the building block of every cache here.

Why its own module: the live cache (:mod:`gitops_ray.runtime.watches`), the Argo CD
Applications' and cluster Secrets' watches and the shard Leases' all keep one kind current
the same way (list, then watch from the list's version, resume on a dropped stream, relist
on ``410 Gone``, report what a relist changed as events), so that part is written once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from gitops_ray.kube import Forbidden, Gone, Kube
from gitops_ray.packed import Piece, Shelf
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.sync.tracking import APP_LABEL
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)
EventHandler = Callable[[str, Manifest], None]
Key = tuple[str, str]  # (namespace, name)
Entry = tuple[str, Piece]  # (resourceVersion, packed object)
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class WatchOptions:
    """How the watches behave (small values in tests)."""

    label_selector: str | None = APP_LABEL
    field_selector: str | None = None
    timeout: int = 300  # server-side watch timeout, then resumed
    sync_wait: float = 10.0  # how long a lookup waits for a new kind's first list
    page_size: int = 100  # objects per list request (decoded at once while relisting)
    backoff: float = 1.0  # first retry delay after an error (doubles, capped)


class KindWatch:
    """List+watch of one (apiVersion, kind), in one namespace or all, into a dict."""

    def __init__(self, kube: Kube, api_version: str, kind: str, namespace: str | None, *,
                 options: WatchOptions, on_event: EventHandler, stop: threading.Event,
                 metrics: Metrics | None = None, shelf: Shelf | None = None) -> None:
        self.kube, self.api_version, self.kind = kube, api_version, kind
        self._shelf = shelf or Shelf()
        self.namespace = namespace
        self.options = options
        self.synced = threading.Event()  # the first list succeeded
        self.settled = threading.Event()  # the first list was answered, either way
        self.forbidden = False  # RBAC denies listing here: the thread has stopped
        self._on_event = on_event
        self._stop = stop
        self._metrics = metrics
        self._objects: dict[Key, Entry] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str, name: str) -> Manifest | None:
        """A private copy of the cached object."""
        with self._lock:
            entry = self._objects.get((namespace, name))
        return entry[1].unpack() if entry is not None else None

    def everything(self) -> list[Manifest]:
        """Private copies of every cached object."""
        with self._lock:
            entries = list(self._objects.values())
        return [entry[1].unpack() for entry in entries]

    def version(self, namespace: str, name: str) -> str | None:
        """The cached object's ``resourceVersion`` (``None``: not cached), without unpacking."""
        with self._lock:
            entry = self._objects.get((namespace, name))
        return entry[0] if entry is not None else None

    def __len__(self) -> int:
        return len(self._objects)

    def ready(self, wait: float) -> bool:
        """Whether lookups can be served from memory (waits up to ``wait`` for a first list)."""
        self.settled.wait(wait)
        return self.synced.is_set()

    def run(self) -> None:
        """Keep the dict current until stopped (runs in its own thread)."""
        version, failures = "", 0
        while not self._stop.is_set():
            try:
                version = version or self._relist()
                version = self._stream(version)
                failures = 0
            except Gone:
                version = ""
            except Forbidden:
                self.forbidden = True
                self.settled.set()
                log.info("watch_forbidden", kind=self.kind, namespace=self.namespace or "*")
                return
            except Exception as e:  # KubeError, or a stream cut mid-chunk (urllib3)
                self.settled.set()
                failures += 1
                if not self._stop.is_set():
                    log.warning("watch_failed", kind=self.kind, error=str(e)[:300],
                                attempt=failures)
                self._stop.wait(min(MAX_BACKOFF, self.options.backoff * 2 ** (failures - 1)))

    def _relist(self) -> str:
        fresh: dict[Key, Entry] = {}
        version = ""
        for page, page_version in self.kube.list_pages(
                self.api_version, self.kind, self.namespace,
                label_selector=self.options.label_selector,
                field_selector=self.options.field_selector, limit=self.options.page_size):
            fresh.update((object_key(o), (object_version(o), self._shelf.pack(o))) for o in page)
            version = page_version
        with self._lock:
            old, self._objects = self._objects, fresh
        if self._metrics:
            self._metrics.relists.labels(self.kind).inc()
        self._report_changes(old, fresh)
        self.synced.set()
        self.settled.set()
        log.debug("watch_listed", kind=self.kind, objects=len(fresh))
        return version

    def _report_changes(self, old: dict[Key, Entry], new: dict[Key, Entry]) -> None:
        """What changed while we were not watching, as the events a watch would have sent."""
        for key, (version, blob) in new.items():
            before = old.get(key)
            if before is None or before[0] != version:
                self._emit("ADDED" if before is None else "MODIFIED", blob.unpack())
        for key in old.keys() - new.keys():
            self._emit("DELETED", old[key][1].unpack())

    def _stream(self, version: str) -> str:
        for event in self.kube.watch(self.api_version, self.kind, self.namespace,
                                     resource_version=version,
                                     label_selector=self.options.label_selector,
                                     field_selector=self.options.field_selector,
                                     timeout_seconds=self.options.timeout):
            if self._stop.is_set():
                break
            obj = event.object
            version = object_version(obj) or version
            if event.type != "BOOKMARK":
                self._apply(event.type, obj)
        return version

    def _apply(self, kind: str, obj: Manifest) -> None:
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        entry = (object_version(obj), self._shelf.pack(obj)) if kind != "DELETED" else None
        with self._lock:
            if entry is None:
                self._objects.pop(object_key(obj), None)
            else:
                self._objects[object_key(obj)] = entry
        self._emit(kind, obj)

    def _emit(self, kind: str, obj: Manifest) -> None:
        if self._metrics:
            self._metrics.watch_events.labels(self.kind, kind).inc()
        try:
            self._on_event(kind, obj)
        except Exception:  # a handler bug must not stop the watch
            log.exception("watch_handler_failed", kind=self.kind)


def object_key(obj: Manifest) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name", ""))


def object_version(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
