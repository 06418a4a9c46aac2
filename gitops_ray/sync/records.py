"""Per-app inventory and status, persisted in the cluster so a restart loses nothing.

Each app has one ConfigMap in the control namespace (label ``gitops-ray.io/app``) holding:

* ``inventory``: every object the app applied (apiVersion, kind, namespace, name). Prune
  works from this list, never from a label query, so an object is only ever deleted if
  *this* app applied it (Flux's inventory model; Argo CD's tracking-id check is added on
  top at prune time).
* ``status``: revision, sync status, health, the last operation and the history of
  operations (at least 50, within a byte budget, deployments numbered:
  :mod:`gitops_ray.sync.history`), as shown by ``gitops-ray status`` and ``history``,
  the running operation of a sync that waits for a sync wave to become healthy
  (``operationState``), and a pause of automated sync after a rollback
  (:mod:`gitops_ray.reconcile.pause`).
* ``applied`` (after a sync, only when there is something to say): per object our last
  apply left as it is, a *mark*: the ``resourceVersion`` it left and a digest of what was
  applied (:func:`applied_mark`). A refresh adds the marks of objects a no-op dry run
  proved are exactly what that apply leaves (:mod:`gitops_ray.reconcile.pipeline`).
  A replica that takes the app over, or a restarted one,
  finds an object whose live ``resourceVersion`` and desired content still match its mark
  in sync without a server-side dry run, and does not re-apply it. None in an app of
  more than :data:`MAX_APPLIED_MARKS` such objects (the record would grow too big), and
  none for Secrets (a digest of a Secret's content would let anyone who may read the
  record test guesses of its values).

Writes carry the ConfigMap's ``resourceVersion`` and are retried on conflict, so two
writers (a CLI sync during a controller run) cannot lose each other's update; an update
that changes nothing writes nothing. Reads that only look (``load``: the inventory for a
diff, ``wait``) may go through a ``lookup`` such as the controller's watch cache, so a
no-op pass of every app costs no request; a read-modify-write starts from the last copy
the store wrote or read and reads again when the server says that copy is stale.

**What a look costs.** A comparison needs a record's inventory and marks, on every
refresh of every app; decoding them each time (and the status, which a comparison does
not read) is work for nothing while the record is unchanged. So a store with a ``lookup``
remembers the decoded inventory and marks of the last :data:`DECODED_RECORDS` records by
``resourceVersion`` (a new version decodes again) and hands out copies; the status is
decoded only for callers that ask for it (:meth:`RecordStore.load_status`, a pause check
decodes it only when its text names a pause).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gitops_ray import FIELD_MANAGER, __version__, jsonio
from gitops_ray.kube import Conflict, Kube, NotFound
from gitops_ray.redact import redact
from gitops_ray.sync.appstatus import AppStatus, decode_status
from gitops_ray.sync.tracking import APP_LABEL, app_label_value
from gitops_ray.types import Manifest, ResourceKey, split_api_version

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,200}[a-z0-9])?$")


@dataclass(frozen=True, order=True)
class InventoryEntry:
    """One object an app applied; enough to find and delete it later."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Manifest) -> InventoryEntry:
        meta = obj.get("metadata") or {}
        return cls(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                   str(meta.get("namespace") or ""), str(meta.get("name", "")))

    @property
    def key(self) -> ResourceKey:
        group, _ = split_api_version(self.api_version)
        return ResourceKey(group, self.kind, self.namespace, self.name)


@dataclass
class AppRecord:
    """What is persisted for one app."""

    inventory: list[InventoryEntry] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, str] = field(default_factory=dict)  # str(ResourceKey) -> mark

    @property
    def app_status(self) -> AppStatus:
        """The status, typed (:mod:`gitops_ray.sync.appstatus`): what views read.

        ``status`` is the JSON object as stored, changed only by
        :mod:`gitops_ray.sync.statuswrites`.
        """
        return decode_status(self.status)


