"""Live reads: what a comparison reads of the cluster, and how few requests that takes.

Split from the pipeline (issue 35): every read of a live object, its Events, Pods and
Kueue Workloads goes through :class:`LiveReads`. Without a cached live source (the CLI),
the objects of one app that share a kind and namespace are read with one paged LIST
(bounded: a namespace holding many more objects of the kind than the app has falls back
to one GET each), not one GET per object. With the watch cache, an object the cache does
not hold is read with a GET: a LIST of its namespace would also send every object the
cache does hold, and a fleet's cold sync, where namespaces fill while their apps are
compared, ran slower with one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from gitops_ray.health import awaits_operator
from gitops_ray.health.queued import waits_for_admission
from gitops_ray.kube import Kube, KubeError, UnknownKind
from gitops_ray.kube.workloads import workloads_in
from gitops_ray.reconcile.desired import DesiredObject
from gitops_ray.reconcile.impacts import ImpactReads
from gitops_ray.sync.request import Landed
from gitops_ray.types import Manifest, ResourceKey

LiveSource = Callable[[str, str, str, str], "Manifest | None"]
"""(apiVersion, kind, namespace, name) -> live object or None."""

LiveVersion = Callable[[str, str, str, str], "str | None"]
"""(apiVersion, kind, namespace, name) -> the live ``resourceVersion``, or None when only a
read of the object itself can tell (the watch cache answers this from memory)."""

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


def reads_events(key: ResourceKey) -> bool:
    """Whether health reads Events and Pods beside the object (a RayCluster's does)."""
    return key.kind == "RayCluster" and key.group == "ray.io"


class HealthReads(NamedTuple):
    """What an object's health reads besides the object, and the memo token for them."""

    events: Sequence[Manifest]
    pods: Sequence[Manifest]
    workloads: Sequence[Manifest]
    signals: str


def _unknown_version(api_version: str, kind: str, namespace: str, name: str) -> None:
    return None


class LiveReads:
    """How one pipeline reads the cluster: live objects, versions, Events, Pods, Workloads."""

    def __init__(self, kube: Kube, live: LiveSource | None, version: LiveVersion | None,
                 events: EventSource | None) -> None:
        self.kube = kube
        self.live = live or self.get
        self.listing = live is None  # no cache: LIST an app's objects per kind and namespace
        self.version = version or _unknown_version
        self.events: EventSource = events or ClusterEvents(kube)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
        """A plain GET (None: absent, or no such kind)."""
        try:
            return self.kube.get(api_version, kind, name=name, namespace=namespace or None)
        except UnknownKind:
            return None

    def live_of(self, desired: DesiredObject, landed: Landed | None,
                snapshot: Mapping[ResourceKey, Manifest | None]) -> Manifest | None:
        """The live object of ``desired``: as the sync left it, as LISTed, or read now."""
        if landed is not None:
            return landed.live
        if desired.key in snapshot:
            return snapshot[desired.key]
        return self.live(*desired.coordinates)

    def snapshot(self, desired: Iterable[DesiredObject]) -> dict[ResourceKey, Manifest | None]:
        """Live objects of ``desired`` read by LIST, per kind and namespace (module doc).

        Only without a cached live source, only for groups of :data:`LIST_AT_LEAST` or
        more; a group whose LIST is refused or too long is left out (GETs answer it).
        """
        if not self.listing:
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

    def signals(self, key: ResourceKey, events: Sequence[Manifest],
                pods: Sequence[Manifest]) -> str:
        """The part of the memo key for what health reads besides the object itself.

        A cached source answers from its index (nothing unpacked); otherwise it is
        derived from the Events and Pods just read.
        """
        if not reads_events(key):
            return ""
        if self.events.cached:
            return self.events.signals(key.namespace, key.name)
        return f"{events_token(events)}|{pods_token(pods)}"

    def health_reads(self, key: ResourceKey, live: Manifest | None,
                     landed: Landed | None) -> HealthReads:
        """The Events, Pods and Workloads ``live``'s health reads, and their token.

        None for an object the sync just created (without the watch cache): any there
        are name an earlier object of the same name.
        """
        fresh = landed is not None and landed.created and not self.events.cached
        events = () if fresh else self.events_about(key, live)
        pods = () if fresh else self.pods_of(key, live)
        workloads = self.workloads_of(live)
        signals = self.signals(key, events, pods)
        if live is not None and waits_for_admission(live):
            signals += "|workloads:" + workloads_token(workloads)
        return HealthReads(events, pods, workloads, signals)

    def events_about(self, key: ResourceKey, live: Manifest | None) -> Sequence[Manifest]:
        """The Events a RayCluster's health reads (none for other kinds)."""
        if not reads_events(key):
            return ()
        if not self.events.cached and (live is None or not awaits_operator(live)):
            return ()
        return self.events.about(key.namespace, key.name)

    def workloads_of(self, live: Manifest | None) -> Sequence[Manifest]:
        """Kueue's Workloads beside a queued object waiting for admission (none for others).

        Read on every pass while it waits: its memo's signals then carry them
        (:func:`workloads_token`), so Kueue's changing reason is seen and a pass that
        reuses nothing else still reads them; once admitted, nothing is read.
        """
        if live is None or not waits_for_admission(live):
            return ()
        return workloads_in(self.kube, str(live["metadata"].get("namespace") or ""))

    def pods_of(self, key: ResourceKey, live: Manifest | None) -> Sequence[Manifest]:
        """A RayCluster's Pods, for a rollout the operator has not made (none for others)."""
        if not reads_events(key) or (not self.events.cached and live is None):
            return ()
        return self.events.pods(key.namespace, key.name)

    def impact_reads(self, read: Mapping[ResourceKey, Manifest | None],
                     landed: Mapping[ResourceKey, Landed]) -> ImpactReads:
        """How :func:`~gitops_ray.reconcile.impacts.impacts_of` reads live Ray objects.

        A changed object's whole live object (read by this pass if it was) and its Pods.
        """
        def live(key: ResourceKey, api_version: str) -> Manifest | None:
            if key in landed:
                return landed[key].live
            if key in read:
                return read[key]
            return self.live(api_version, key.kind, key.namespace, key.name)
        return ImpactReads(live, self.events.pods)
