"""What the web page shows, as plain data: the app list and one app, from records and caches.

Why separate from the HTTP handlers (:mod:`gitops_ray.runtime.web.site`): these are pure
functions of what the controller already holds (an app's record status, live objects,
git's Ray objects, the RayClusters' Pods and Services, the kept diff), so they are unit
tested, and ``bench/web_page.py`` times them with the template at 1,000 RayClusters
without a server. The templates only loop and print; every decision (what a time reads
like, which history fields exist, the tree's order) is made here.

Records are read generically: a history entry shows its ``id`` and commit ``subject`` when
it has them, whatever else it carries is ignored, and a malformed field shows as empty.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from gitops_ray.health.fields import mapping, text
from gitops_ray.health.workergroups import WorkerGroupView
from gitops_ray.moments import ago, utc_text
from gitops_ray.reconcile.tree import TreeNode, resource_tree
from gitops_ray.render.apps import short_revision
from gitops_ray.sync.appstatus import AppStatus, AutoSync, Operation, ResourceRow, decode_status
from gitops_ray.types import Manifest, ResourceKey

PAGE_SIZE = 100  # apps per page of the list
RESOURCES_PAGE = 50  # an app's own resources per page of the app page (with their children)
MAX_QUERY = 200  # characters of a name filter
SHORT_SHA = 12
MAX_IMPACTS = 50  # impact rows of an app page (the controller predicts at most that many)


@dataclass(frozen=True)
class AppRow:
    """One line of the app list."""

    name: str
    href: str
    sync: str
    health: str
    revision: str
    operation: str  # the last operation's phase ("" when none)
    finished: When
    error: str = ""


@dataclass(frozen=True)
class When:
    """A time as people read it (``3m ago``) and exactly (``2026-01-05 10:12:41 UTC``)."""

    ago: str = ""
    exact: str = ""


@dataclass(frozen=True)
class HistoryEntry:
    """One past operation, with the fields it happens to have."""

    id: str
    revision: str
    phase: str
    message: str
    subject: str
    finished: When
    initiated_by: str
    trigger: str
    rollback_of: str = ""  # the id this entry rolled back to
    rollback_to: int | None = None  # its deployment id, when the page offers Rollback to it


@dataclass(frozen=True)
class TreeRow:
    """One line of the resource tree (depth-first, indented by ``depth``)."""

    depth: int
    node: TreeNode


@dataclass(frozen=True)
class GroupTable:
    """The worker-group view of one Ray object."""

    title: str
    groups: tuple[WorkerGroupView, ...]


@dataclass(frozen=True)
class DiffBlock:
    """The kept diff of one out-of-sync resource."""

    key: str
    reason: str
    text: str


@dataclass(frozen=True)
class Diffs:
    """The last comparison's diff as kept in memory (see :mod:`gitops_ray.runtime.compared`)."""

    blocks: tuple[DiffBlock, ...] = ()
    out_of_sync: int = 0
    dropped: bool = False  # kept diffs went to stay within the memory budget
    known: bool = False  # this replica has compared the app since it started


@dataclass(frozen=True)
class Page:
    """A slice of a sorted list, and where the neighbouring slices start."""

    items: tuple[str, ...]
    number: int
    pages: int
    total: int
    query: str
    previous: str = ""
    next: str = ""


@dataclass(frozen=True)
class Slice:
    """Which of an app's resources one page shows (in the record's order)."""

    rows: tuple[ResourceRow, ...] = ()
    number: int = 1
    pages: int = 1
    total: int = 0
    previous: str = ""
    next: str = ""
    size: int = RESOURCES_PAGE

    @property
    def first(self) -> int:
        return (self.number - 1) * self.size + 1 if self.rows else 0


def resource_slice(status: AppStatus, *, number: int, size: int = RESOURCES_PAGE) -> Slice:
    """Page ``number`` (from 1) of the record's resource rows; links are ``?page=N``."""
    rows = status.rows
    pages = max(1, math.ceil(len(rows) / size))
    number = min(max(1, number), pages)
    return Slice(tuple(rows[(number - 1) * size:number * size]), number, pages, len(rows),
                 previous=f"?page={number - 1}" if number > 1 else "",
                 next=f"?page={number + 1}" if number < pages else "", size=size)