MAX_APPLIED_MARKS = 1000
"""Objects of one app whose applied mark is kept (~100 bytes each in the record)."""
_MARK_FORMAT = f"{FIELD_MANAGER}/{__version__}"  # another version may apply differently


def applied_mark(content: str, resource_version: str) -> str:
    """``<resourceVersion>/<digest>``: our apply of ``content`` left this version.

    ``content`` is what the comparison keys its memo by (desired object and ignore
    rules); the digest also names this release, whose apply it describes.
    """
    digest = hashlib.sha256(f"{_MARK_FORMAT}\0{content}".encode()).hexdigest()[:24]
    return f"{resource_version}/{digest}"


def markable(key: ResourceKey) -> bool:
    """Whether ``key`` may have an applied mark (not a Secret: see the module doc)."""
    return not (key.group == "" and key.kind == "Secret")


def record_name(app: str) -> str:
    """The ConfigMap name for an app (hashed when the app name is not a DNS name)."""
    candidate = f"gitops-ray-app.{app}"
    if _DNS_NAME.match(candidate) and len(candidate) <= 253:
        return candidate
    return f"gitops-ray-app.{hashlib.sha256(app.encode()).hexdigest()[:16]}"


KNOWN_RECORDS = 64
"""Records whose last copy a store remembers: the apps being synced now, with room to
spare (a copy is at most a record's byte budget, 256 KiB; usually a few KiB)."""

DECODED_RECORDS = 4096
"""Records whose decoded inventory and marks a store with a lookup remembers (by version)."""

Lookup = Callable[[str, str, str, str], "Manifest | None"]
"""(apiVersion, kind, namespace, name) -> the object or None, e.g. from a watch cache."""


