"""AppProject ``syncWindows``: when an app may be synced, as Argo CD decides it.

Why: platform teams make auto-sync acceptable with sync windows (no deployments to the
GPU clusters during business hours, syncs only in the maintenance window); an app that
gitops-ray synced through a deny window would break that promise the moment it is
handed over. The rules are ported from v3.2.11's ``pkg/apis/application/v1alpha1/types.go``
(``SyncWindows.Matches``, ``active``, ``inactiveAllows``, ``CanSync``, ``hasDeny``;
unchanged in v3.6.1, which adds ``syncOverrun``, not modelled: a running sync goes on):

* **Matching** (``Matches``): a window applies to an app when one of its
  ``applications`` globs matches the app's name, one of its ``clusters`` globs the
  destination's ``name`` or ``server`` (as the Application writes them), or one of its
  ``namespaces`` globs the destination namespace; with ``andOperator: true`` every list
  that is set must match. A window with none of the three lists applies to nothing.
* **Active**: the cron ``schedule`` fired less than ``duration`` ago (robfig/cron's
  five fields, the clock shifted by the ``timeZone``'s current UTC offset, as Argo CD
  does: a window does not follow a daylight-saving change until it happens).
* **CanSync**: an active deny window closes the app (a manual sync passes only when
  *every* active deny window has ``manualSync: true``); else an active allow window opens
  it; else, when the app has allow windows at all, the time outside them is closed (a
  manual sync passes only when all of them have ``manualSync``); else it is open.
  A schedule or duration that does not parse closes the app ("invalid sync windows").

Cron: APScheduler's ``CronTrigger`` computes the next fire time. robfig/cron differs from
APScheduler's own crontab reading in three ways, handled here while each field is
checked with robfig's rules: day-of-week ``0`` is Sunday (APScheduler: Monday), so the
field is handed over as day names; when both day-of-month and day-of-week are
restricted a day matching *either* fires (two triggers, the earlier fire wins); ``?``
means ``*``. robfig gives up after five years (a schedule such as ``0 0 30 2 *`` never
fires), and Argo CD then counts the window as always active; so does this module.

Pure: every function takes ``now`` (epoch seconds), so tests walk a window open and shut
without a clock.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

from gitops_ray.errors import ConfigError
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.godur import InvalidDuration, parse_duration
from gitops_ray.render.apps import Application

MAX_WINDOWS = 64
"""More windows in one AppProject are refused (``ConfigError``): bounded evaluation."""
MAX_SCHEDULE = 200
"""A longer ``schedule`` is invalid (robfig accepts any length; nobody needs it)."""
_SEARCH_STEPS = 256  # window edges walked to find when a closed app opens
_YEAR_LIMIT = 5  # robfig/cron's Next gives up after five years
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_RANGE = re.compile(r"^(?P<low>[*?]|\w+)(?:-(?P<high>\w+))?(?:/(?P<step>\w+))?$")


class WindowKind(StrEnum):
    """A sync window's ``kind``."""

    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True)
class SyncWindow:
    """One entry of ``spec.syncWindows`` (``index``: its place, ``argocd proj windows``' ID)."""

    index: int
    kind: str
    schedule: str
    duration: str
    applications: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    manual_sync: bool = False
    time_zone: str = ""
    and_operator: bool = False
    description: str = ""

    @property
    def label(self) -> str:
        """How messages name it: ``deny window 0 (schedule '0 9 * * 1-5', duration 8h)``."""
        zone = f", timeZone {self.time_zone}" if self.time_zone not in ("", "UTC") else ""
        return (f"{self.kind} window {self.index} (schedule '{self.schedule}', "
                f"duration {self.duration}{zone})")


class WindowError(ValueError):
    """A window whose schedule or duration does not parse (Argo CD's message)."""


# -- parsing the AppProject's field --------------------------------------------------------