@dataclass(frozen=True)
class HookRow:
    """One resource hook of the current (or last) operation."""

    hook_type: str
    kind: str
    namespace: str
    name: str
    phase: str
    message: str


def hook_rows(status: AppStatus) -> tuple[HookRow, ...]:
    """The hooks the running operation (else the last one) ran, in the order they ran."""
    op = status.current or Operation()
    return tuple(HookRow(text(r.get("hookType")), text(r.get("kind")), text(r.get("namespace")),
                         text(r.get("name")), text(r.get("hookPhase")), text(r.get("message")))
                 for r in op.resources or () if r.get("hookType"))


@dataclass(frozen=True)
class AppPage:
    """Everything the app page prints."""

    name: str
    summary: tuple[tuple[str, str], ...]
    conditions: tuple[tuple[str, str], ...]
    tree: tuple[TreeRow, ...]
    groups: tuple[GroupTable, ...]
    diffs: Diffs
    resources: Slice
    operation: HistoryEntry | None
    history: tuple[HistoryEntry, ...]
    error: str = ""
    warnings: tuple[str, ...] = field(default=())
    paused: str = ""  # the pause of automated sync (a rollback's), "" when there is none
    hooks: tuple[HookRow, ...] = field(default=())  # the operation's resource hooks


def app_href(name: str) -> str:
    """The app page's path; every character but unreserved ones is percent-encoded."""
    return "/apps/" + quote(name, safe="")


# -- times ---------------------------------------------------------------------------------

def when(value: object, *, now: float) -> When:
    """An epoch number or an RFC 3339 string as :class:`When` (empty when unreadable)."""
    seconds = _epoch(value)
    if seconds is None:
        return When()
    return When(ago(now - seconds), utc_text(seconds))


