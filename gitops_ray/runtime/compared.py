"""What the last comparison of each app showed, kept in memory for the web page.

Why: the app's record holds sync status, health and one row per resource, but not the
diff itself (a record is a ConfigMap: 1 MiB, read by everyone who may read ConfigMaps in
the control namespace) and not git's objects, which the worker-group view needs for
git's ``replicas``. The controller compares every app on every replica anyway, so each
replica remembers, per app, from its last comparison:

* git's Ray objects (RayCluster, RayJob, RayService): the pipeline's own packed
  :class:`~gitops_ray.reconcile.pipeline.DesiredObject` s, shared with its render cache,
  so keeping them costs references, not copies;
* the out-of-sync resources' two sides, **Secret values masked before they are kept**
  (:func:`gitops_ray.diff.format.masked`) and packed, at most
  :data:`MAX_DIFF_RESOURCES` per app and :data:`MAX_DIFF_BYTES` over all apps (the
  least recently compared apps' diffs are dropped first and the page says so). The text
  is made only when someone looks (:meth:`LastComparisons.diff_text`), redacted, and cut
  at :data:`MAX_DIFF_LINES`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

from gitops_ray.diff.compare import ResourceDiff
from gitops_ray.diff.format import masked, unified
from gitops_ray.health.workergroups import CLUSTER_SPEC
from gitops_ray.packed import pack, unpack
from gitops_ray.reconcile.pipeline import Comparison, DesiredObject
from gitops_ray.redact import redact
from gitops_ray.types import ResourceKey, SyncStatus

MAX_DIFF_RESOURCES = 10  # out-of-sync resources whose diff is kept, per app
MAX_DIFF_BYTES = 16 * 1024 * 1024  # packed diff sides kept, over all apps
MAX_DIFF_LINES = 400  # lines of diff text shown per resource


@dataclass(frozen=True)
class KeptDiff:
    """One out-of-sync resource: its reason and both sides, masked and packed."""

    key: ResourceKey
    reason: str
    desired: bytes | None
    live: bytes | None

    @property
    def size(self) -> int:
        return len(self.desired or b"") + len(self.live or b"")


@dataclass(frozen=True)
class Compared:
    """What one app's last comparison showed (see the module docstring)."""

    revision: str
    at: float
    ray_objects: tuple[DesiredObject, ...] = ()
    diffs: tuple[KeptDiff, ...] = ()
    out_of_sync: int = 0  # resources out of sync, including those not kept
    dropped: bool = False  # the diffs went to stay within MAX_DIFF_BYTES
    size: int = field(default=0, compare=False)

    def desired(self) -> dict[ResourceKey, DesiredObject]:
        return {d.key: d for d in self.ray_objects}


def remembered(comparison: Comparison, *, now: float | None = None) -> Compared:
    """The part of ``comparison`` worth keeping (pure but for packing)."""
    ray = tuple(d for d in comparison.desired
                if d.key.group == "ray.io" and d.key.kind in CLUSTER_SPEC)
    out = [r for r in comparison.diff.resources if r.status == SyncStatus.OUT_OF_SYNC]
    diffs = tuple(_kept(r) for r in out[:MAX_DIFF_RESOURCES])
    return Compared(comparison.revision, time.time() if now is None else now, ray, diffs,
                    len(out), size=sum(d.size for d in diffs))


def _kept(rd: ResourceDiff) -> KeptDiff:
    desired, live = masked(rd)
    return KeptDiff(rd.key, rd.reason, pack(desired) if desired is not None else None,
                    pack(live) if live is not None else None)


class LastComparisons:
    """Per app, the last :class:`Compared`; diff bytes bounded over all apps (LRU)."""

    def __init__(self, *, max_bytes: int = MAX_DIFF_BYTES) -> None:
        self._max_bytes = max_bytes
        self._apps: OrderedDict[str, Compared] = OrderedDict()
        self._sources: dict[str, weakref.ref[Comparison]] = {}  # what each was kept from
        self._bytes = 0
        self._lock = threading.Lock()

    def remember(self, app: str, comparison: Comparison) -> None:
        """Keep what ``comparison`` showed; only its time if it is the one kept last.

        The pipeline hands the same comparison back while nothing it was made of changed
        (:mod:`gitops_ray.reconcile.pipeline`): a no-op refresh keeps nothing anew.
        """
        with self._lock:
            kept = self._apps.get(app)
            source = self._sources.get(app)
            same = source is not None and source() is comparison
        if kept is not None and same and not kept.dropped:
            self.put(app, dataclasses.replace(kept, at=time.time()), comparison)
            return
        self.put(app, remembered(comparison), comparison)

    def put(self, app: str, compared: Compared, source: Comparison | None = None) -> None:
        with self._lock:
            self._drop(app)
            self._apps[app] = compared
            if source is not None:
                self._sources[app] = weakref.ref(source)
            self._bytes += compared.size
            self._trim()

    def forget(self, app: str) -> None:
        with self._lock:
            self._drop(app)

    def get(self, app: str) -> Compared | None:
        with self._lock:
            return self._apps.get(app)

    def _drop(self, app: str) -> None:
        self._sources.pop(app, None)
        old = self._apps.pop(app, None)
        if old is not None:
            self._bytes -= old.size

    def _trim(self) -> None:
        """Drop the diffs of the least recently compared apps until within the budget."""
        for name in list(self._apps):
            if self._bytes <= self._max_bytes:
                return
            entry = self._apps[name]
            if entry.size:
                self._bytes -= entry.size
                self._apps[name] = Compared(entry.revision, entry.at, entry.ray_objects,
                                            (), entry.out_of_sync, dropped=True)


def diff_text(kept: KeptDiff) -> str:
    """The unified diff of one kept resource: redacted, at most :data:`MAX_DIFF_LINES`."""
    desired = unpack(kept.desired) if kept.desired is not None else None
    live = unpack(kept.live) if kept.live is not None else None
    text = unified(ResourceDiff(kept.key, SyncStatus.OUT_OF_SYNC, kept.reason, desired, live))
    lines = redact(text).splitlines()
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines"]
    return "\n".join(lines)