def parse_windows(value: object, where: str) -> tuple[SyncWindow, ...]:
    """``spec.syncWindows``; :class:`ConfigError` naming the field when a type is wrong.

    A schedule or duration that does not parse is kept: Argo CD accepts the project and
    refuses syncs ("invalid sync windows"), and so does :func:`verdict`.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list, not {type(value).__name__}")
    if len(value) > MAX_WINDOWS:
        raise ConfigError(f"{where}: {len(value)} windows, at most {MAX_WINDOWS} are supported")
    return tuple(_window(i, raw, f"{where}[{i}]") for i, raw in enumerate(value))


def _window(index: int, raw: object, where: str) -> SyncWindow:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping, not {type(raw).__name__}")
    text = {key: _text(raw.get(key), f"{where}.{key}")
            for key in ("kind", "schedule", "duration", "timeZone", "description")}
    flags = {key: _flag(raw.get(key), f"{where}.{key}") for key in ("manualSync", "andOperator")}
    lists = {key: _globs(raw.get(key), f"{where}.{key}")
             for key in ("applications", "namespaces", "clusters")}
    return SyncWindow(index, text["kind"], text["schedule"], text["duration"],
                      lists["applications"], lists["namespaces"], lists["clusters"],
                      flags["manualSync"], text["timeZone"], flags["andOperator"],
                      text["description"])


def _text(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string, not {type(value).__name__}")
    return value


def _flag(value: object, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: must be true or false, not {type(value).__name__}")
    return value


def _globs(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of strings")
    return tuple(value)


# -- which windows apply to an app ---------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """What ``Matches`` looks at: the app's name and its destination as written."""

    app: str
    namespace: str
    server: str = ""
    name: str = ""


def matching(windows: Iterable[SyncWindow], target: Target) -> tuple[SyncWindow, ...]:
    """``SyncWindows.Matches``: the windows that apply to ``target``, in project order."""
    return tuple(w for w in windows if _matches(w, target))


def _matches(w: SyncWindow, t: Target) -> bool:
    checks = [(w.applications, (t.app,)), (w.clusters, tuple(v for v in (t.name, t.server) if v)),
              (w.namespaces, (t.namespace,))]
    results = [any(_glob(p, v) for p in patterns for v in values)
               for patterns, values in checks if patterns]
    if not results:
        return False
    return all(results) if w.and_operator else any(results)


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Callable[[str], bool] | None:
    try:
        return compile_glob(pattern)
    except GlobError:
        return None


def _glob(pattern: str, value: str) -> bool:
    """``globMatch(pattern, value, false)``: ``*`` matches all, a bad pattern nothing."""
    if pattern == "*":
        return True
    compiled = _compiled(pattern)
    return compiled is not None and compiled(value)


# -- when a window is active ---------------------------------------------------------------

@dataclass(frozen=True)
class _Cron:
    """A robfig/cron schedule, as the APScheduler fields it is evaluated with."""

    fields: tuple[str, str, str, str, str]  # minute, hour, day, month, day_of_week
    either_day: bool  # both day fields restricted: a day matching either one fires
    zone: str  # a CRON_TZ=/TZ= prefix


@functools.lru_cache(maxsize=512)
def _parse_cron(schedule: str) -> _Cron:
    """The schedule with robfig/cron v3's rules (five fields, no descriptors)."""
    if len(schedule) > MAX_SCHEDULE:
        raise WindowError(f"cannot parse schedule '{schedule[:MAX_SCHEDULE]}...': too long")
    spec, zone = schedule.strip(), ""
    if spec.startswith(("TZ=", "CRON_TZ=")):
        zone, _, spec = spec.partition("=")[2].partition(" ")
        _zone(zone, strict=True, schedule=schedule)
    parts = spec.split()
    if spec.startswith("@"):
        raise WindowError(f"cannot parse schedule '{schedule}': parser does not accept "
                          f"descriptors: {spec}")
    if len(parts) != 5:
        raise WindowError(f"cannot parse schedule '{schedule}': expected exactly 5 fields, "
                          f"found {len(parts)}: {parts}")
    bounds = ((0, 59, ()), (0, 23, ()), (1, 31, ()), (1, 12, _MONTHS), (0, 6, _DAYS))
    try:
        sets = [_field(part, low, high, names) for part, (low, high, names)
                in zip(parts, bounds, strict=True)]
    except ValueError as e:
        raise WindowError(f"cannot parse schedule '{schedule}': {e}") from e
    (minute, _), (hour, _), (day, day_star), (month, _), (dow, dow_star) = sets
    return _Cron((_list(minute), _list(hour), _list(day), _list(month),
                  ",".join(_DAYS[d] for d in sorted(dow))),
                 not day_star and not dow_star, zone)