class RecordStore:
    """Reads and writes app records in ``namespace`` (created on first write if missing).

    **What an update costs.** The store remembers the last copy of a record it wrote or
    read from the server (:data:`KNOWN_RECORDS` of them, most recent first), and an update
    starts from that copy (else from the ``lookup``'s, e.g. the watch cache's, if it has
    one): its ``resourceVersion`` is the write's precondition, so a copy
    someone else has overtaken costs a 409 and a fresh read, never a lost update. A sync
    writes its app's record two or three times in a row, so most of those writes need no
    read. An update that changes nothing writes nothing; that is decided on a copy read
    from the server in that update only (a remembered copy may be behind).
    """

    def __init__(self, kube: Kube, namespace: str, *, lookup: Lookup | None = None) -> None:
        self.kube = kube
        self.namespace = namespace
        self._lookup = lookup or self._get
        self._known: collections.OrderedDict[str, Manifest | None] = collections.OrderedDict()
        self._written: set[str] = set()  # names whose known copy is this store's own write
        self._known_lock = threading.Lock()
        self._decoded: collections.OrderedDict[str, tuple[str, _Listed]] = \
            collections.OrderedDict()  # name -> (resourceVersion, inventory and marks)

    def load(self, app: str, *, status: bool = True) -> AppRecord:
        """The app's record, through ``lookup`` (possibly a little behind the server).

        Without a ``lookup`` (the CLI), the copy this store itself last wrote (or read
        back unchanged) is as good as a cache: a sync reads back nothing it wrote. A copy
        it only read is not, so ``wait``, which writes nothing, reads the server every
        time. ``status=False``: the inventory and marks only (the status stays empty),
        decoded once per version of the record (see the module docstring).
        """
        cm = self._look(app)
        if cm is None:
            return AppRecord()
        if status:
            return _decode(cm)
        listed = self._listed(record_name(app), cm)
        return AppRecord(inventory=list(listed.inventory), applied=dict(listed.applied))

    def load_status(self, app: str, *, naming: str = "") -> dict[str, Any]:
        """The app's recorded status, or ``{}`` (not decoded) if it does not hold ``naming``.

        Most records name no pause: a pause check decodes none of them.
        """
        text = status_text(self._look(app))
        if not text or naming not in text:
            return {}
        return _status(text)

    def _look(self, app: str) -> Manifest | None:
        name = record_name(app)
        if self._lookup == self._get:
            with self._known_lock:
                written, cm = name in self._written, self._known.get(name)
            if written:
                return cm
        return self._lookup("v1", "ConfigMap", self.namespace, name)

    def _listed(self, name: str, cm: Manifest) -> _Listed:
        version = _version(cm)
        with self._known_lock:
            known = self._decoded.get(name)
        if known is not None and version is not None and known[0] == version:
            return known[1]
        listed = _list(cm)
        if version is not None:
            with self._known_lock:
                self._decoded[name] = (version, listed)
                self._decoded.move_to_end(name)
                while len(self._decoded) > DECODED_RECORDS:
                    self._decoded.popitem(last=False)
        return listed

    def read(self, app: str) -> AppRecord:
        """The app's record from the API server, never a cache (before deleting by it)."""
        cm = self._get("v1", "ConfigMap", self.namespace, record_name(app))
        return _decode(cm) if cm else AppRecord()

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
        found = self.kube.get(api_version, kind, name=name, namespace=namespace)
        if kind == "ConfigMap" and namespace == self.namespace:
            self._remember(name, found)
        return found

    def list_apps(self, wanted: Callable[[str], bool] | None = None) -> dict[str, AppRecord]:
        """All records in the namespace (or those of the ``wanted`` apps), by app name.

        Only our record ConfigMaps: an app's own ConfigMaps carry the same label, and the
        control namespace may be an app's destination too. Only the records returned are
        decoded (a replica taking over a few shards wants a few of thousands).
        """
        items, _ = self.kube.list("v1", "ConfigMap", self.namespace, label_selector=APP_LABEL)
        return {str(cm["data"]["app"]): _decode(cm) for cm in items
                if _is_record(cm) and (wanted is None or wanted(str(cm["data"]["app"])))}

    def update(self, app: str, change: Callable[[AppRecord], None], *,
               attempts: int = 5) -> AppRecord:
        """Read-modify-write the record with optimistic concurrency (see the class doc)."""
        name = record_name(app)
        for attempt in range(attempts):
            fresh, cm = self._base(name, remembered_only=attempt == 0)
            record = _decode(cm) if cm else AppRecord()
            change(record)
            data = _data(app, record)
            if cm is not None and cm.get("data") == data:
                if fresh:
                    return record  # the change changed nothing: no write
                fresh, cm = True, self._read(name)  # unchanged only on a remembered copy
                record = _decode(cm) if cm else AppRecord()
                change(record)
                data = _data(app, record)
                if cm is not None and cm.get("data") == data:
                    return record
            try:
                self._write(app, data, cm)
                return record
            except (Conflict, NotFound):  # overtaken (or deleted) since that copy
                self._forget(name)
                continue
        raise Conflict(f"record of app {app!r} kept changing; gave up after {attempts} tries")

    def _base(self, name: str, *, remembered_only: bool) -> tuple[bool, Manifest | None]:
        """(read from the server just now?, the copy to start from)."""
        with self._known_lock:
            if remembered_only and name in self._known:
                return False, self._known[name]
        if remembered_only and self._lookup != self._get:  # e.g. a shard just taken over
            cached = self._lookup("v1", "ConfigMap", self.namespace, name)
            if cached is not None:
                return False, cached
        return True, self._read(name)

    def _read(self, name: str) -> Manifest | None:
        return self._get("v1", "ConfigMap", self.namespace, name)

    def _remember(self, name: str, cm: Manifest | None, *, written: bool = False) -> None:
        with self._known_lock:
            ours = written or (name in self._written and _version(cm) is not None
                               and _version(cm) == _version(self._known.get(name)))
            self._known[name] = cm
            self._known.move_to_end(name)
            (self._written.add if ours else self._written.discard)(name)
            while len(self._known) > KNOWN_RECORDS:
                self._written.discard(self._known.popitem(last=False)[0])

    def _forget(self, name: str) -> None:
        with self._known_lock:
            self._known.pop(name, None)
            self._written.discard(name)

    def delete(self, app: str) -> bool:
        """Forget the app (its Application was deleted); ``False`` if it had no record."""
        self._forget(record_name(app))
        return self.kube.delete("v1", "ConfigMap", name=record_name(app), namespace=self.namespace)

    def _write(self, app: str, data: dict[str, str], current: Manifest | None) -> None:
        body: Manifest = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": record_name(app), "namespace": self.namespace,
                         "labels": {APP_LABEL: app_label_value(app)}},
            "data": data,
        }
        if current is None:
            written = self._create(body)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            written = self.kube.replace(body, field_manager=FIELD_MANAGER)
        self._remember(record_name(app), written, written=True)

    def _create(self, body: Manifest) -> Manifest:
        """Create the record; create the namespace too, only if the server says it is missing.

        The namespace is not read first: in a cluster it exists (it is the controller's
        own), and its ServiceAccount has no business reading Namespaces (the chart grants
        none). Only a CLI run against a fresh cluster pays for the 404.
        """
        try:
            return self.kube.create(body, field_manager=FIELD_MANAGER)
        except NotFound:
            with contextlib.suppress(Conflict):  # created concurrently: fine
                self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": self.namespace}},
                                 field_manager=FIELD_MANAGER)
            return self.kube.create(body, field_manager=FIELD_MANAGER)