def _epoch(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value > 0 else None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.replace(tzinfo=parsed.tzinfo or datetime.UTC).timestamp()
    return None


# -- the app list --------------------------------------------------------------------------

def page_of(names: Sequence[str], *, number: int, query: str = "",
            size: int = PAGE_SIZE) -> Page:
    """Page ``number`` (from 1) of the sorted ``names`` containing ``query``."""
    query = query[:MAX_QUERY]
    matching = sorted(n for n in names if query in n) if query else sorted(names)
    pages = max(1, math.ceil(len(matching) / size))
    number = min(max(1, number), pages)
    items = tuple(matching[(number - 1) * size:number * size])
    suffix = f"&q={quote(query, safe='')}" if query else ""
    return Page(items, number, pages, len(matching), query,
                previous=f"/?page={number - 1}{suffix}" if number > 1 else "",
                next=f"/?page={number + 1}{suffix}" if number < pages else "")


def app_row(name: str, status: Mapping[str, Any], *, now: float, error: str = "") -> AppRow:
    """The list's line for one app, from its record's status."""
    typed = decode_status(status, headline=True)
    op = typed.operation or Operation()
    return AppRow(name=name, href=app_href(name), sync=typed.sync or "Unknown",
                  health=typed.health or "Unknown",
                  revision=short_revision(typed.revision or "", SHORT_SHA),
                  operation=op.phase or "", finished=when(op.finished_at, now=now),
                  error=error or typed.error or "")


# -- one app -------------------------------------------------------------------------------

def history_entry(op: Operation, *, now: float) -> HistoryEntry:
    """One operation as the page shows it (a field of another type shows as empty).

    ``initiatedBy`` is who started it (a user name); an object there (as Argo CD's
    ``{"username": ...}``) is read for its ``username``.
    """
    user = op.initiated_by or text(mapping(op.extra.get("initiatedBy")).get("username"))
    return HistoryEntry(id=_id(op.id if op.id is not None else op.extra.get("id")),
                        revision=short_revision(op.revision or "", SHORT_SHA),
                        phase=op.phase or "", message=op.message or "",
                        subject=op.subject or "",
                        finished=when(op.finished_at or op.started_at, now=now),
                        initiated_by=user, trigger=op.trigger or "",
                        rollback_of=_id(op.rollback_of))


def rollback_targets(history: Sequence[HistoryEntry], ops: Sequence[Operation]
                     ) -> tuple[HistoryEntry, ...]:
    """``history`` with Rollback offered on every deployment but the newest entry.

    Why not the newest: it is what the app runs (or, if it failed, what it tried), and a
    rollback to it would be a plain sync. Only an entry with an integer deployment id and
    a revision qualifies, the ids ``gitops-ray rollback`` accepts.
    """
    return tuple(dataclasses.replace(h, rollback_to=_deployment(op) if i else None)
                 for i, (h, op) in enumerate(zip(history, ops, strict=True)))


def _deployment(op: Operation) -> int | None:
    return op.id if op.revision else None


def _id(value: object) -> str:
    """A history id: Argo CD's are integers, a string is shown as it is."""
    if isinstance(value, bool):
        return ""
    return str(value) if isinstance(value, int | str) else ""


def summary(typed: AppStatus, *, now: float) -> tuple[tuple[str, str], ...]:
    """The app's headline facts, in the order ``argocd app get`` prints them."""
    compared = when(typed.compared_at, now=now)
    rows = (("Sync", typed.sync or "Unknown"),
            ("Health", typed.health or "Unknown"),
            ("Health message", typed.health_message or ""),
            ("Revision", typed.revision or ""),
            ("Repository", typed.repo_url or ""),
            ("Path", typed.path or ""),
            ("Target revision", typed.target_revision or ""),
            ("Destination namespace", typed.destination_namespace or ""),
            ("Sync policy", typed.sync_policy or ""),
            ("Self heal", _yes_no(typed.self_heal)),
            ("Auto-sync", _auto_sync(typed.auto_sync or AutoSync())),
            ("Compared", f"{compared.ago} ({compared.exact})" if compared.exact else ""),
            *(("Impact", line) for line in _impacts(typed)))
    return tuple((k, v) for k, v in rows if v)


def _impacts(status: AppStatus) -> list[str]:
    """What the operator will do with each changed Ray object (the controller's record).

    :attr:`AppStatus.impacts`: a malformed entry does not hide the others.
    """
    return [f"{text(e.get('key'))}: {text(e.get('message'))}" for e in status.impacts
            if text(e.get("key")) and text(e.get("message"))][:MAX_IMPACTS]


def _auto_sync(auto: AutoSync) -> str:
    """What automation decided last: ``"sync status is Synced"``, ``"paused: ..."``."""
    action, reason = auto.action or "", auto.reason or ""
    if action in ("", "none"):  # nothing to do: the reason says why
        return reason
    return f"{action}: {reason}" if reason else action


def _yes_no(value: object) -> str:
    return "" if value is None else ("yes" if value is True else "no")


def app_page(name: str, status: AppStatus, *, resources: Slice,
             live: Mapping[ResourceKey, Manifest], desired: Mapping[ResourceKey, Manifest],
             candidates: Sequence[Manifest], diffs: Diffs, now: float, error: str = ""
             ) -> AppPage:
    """The app page's data for one :class:`Slice` of its resources (see the module doc)."""
    nodes = resource_tree(resources.rows, live, desired, candidates)
    history = status.entries
    return AppPage(
        name=name, summary=summary(status, now=now),
        conditions=tuple((c.type or "", c.message or "") for c in status.conditions or ()),
        tree=tuple(TreeRow(d, n) for node in nodes for d, n in node.walk()),
        groups=tuple(GroupTable(f"{n.kind} {n.namespace}/{n.name}", n.worker_groups)
                     for n in nodes if n.worker_groups),
        diffs=diffs, resources=resources,
        operation=history_entry(status.operation, now=now) if status.operation else None,
        history=rollback_targets([history_entry(h, now=now) for h in history], history),
        error=error or status.error or "",
        warnings=tuple(text(w) for w in status.warnings or ()),
        paused=pause.message if (pause := status.pause) else "",
        hooks=hook_rows(status))


def live_keys(rows: Sequence[ResourceRow]) -> list[tuple[ResourceKey, str]]:
    """Each resource row's key and apiVersion (to look the live object up)."""
    return [(row.resource_key, row.api_version) for row in rows]