def _list(values: set[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def _field(text: str, low: int, high: int, names: Sequence[str]) -> tuple[set[int], bool]:
    """Robfig's ``getField``: the values a field allows, and whether it is a ``*``."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise ValueError(f"failed to parse field: {part}")
        step = _number(match["step"], ()) if match["step"] else 1
        if match["low"] in ("*", "?"):
            if match["high"]:
                raise ValueError(f"too many hyphens: {part}")
            start, end, star = low, high, star or step <= 1
        else:
            start = _number(match["low"], names, low)
            end = _number(match["high"], names, low) if match["high"] else \
                (high if match["step"] else start)
        if start < low or end > high or start > end or step <= 0:
            raise ValueError(f"value out of range ({low}-{high}) or not a positive step: "
                             f"{part}")
        values.update(range(start, end + 1, step))
    return values, star


def _number(text: str, names: Sequence[str], first: int = 0) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + first
    if not text.isdigit():
        raise ValueError(f"failed to parse int from {text}")
    return int(text)


@functools.lru_cache(maxsize=512)
def _triggers(cron: _Cron, year: int) -> tuple[CronTrigger, ...]:
    minute, hour, day, month, dow = cron.fields
    years = f"{year - 1}-{year + _YEAR_LIMIT}"

    zone = ZoneInfo(cron.zone) if cron.zone else UTC  # robfig's CRON_TZ: its wall clock

    def trigger(day_: str, dow_: str) -> CronTrigger:
        return CronTrigger(year=years, month=month, day=day_, day_of_week=dow_, hour=hour,
                           minute=minute, second=0, timezone=zone)
    if cron.either_day:
        return trigger(day, "*"), trigger("*", dow)
    return (trigger(day, dow),)


def _next(cron: _Cron, after: datetime) -> datetime | None:
    """The first fire strictly after ``after`` (whole seconds), as robfig's ``Next``.

    ``None`` (Go's zero time) when there is none within five years.
    """
    start = after.replace(microsecond=0) + timedelta(seconds=1)
    fires = [f for t in _triggers(cron, start.year)
             if (f := t.get_next_fire_time(None, start)) is not None]
    return min(fires) if fires else None


def _zone(name: str, *, strict: bool = False, schedule: str = "") -> ZoneInfo | None:
    """``time.LoadLocation``: ``""`` and ``UTC`` are UTC; unknown: UTC (Argo CD warns)."""
    if name in ("", "UTC"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        if strict:
            raise WindowError(f"cannot parse schedule '{schedule}': provided bad location "
                              f"{name}: {e}") from e
        return None


def _offset(zone_name: str, now: float) -> timedelta:
    zone = _zone(zone_name)
    if zone is None:
        return timedelta(0)
    return zone.utcoffset(datetime.fromtimestamp(now, UTC)) or timedelta(0)


def _duration(window: SyncWindow) -> timedelta:
    try:
        nanos = parse_duration(window.duration)
    except InvalidDuration as e:
        raise WindowError(f"cannot parse duration '{window.duration}': {e}") from e
    return timedelta(microseconds=nanos // 1000)


def is_active(window: SyncWindow, now: float) -> bool:
    """``SyncWindow.active``: the schedule fired within ``duration`` before ``now``."""
    cron, duration = _parse_cron(window.schedule), _duration(window)
    local = datetime.fromtimestamp(now, UTC) + _offset(window.time_zone, now)
    fire = _next(cron, local - duration)
    return fire is None or fire < local


def _edges(window: SyncWindow, now: float) -> list[float]:
    """The next times after ``now`` the window may open or close (for :func:`opens_at`)."""
    cron, duration = _parse_cron(window.schedule), _duration(window)
    shift = _offset(window.time_zone, now)
    local = datetime.fromtimestamp(now, UTC) + shift
    out = []
    for base, plus in ((local, timedelta(0)), (local - duration, duration)):
        fire = _next(cron, base)
        if fire is not None:
            out.append((fire + plus - shift).timestamp())
    return [t for t in out if t > now]


# -- may the app sync now? -----------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """``CanSync`` for one app at one time, and why not."""

    can_sync: bool
    closed_by: tuple[SyncWindow, ...] = ()  # the active deny windows, or the inactive allows
    error: str = ""  # a window that does not parse (Argo CD: "invalid sync windows")
    opens_at: float | None = None  # when an automated sync may run again (None: unknown)

    @property
    def message(self) -> str:
        """What the condition and the refusal say (``""`` when it may sync)."""
        if self.can_sync:
            return ""
        if self.error:
            return f"sync blocked: invalid sync windows: {self.error}"
        denies = [w for w in self.closed_by if w.kind == WindowKind.DENY]
        which = "; ".join(w.label for w in self.closed_by)
        head = (f"sync blocked by active {which}" if denies
                else f"sync blocked outside the allow windows: {which}")
        when = "" if self.opens_at is None else \
            f"; opens at {datetime.fromtimestamp(self.opens_at, UTC):%Y-%m-%dT%H:%M:%SZ}"
        return head + when


OPEN = Verdict(True)


def verdict(windows: Sequence[SyncWindow], now: float, *, manual: bool) -> Verdict:
    """``CanSync(manual)`` of the windows that match the app (:func:`matching`).

    A closed verdict for an automated sync also says when the app opens (the first
    window edge after ``now`` at which :func:`verdict` allows it), if it does within the
    window edges walked.
    """
    try:
        closed = _closed_by(windows, now, manual=manual)
    except WindowError as e:
        return Verdict(False, error=str(e))
    if closed is None:
        return OPEN
    return Verdict(False, closed, opens_at=None if manual else opens_at(windows, now))


def _closed_by(windows: Sequence[SyncWindow], now: float, *, manual: bool
               ) -> tuple[SyncWindow, ...] | None:
    """The windows that close the app at ``now``; ``None``: it may sync (``CanSync``)."""
    if not windows:
        return None
    active = [w for w in windows if is_active(w, now)]
    denies = [w for w in active if w.kind == WindowKind.DENY]
    if denies:
        return None if manual and all(w.manual_sync for w in denies) else tuple(denies)
    if any(w.kind == WindowKind.ALLOW for w in active):
        return None
    inactive = [w for w in windows if w.kind == WindowKind.ALLOW and w not in active]
    if inactive:
        return None if manual and all(w.manual_sync for w in inactive) else tuple(inactive)
    return None


def opens_at(windows: Sequence[SyncWindow], now: float) -> float | None:
    """When an automated sync may run next, walking the windows' edges; ``None``: not soon."""
    at = now
    for _ in range(_SEARCH_STEPS):
        try:
            edges = [t for w in windows for t in _edges(w, at)]
            if not edges:
                return None
            edge = min(edges)
            at = edge + 1  # a window is active strictly after its fire (robfig)
            if _closed_by(windows, at, manual=False) is None:
                return edge
        except WindowError:
            return None
    return None


def for_app(windows: Sequence[SyncWindow], app: Application) -> tuple[SyncWindow, ...]:
    """The windows of ``app``'s project that apply to it (``Matches``)."""
    dest = app.destination
    return matching(windows, Target(app.name.rpartition("/")[2], dest.namespace,
                                    server=dest.server, name=dest.name))


def describe(windows: Sequence[SyncWindow], now: float) -> list[dict[str, Any]]:
    """The windows of an app as ``get``/``status`` show them (JSON-able, one per window)."""
    out = []
    for w in windows:
        try:
            state = "active" if is_active(w, now) else "inactive"
        except WindowError:
            state = "invalid"
        out.append({"id": w.index, "kind": w.kind, "schedule": w.schedule,
                    "duration": w.duration, "timeZone": w.time_zone or "UTC",
                    "manualSync": w.manual_sync, "state": state})
    return out