def _data(app: str, record: AppRecord) -> dict[str, str]:
    """The ConfigMap's ``data`` for ``record``: the same record always gives the same text.

    orjson (:mod:`gitops_ray.jsonio`), keys sorted: an app of 100 RayClusters has a status
    entry and a mark per object, and ``json.dumps`` of them was a fifth of a commit's CPU.
    """
    inventory = [{"api_version": e.api_version, "kind": e.kind, "namespace": e.namespace,
                  "name": e.name} for e in sorted(record.inventory)]
    data = {"app": app, "inventory": jsonio.dumps(inventory).decode(),
            "status": redact(jsonio.dumps(record.status, sort_keys=True).decode())}
    if record.applied:
        data["applied"] = jsonio.dumps(record.applied, sort_keys=True).decode()
    return data


def _version(cm: Manifest | None) -> str | None:
    version = (cm or {}).get("metadata", {}).get("resourceVersion")
    return str(version) if version is not None else None


def _is_record(cm: Manifest) -> bool:
    data = cm.get("data") or {}
    return bool(data.get("app")) and cm["metadata"]["name"] == record_name(str(data["app"]))


@dataclass(frozen=True)
class _Listed:
    """A record's inventory and marks, decoded; shared, so only ever copied out."""

    inventory: tuple[InventoryEntry, ...]
    applied: dict[str, str]


def _list(cm: Manifest) -> _Listed:
    data = cm.get("data") or {}
    entries = [InventoryEntry(**e) for e in jsonio.loads(data.get("inventory") or "[]")]
    return _Listed(tuple(entries), _marks(data.get("applied")))


def status_text(cm: Manifest | None) -> str:
    """The recorded status of a record ConfigMap, as the JSON text it is stored as."""
    return str(((cm or {}).get("data") or {}).get("status") or "")


def _status(text: str) -> dict[str, Any]:
    status = jsonio.loads(text or "{}")
    return status if isinstance(status, dict) else {}


def _decode(cm: Manifest) -> AppRecord:
    listed = _list(cm)
    return AppRecord(inventory=list(listed.inventory),
                     status=_status(status_text(cm)),
                     applied=listed.applied)


def _marks(text: str | None) -> dict[str, str]:
    """The ``applied`` marks; anything but a map of strings reads as none.

    A mark is only ever a reason to skip work, so a damaged one costs work, not
    correctness.
    """
    try:
        marks = jsonio.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(marks, dict):
        return {}
    return {k: v for k, v in marks.items() if isinstance(k, str) and isinstance(v, str)}
