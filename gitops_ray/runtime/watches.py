"""An in-memory cache of managed objects, kept current by one list+watch per kind.

Why: comparing 500 apps every few minutes with a GET per object is thousands of requests
per cycle, and it still learns about a manual edit only at the next poll. With one
watch per kind the controller answers "what is live?" from memory (a no-op cycle makes
no per-object GET) and hears about every change as it happens, which is what drives
self-heal and health updates within a second.

How it stays correct:

* each kind is listed, then watched from the list's ``resourceVersion``; a stream that
  ends or fails is resumed from the last version seen (bookmarks included), and
  ``410 Gone`` (version too old) triggers a relist. A relist reports what changed while
  we were away as synthetic events, so no drift is missed;
* a kind is watched cluster-wide; where RBAC allows only some namespaces, per namespace
  (a lookup never waits on a watch that cannot list);
* only objects carrying our app label are watched (``gitops-ray.io/app``), so the cache
  holds what we manage, not every ConfigMap in the cluster. A miss falls back to a GET:
  that covers objects that exist but are not labelled yet (adopted on first sync) and
  objects that do not exist (they are OutOfSync anyway);
* objects are kept packed (:mod:`gitops_ray.packed`, a tenth of the memory of decoded
  JSON) next to their ``resourceVersion``, on one :class:`~gitops_ray.packed.Shelf`:
  a sub-structure many objects repeat (a pod template, an env list, ``managedFields``
  trees) is stored once, and every object is kept whole (the takeover patch, the
  web page and health read it as the API server sent it). :meth:`LiveCache.version`
  answers from the version alone, which is all a no-op pass needs (the pipeline's diff
  memo is keyed by it);
  :meth:`LiveCache.get` unpacks a private copy. A relist is read page by page, so a
  restart never holds every object decoded at once;
* objects we read but do not manage (the pod-shape ConfigMaps, see :class:`NamedObjects`)
  are watched by name, whatever their labels, each with its own field-selected watch;
* :meth:`LiveCache.fresh` makes lookups in the calling thread bypass the cache. A sync
  re-compares through it, so the status written right after a sync reflects the objects
  just written, not a watch event that has not arrived yet. Its own reads before a write
  (:meth:`LiveCache.lookup`) and the records' stay cached: the write carries the
  ``resourceVersion`` it was based on, so a stale copy costs a 409 and a re-read, not a
  lost write, and a GET per object written would double what a takeover's sync asks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator

import structlog

from gitops_ray.kube import Kube, KubeError, UnknownKind
from gitops_ray.packed import SHELF, Shelf
from gitops_ray.reconcile.live import RAY_CLUSTER_LABEL, REJECTIONS, event_token, pod_token
from gitops_ray.runtime.kindwatch import (
    EventHandler,
    Key,
    KindWatch,
    WatchOptions,
    object_key,
    object_version,
)
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.types import Manifest

log = structlog.get_logger(__name__)
DEFAULT_OPTIONS = WatchOptions()


class IndexedWatch:
    """Objects of one kind about RayClusters, watched and indexed by the cluster.

    Watched cluster-wide, or per namespace where RBAC grants only namespaces (the chart's
    ``clusterWide: false``). Objects stay packed in the watch; the index holds only which
    objects are about which cluster. Every change also reaches ``on_event``, so it
    refreshes the cluster's app like any other watch event.
    """

    def __init__(self, kube: Kube, kind: str, *, options: WatchOptions,
                 label_selector: str | None, field_selector: str | None,
                 about: Callable[[Manifest], Key], token: Callable[[Manifest], str],
                 on_event: EventHandler, stop: threading.Event,
                 metrics: Metrics | None = None, shelf: Shelf | None = None) -> None:
        self._kind, self._token = kind, token
        self._shelf = shelf or Shelf()
        self._options = dataclasses.replace(options, label_selector=label_selector,
                                            field_selector=field_selector)
        self._kube, self._stop, self._metrics = kube, stop, metrics
        self._about, self._on_event = about, on_event
        # (namespace, cluster) -> {object key: its token, computed once per watch event}
        self._index: dict[Key, dict[Key, str]] = {}
        self._lock = threading.Lock()
        self._watches: dict[str | None, KindWatch] = {}  # None: cluster-wide

    def objects(self, namespace: str, name: str) -> list[Manifest]:
        """Copies of the objects about RayCluster ``namespace/name``, by name."""
        watch = self._ready(namespace)
        if watch is None:
            return []
        with self._lock:
            keys = sorted(self._index.get((namespace, name), {}))
        return [o for o in (watch.get(*k) for k in keys) if o is not None]

    def token(self, namespace: str, name: str) -> str:
        """Changes when :meth:`objects` would answer differently; unpacks nothing."""
        if self._ready(namespace) is None:
            return ""
        with self._lock:
            return ",".join(sorted(self._index.get((namespace, name), {}).values()))

    def _ready(self, namespace: str) -> KindWatch | None:
        watch = self._watches.get(None)  # the common case, without a lock: listed, allowed
        if watch is not None and watch.synced.is_set() and not watch.forbidden:
            return watch
        watch = self._started(None)
        watch.settled.wait(self._options.sync_wait)
        if watch.forbidden:
            watch = self._started(namespace)
        return watch if watch.ready(self._options.sync_wait) else None

    def _started(self, namespace: str | None) -> KindWatch:
        with self._lock:
            watch = self._watches.get(namespace)
            if watch is None:
                watch = KindWatch(self._kube, "v1", self._kind, namespace,
                                  options=self._options, on_event=self._indexed,
                                  stop=self._stop, metrics=self._metrics, shelf=self._shelf)
                self._watches[namespace] = watch
                threading.Thread(target=watch.run, name=f"watch-{self._kind.lower()}s",
                                 daemon=True).start()
            return watch

    def _indexed(self, kind: str, obj: Manifest) -> None:
        cluster, key = self._about(obj), object_key(obj)
        token = self._token(obj) if kind != "DELETED" else ""
        with self._lock:
            keys = self._index.setdefault(cluster, {})
            if kind == "DELETED":
                keys.pop(key, None)
            else:
                keys[key] = token
            if not keys:
                del self._index[cluster]
        self._on_event(kind, obj)


def _involved(event: Manifest) -> Key:
    about = event.get("involvedObject") or {}
    return str(about.get("namespace") or ""), str(about.get("name") or "")


def _cluster_label(pod: Manifest) -> Key:
    meta = pod.get("metadata") or {}
    return (str(meta.get("namespace") or ""),
            str((meta.get("labels") or {}).get(RAY_CLUSTER_LABEL, "")))


class WarningEvents(IndexedWatch):
    """The KubeRay operator's Warning Events about RayClusters, indexed by cluster.

    Health needs them to tell a rejected spec (``InvalidRayClusterSpec``: the operator
    writes no status) from one not yet observed. One watch with a field selector keeps
    only those Events, so answering costs no request and a new rejection triggers a
    refresh of the cluster's app like any other watch event.
    """

    cached = True

    def __init__(self, kube: Kube, *, options: WatchOptions, on_event: EventHandler,
                 stop: threading.Event, metrics: Metrics | None = None,
                 shelf: Shelf | None = None) -> None:
        super().__init__(kube, "Event", options=options, label_selector=None,
                         field_selector=REJECTIONS, about=_involved, token=event_token,
                         on_event=on_event, stop=stop, metrics=metrics, shelf=shelf)

    def about(self, namespace: str, name: str) -> list[Manifest]:
        """Copies of the Warning Events about RayCluster ``namespace/name``."""
        return self.objects(namespace, name)


class ClusterPods(IndexedWatch):
    """The Pods of every RayCluster (label ``ray.io/cluster``), indexed by cluster.

    A RayCluster's health reports Pods still on an older template (KubeRay rolls none
    by default, :mod:`gitops_ray.health.rollout`). One label-selected watch holds them,
    so the no-op pass asks the API server nothing, and a Pod created, replaced or deleted
    refreshes its cluster's app like any other watch event.
    """

    def __init__(self, kube: Kube, *, options: WatchOptions, on_event: EventHandler,
                 stop: threading.Event, metrics: Metrics | None = None,
                 shelf: Shelf | None = None) -> None:
        super().__init__(kube, "Pod", options=options, label_selector=RAY_CLUSTER_LABEL,
                         field_selector=None, about=_cluster_label, token=pod_token,
                         on_event=on_event, stop=stop, metrics=metrics, shelf=shelf)

    def of(self, namespace: str, name: str) -> list[Manifest]:
        """Copies of the Pods of RayCluster ``namespace/name`` (by name)."""
        return self.objects(namespace, name)


class ClusterServices(IndexedWatch):
    """The Services KubeRay made for RayClusters (label ``ray.io/cluster``), for the web page.

    Started by the first page that shows a RayCluster, never by a refresh: health does
    not read Services, so their events refresh nothing. Where RBAC denies Services (the
    chart grants list/watch on them, read-only), the tree simply shows none.
    """

    def __init__(self, kube: Kube, *, options: WatchOptions, stop: threading.Event,
                 metrics: Metrics | None = None, shelf: Shelf | None = None) -> None:
        super().__init__(kube, "Service", options=options, label_selector=RAY_CLUSTER_LABEL,
                         field_selector=None, about=_cluster_label, token=object_version,
                         on_event=lambda kind, obj: None, stop=stop, metrics=metrics,
                         shelf=shelf)

    def of(self, namespace: str, name: str) -> list[Manifest]:
        """Copies of the Services of RayCluster ``namespace/name`` (by name)."""
        return self.objects(namespace, name)


class RaySignals:
    """What a RayCluster's health reads besides the object, both from watches.

    The pipeline's :class:`~gitops_ray.reconcile.pipeline.EventSource`: the operator's
    Warning Events (:class:`WarningEvents`) and the cluster's Pods (:class:`ClusterPods`).
    """

    cached = True

    def __init__(self, warnings: WarningEvents, pods: ClusterPods) -> None:
        self.warnings, self._pods = warnings, pods

    def about(self, namespace: str, name: str) -> list[Manifest]:
        return self.warnings.about(namespace, name)

    def pods(self, namespace: str, name: str) -> list[Manifest]:
        return self._pods.of(namespace, name)

    def signals(self, namespace: str, name: str) -> str:
        return f"{self.warnings.token(namespace, name)}|{self._pods.token(namespace, name)}"


class NamedObjects:
    """A few objects of one kind and namespace, read by name whatever their labels.

    The pod-shape ConfigMaps belong to the platform team (the chart labels them as its
    own), so the app-label watches never see them. One watch per name, with the field
    selector ``metadata.name=<name>``, holds exactly that object: a read costs no request
    and ``on_event`` hears every edit, creation and deletion.
    """

    def __init__(self, kube: Kube, api_version: str, kind: str, namespace: str,
                 names: Iterable[str], *, options: WatchOptions, on_event: EventHandler,
                 stop: threading.Event, metrics: Metrics | None = None) -> None:
        self.kube, self.api_version, self.kind = kube, api_version, kind
        self.namespace, self.options = namespace, options
        self.watches = {name: KindWatch(
            kube, api_version, kind, namespace, on_event=on_event, stop=stop, metrics=metrics,
            options=dataclasses.replace(options, label_selector=None,
                                        field_selector=f"metadata.name={name}"))
            for name in names if name}

    def start(self) -> None:
        for name, watch in self.watches.items():
            threading.Thread(target=watch.run, name=f"watch-{self.kind}-{name}",
                             daemon=True).start()
            log.info("watch_started", kind=self.kind, namespace=self.namespace, name=name)

    def get(self, namespace: str, name: str) -> Manifest | None:
        """The object (``None``: it does not exist); a GET until the watch has listed."""
        watch = self.watches.get(name) if namespace == self.namespace else None
        if watch is not None and watch.ready(self.options.sync_wait):
            return watch.get(namespace, name)
        return self.kube.get(self.api_version, self.kind, name=name, namespace=namespace)


class LiveCache:
    """Live objects by (apiVersion, kind, namespace, name), served from watches.

    :meth:`get` is a :data:`gitops_ray.reconcile.pipeline.LiveSource` and :meth:`lookup`
    a :data:`gitops_ray.sync.engine.LiveLookup`; a kind is watched from the first time it
    is asked for.
    """

    def __init__(self, kube: Kube, *, on_event: EventHandler,
                 options: WatchOptions = DEFAULT_OPTIONS, metrics: Metrics | None = None
                 ) -> None:
        self.kube = kube
        self.options = options
        self._handler = on_event
        self._heard = 0  # events of every watch here (see generation)
        self._metrics = metrics
        self._watches: dict[tuple[str, str, str | None], KindWatch] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._local = threading.local()
        self.shelf = SHELF  # shared with git's objects (the pipeline's render cache)
        self.warnings = WarningEvents(kube, options=options, on_event=self._on_event,
                                      stop=self._stop, metrics=metrics, shelf=self.shelf)
        self.ray = RaySignals(self.warnings, ClusterPods(
            kube, options=options, on_event=self._on_event, stop=self._stop, metrics=metrics,
            shelf=self.shelf))
        self._named: list[NamedObjects] = []
        self.services = ClusterServices(kube, options=options, stop=self._stop,
                                        metrics=metrics, shelf=self.shelf)

    def _on_event(self, kind: str, obj: Manifest) -> None:
        with self._lock:  # after the watch stored the object: a reader of the new count
            self._heard += 1  # sees the change
        self._handler(kind, obj)

    def generation(self) -> int | None:
        """Moves with every event of the live objects, Events and Pods watched here.

        While it stays the same, nothing a comparison reads from this cache changed (the
        pipeline then hands back an app's last comparison whole, see
        :mod:`gitops_ray.reconcile.pipeline`). ``None`` in a :meth:`fresh` block, where
        lookups go to the API server instead.
        """
        return None if getattr(self._local, "fresh", False) else self._heard

    def watch_named(self, api_version: str, kind: str, namespace: str, names: Iterable[str],
                    *, on_event: EventHandler) -> NamedObjects:
        """Watches of the named objects (see :class:`NamedObjects`), stopped with ours.

        Started by :meth:`NamedObjects.start`, so the caller decides when events begin.
        """
        named = NamedObjects(self.kube, api_version, kind, namespace, names,
                             options=self.options, on_event=on_event, stop=self._stop,
                             metrics=self._metrics)
        with self._lock:
            self._named.append(named)
        return named

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
        if getattr(self._local, "fresh", False):
            return self._fetch(api_version, kind, namespace, name)
        return self.known(api_version, kind, namespace, name)

    def known(self, api_version: str, kind: str, namespace: str, name: str
              ) -> Manifest | None:
        """The cached object, else a GET (absence is always the API server's word).

        Even in a :meth:`fresh` block: for readers to whom an object a little behind is
        safe, as the sync's own lookups (its write carries the ``resourceVersion`` it
        read, and a 409 re-reads) and the records' (an update is checked the same way).
        """
        watch = self._watch_for(api_version, kind, namespace)
        if watch is not None and watch.ready(self.options.sync_wait):
            cached = watch.get(namespace, name)
            if cached is not None:
                return cached
        return self._fetch(api_version, kind, namespace, name)

    def cached(self, api_version: str, kind: str, namespace: str, name: str
               ) -> Manifest | None:
        """The object if a synced watch holds it; never a request (the web page's reads)."""
        watch = self._synced(api_version, kind, namespace)
        return watch.get(namespace, name) if watch is not None else None

    def version(self, api_version: str, kind: str, namespace: str, name: str) -> str | None:
        """The live ``resourceVersion`` if the cache knows it without a request.

        ``None`` when it does not: the kind is not watched yet, the object is not cached,
        or the caller is in a :meth:`fresh` block.
        """
        if getattr(self._local, "fresh", False):
            return None
        watch = self._synced(api_version, kind, namespace)
        return watch.version(namespace, name) if watch is not None else None

    def _synced(self, api_version: str, kind: str, namespace: str) -> KindWatch | None:
        """The synced watch that holds the kind in ``namespace`` (cluster-wide, if allowed)."""
        with self._lock:
            watch = self._watches.get((api_version, kind, None))
            if watch is not None and watch.forbidden:
                watch = self._watches.get((api_version, kind, namespace or None))
        return watch if watch is not None and watch.synced.is_set() else None

    def lookup(self, obj: Manifest) -> Manifest | None:
        """:meth:`known` of ``obj`` (the sync's :data:`~gitops_ray.sync.engine.LiveLookup`)."""
        meta = obj.get("metadata") or {}
        return self.known(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                          str(meta.get("namespace") or ""), str(meta.get("name", "")))

    @contextlib.contextmanager
    def fresh(self) -> Iterator[None]:
        """Within this block, lookups from the current thread GET from the API server."""
        previous = getattr(self._local, "fresh", False)
        self._local.fresh = True
        try:
            yield
        finally:
            self._local.fresh = previous

    def synced(self) -> bool:
        """Whether every watch has completed its first list (for ``/readyz``)."""
        return not self.unsynced()

    def unsynced(self) -> list[str]:
        """The watches that have not completed their first list, as ``apiVersion/kind``.

        A watch RBAC forbids counts as synced: its kind is then watched per namespace
        (those watches are listed here until they sync), or read with plain GETs.
        """
        with self._lock:
            watches = list(self._watches.items())
            named = [(f"{n.api_version}/{n.kind} {n.namespace}/{name}", w)
                     for n in self._named for name, w in n.watches.items()]
        kinds = [(f"{a}/{k}" + (f" in {ns}" if ns else ""), w) for (a, k, ns), w in watches]
        return sorted(shown for shown, w in [*kinds, *named]
                      if not (w.synced.is_set() or w.forbidden))

    def kinds(self) -> list[str]:
        with self._lock:
            return sorted(f"{a}/{k}" + (f" in {ns}" if ns else "")
                          for a, k, ns in self._watches)

    def stop(self) -> None:
        self._stop.set()

    def _watch_for(self, api_version: str, kind: str, namespace: str) -> KindWatch | None:
        """The watch that can serve an object of ``kind`` in ``namespace``.

        Cluster-wide, or, where RBAC only grants namespaces (the chart's
        ``rbac.clusterWide: false``), one per namespace.
        """
        cluster = self._watch(api_version, kind, None)
        if cluster is None:
            return None
        cluster.settled.wait(self.options.sync_wait)
        if not cluster.forbidden:
            return cluster
        return self._watch(api_version, kind, namespace) if namespace else None

    def _watch(self, api_version: str, kind: str, namespace: str | None) -> KindWatch | None:
        key = (api_version, kind, namespace)
        with self._lock:
            watch = self._watches.get(key)
        if watch is not None:
            return watch
        try:
            self.kube.resource(api_version, kind)
        except KubeError:
            return None  # CRD not installed (yet): plain GETs until it is
        return self._start(key)

    def _start(self, key: tuple[str, str, str | None]) -> KindWatch:
        with self._lock:
            if key in self._watches:
                return self._watches[key]
            watch = KindWatch(self.kube, *key, options=self.options, on_event=self._on_event,
                              stop=self._stop, metrics=self._metrics, shelf=self.shelf)
            self._watches[key] = watch
        threading.Thread(target=watch.run, name=f"watch-{key[1]}", daemon=True).start()
        log.info("watch_started", kind=key[1], api_version=key[0], namespace=key[2] or "*")
        return watch

    def _fetch(self, api_version: str, kind: str, namespace: str, name: str
               ) -> Manifest | None:
        try:
            return self.kube.get(api_version, kind, name=name, namespace=namespace or None)
        except UnknownKind:
            return None
