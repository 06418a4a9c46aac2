"""``gitops-ray sync``, ``status`` and ``wait``: one-shot operations, argocd-style.

``sync`` applies the selected apps once, several at a time (``--prune`` to delete what
left git, ``--dry-run`` to send everything with ``dryRun=All``); an app whose source,
render or sync fails is reported and the others carry on. Each app's results (a line per
object, then the app's outcome) are printed on stdout as soon as it finishes, while a live
display on stderr shows the apps still syncing (:mod:`gitops_ray.cli.progress`); a summary
line on stderr ends it. An app with sync waves is synced wave by wave: the command waits
in-process (polling every second) for each wave but the last to become healthy, up to
``--timeout`` seconds per app, then records the sync as failed (reason ``WaveTimeout``).
Each app is synced in the cluster its ``destination`` names
(:mod:`gitops_ray.cli.destinations`). Every sync that is not a dry run is recorded as the
controller records its own, failures included, so ``status`` never shows the Synced of an
earlier sync after a failed one.

An app synced from ``--apps DIR`` remembers that directory (and its finalizers) in its
record; ``sync --apps DIR --prune`` then deletes the apps whose Application left ``DIR``
as the controller does (objects too with Argo CD's resources finalizer, else orphaned;
the record goes). Only with ``--prune``, only for a complete directory (no ``--app``),
and only after the directory loaded.

``status`` lists the apps' recorded state like ``argocd app list``
(:mod:`gitops_ray.cli.apptable`, fitted to a terminal by :mod:`gitops_ray.cli.table`);
``--refresh`` (like ``argocd app get --refresh``) compares the selected apps with git and
the cluster now and records the result. ``wait`` blocks until apps are Synced and/or
Healthy and needs no controller: health is read from the live objects, sync status from
the record, or from a live comparison when the apps are selected
(``--repo``/``--apps``/``--local``). An app whose prune is still deleting objects is not
Synced yet; from the record, ``wait`` checks those objects itself
(:mod:`gitops_ray.reconcile.deletions`). Both fail fast on an app name nobody knows,
suggesting the closest one. Results go to stdout, progress and warnings to stderr.
"""

from __future__ import annotations

import json
import posixpath
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import click
import yaml

from gitops_ray.cli.apptable import Output, last_phase, table
from gitops_ray.cli.common import (
    EXIT_ERROR,
    CliCommand,
    Selection,
    app_options,
    check_known,
    connect,
    kube_options,
    select_apps,
    setting_option,
    shapes_options,
)
from gitops_ray.cli.delete import delete_recorded, report_teardown
from gitops_ray.cli.destinations import Destinations, recorded_destination
from gitops_ray.cli.diff import diff_options, error_text
from gitops_ray.cli.impact import LOUD, impact_text
from gitops_ray.cli.progress import Line, SyncDisplay
from gitops_ray.cli.table import terminal_width
from gitops_ray.errors import GitOpsRayError
from gitops_ray.health import HealthStatus
from gitops_ray.health.impact import Impact
from gitops_ray.heap import settling
from gitops_ray.packed import SHELF
from gitops_ray.reconcile.deletions import deletions_finished
from gitops_ray.reconcile.status import live_health, save_failed_sync, save_status, status_of
from gitops_ray.render.apps import Application, short_revision
from gitops_ray.render.memo import PARSES
from gitops_ray.settings import MAX_SYNC_PARALLELISM
from gitops_ray.sync import statuswrites
from gitops_ray.sync.appstatus import AppStatus, decode_status, encode_operation
from gitops_ray.sync.reasons import reason_of
from gitops_ray.sync.records import AppRecord, RecordStore
from gitops_ray.sync.request import SyncResult
from gitops_ray.sync.teardown import policy_of
from gitops_ray.types import ResourceAction, SyncStatus

POLL_SECONDS = 1.0
Status = dict[str, Any]


@click.command("sync", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@diff_options
@click.option("--prune", is_flag=True, help="Delete objects of the app that left git.")
@click.option("--dry-run", is_flag=True, help="Send every write with dryRun=All.")
@click.option("--parallel", default=4, show_default=True, type=click.IntRange(1, 32),
              help="Apps synced at the same time (each app's results are printed as it "
                   "finishes).")
@setting_option("sync.parallelism", type=click.IntRange(1, MAX_SYNC_PARALLELISM))
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait for sync waves (argocd.argoproj.io/sync-wave) to become "
                   "healthy before giving up; the sync then fails.")
def sync_command(prune: bool, dry_run: bool, parallel: int, sync_parallelism: int,
                 timeout: float, **opts: Any) -> None:
    """Apply the selected apps once."""
    began = time.monotonic()
    destinations = Destinations(opts, parallelism=sync_parallelism)  # each app in its cluster
    store = destinations.store
    selection = select_apps(destinations.source, opts)
    origin = _origin(opts)

    previews: dict[str, list[Line]] = {}  # --dry-run: what the operator will do, per app

    def sync_one(app: Application, display: SyncDisplay) -> SyncResult:
        progress = display.start(app.name)
        try:
            outcome = destinations.reconciler(app).sync_until_done(
                app, revision=selection.revision, local=selection.local, prune=prune,
                dry_run=dry_run, timeout=timeout, poll=POLL_SECONDS, progress=progress)
            result = outcome.result
            if dry_run:
                previews[app.name] = impact_lines(app.name, outcome.before.impacts)
            if outcome.unrecorded is not None:
                display.warn(_unrecorded(app.name, outcome.unrecorded))
        except GitOpsRayError as e:  # this app's input is bad: the others go on
            result = SyncResult(app.name, selection.revision or "").fail(
                error_text(e), reason_of(e), cause=e)
            if not dry_run:
                _record_failure(store, result, display)
        if origin and not dry_run:
            _remember_origin(store, app, origin, display)
        return result

    tally = Tally()
    # each app is rendered once: a remembered parse would never be asked for again, and
    # git's objects live until the command exits: packed whole, they unpack fastest
    with settling(), PARSES.disabled(), SHELF.whole(), \
            SyncDisplay(len(selection.apps)) as display, \
            ThreadPoolExecutor(parallel, thread_name_prefix="sync") as pool:
        futures = [pool.submit(sync_one, app, display) for app in selection.apps]
        for future in as_completed(futures):  # each app's results as soon as it is done
            result = future.result()
            tally.add(result)
            display.finish(result.app, report_lines(result, dry_run=dry_run)
                           + previews.get(result.app, []), failed=tally.failed)
    click.secho(tally.summary(time.monotonic() - began, dry_run=dry_run),
                fg="red" if tally.failed else "green", err=True)
    failed = bool(tally.failed)
    if origin and prune and not dry_run and not opts.get("app_names"):
        failed |= not _delete_removed(destinations, origin, {a.name for a in selection.apps})
    sys.exit(EXIT_ERROR if failed else 0)


def _origin(opts: dict[str, Any]) -> dict[str, str] | None:
    """Where the apps' Applications are (``--repo``, ``--apps``), as records keep it."""
    if not (opts.get("repo") and opts.get("apps_dir")):
        return None
    return {"repo": opts["repo"], "path": posixpath.normpath(opts["apps_dir"])}


def _remember_origin(store: RecordStore, app: Application, origin: dict[str, str],
                     display: SyncDisplay) -> None:
    fields = {**origin, "finalizers": list(app.finalizers)}
    try:
        store.update(app.name, lambda r: statuswrites.app_source(r, fields))
    except GitOpsRayError as e:
        display.warn(f"warning: app {app.name}: origin not recorded: {e}")


def _delete_removed(destinations: Destinations, origin: dict[str, str],
                    present: set[str]) -> bool:
    """Delete the apps synced from ``origin`` whose Application left it (True: all went).

    Each in the cluster its record names (:func:`~gitops_ray.cli.delete.delete_recorded`).
    """
    ok = True
    for name, record in sorted(destinations.store.list_apps().items()):
        status = record.app_status
        source = status.app_source or {}
        if name in present or {k: source.get(k) for k in origin} != origin:
            continue
        try:
            teardown, cascaded = delete_recorded(
                destinations, name, status,
                policy=policy_of(source.get("finalizers") or ()))
        except GitOpsRayError as e:  # its cluster does not answer: kept, said, retried
            click.secho(f"app {name}: not deleted: {e}", fg="red", err=True)
            ok = False
            continue
        report_teardown(teardown, cascade=cascaded)
        ok &= teardown.ok
    return ok


def _record_failure(store: RecordStore, result: SyncResult, display: SyncDisplay) -> None:
    try:
        save_failed_sync(store, result, result.message)
    except GitOpsRayError as e:  # the cluster is unreachable too: say so, keep the result
        display.warn(_unrecorded(result.app, e))


def _unrecorded(app: str, error: GitOpsRayError) -> str:
    return f"warning: app {app}: sync not recorded: {error}"


def _action_of(entry: dict[str, Any]) -> str:
    """The action, with a resource hook's type and phase: ``created (PreSync hook: Running)``."""
    action = str(entry.get("action", ""))
    if not entry.get("hookType"):
        return action
    phase = f": {entry['hookPhase']}" if entry.get("hookPhase") else ""
    return f"{action} ({entry['hookType']} hook{phase})"


def impact_lines(app: str, impacts: Sequence[Impact]) -> list[Line]:
    """``sync --dry-run``: what the operator will do with each changed Ray object."""
    return [Line(f"{app}: {impact_text(i)}", "red" if i.effect in LOUD else "yellow")
            for i in impacts]


def report_lines(result: SyncResult, *, dry_run: bool) -> list[Line]:
    """An app's results: a line per object (earlier waves' too), then the app's outcome."""
    entries = result.earlier + [r.as_dict() for r in result.resources]
    objects = [(str(r.get("key", "")), _action_of(r), str(r.get("message") or ""))
               for r in entries]
    lines = [Line("\t".join([result.app, key, action] + ([message] if message else [])))
             for key, action, message in objects]
    suffix = " (dry run)" if dry_run else ""
    phase = f"{result.phase} ({result.reason})" if result.reason else result.phase
    lines.append(Line(f"app {result.app}: {phase}{suffix} at {short_revision(result.revision)}"
                      + (f": {result.message}" if result.message else ""),
                      "green" if result.ok else "red"))
    return lines


CHANGES = frozenset({ResourceAction.CREATED, ResourceAction.CONFIGURED,
                     ResourceAction.PRUNED, ResourceAction.DELETING})
"""What counts as a change for the summary (an app with none is "unchanged")."""


@dataclass
class Tally:
    """How the apps of one ``sync`` went, for its summary line."""

    synced: int = 0
    failed: int = 0
    unchanged: int = 0

    def add(self, result: SyncResult) -> None:
        actions = [r.action for r in result.resources] + [
            str(r.get("action")) for r in result.earlier]
        if not result.ok:
            self.failed += 1
        elif any(a in CHANGES for a in actions):
            self.synced += 1
        else:
            self.unchanged += 1

    def summary(self, elapsed: float, *, dry_run: bool) -> str:
        total = self.synced + self.failed + self.unchanged
        return (f"{total} app(s): {self.synced} synced, {self.failed} failed, "
                f"{self.unchanged} unchanged in {elapsed:.1f}s"
                + (" (dry run)" if dry_run else ""))


# -- status -------------------------------------------------------------------------------

def status_row(name: str, status: AppStatus) -> dict[str, Any]:
    """One app of ``status -o json|yaml``: built here only, from the typed status.

    Each history entry is the object the record stores, its keys in the record's order.
    """
    return {"name": name, "sync": status.sync or SyncStatus.UNKNOWN.value,
            "health": status.health or HealthStatus.UNKNOWN.value,
            "healthMessage": status.health_message or "",
            "rolloutPending": list(status.rollout_pending or ()),
            "revision": status.revision or "", "error": status.error or "",
            "warnings": list(status.render_warnings or ()),
            "lastSync": last_phase(status),
            "reason": (status.operation.reason if status.operation else None) or "",
            "history": [dict(sorted(encode_operation(e).items())) for e in status.entries]}


def _selected(opts: dict[str, Any]) -> bool:
    """Whether the command was told where the apps are defined (so it can compare)."""
    return bool(opts.get("repo") or opts.get("local_dir"))


def refresh(destinations: Destinations, store: RecordStore, selection: Selection, *,
            record: bool, pinned: dict[str, str] | None = None) -> dict[str, Status]:
    """Compare the selected apps now (and record the result); the statuses by app.

    Each app in its destination cluster. ``pinned`` remembers each app's commit from the
    first round, so repeated rounds (``wait``) compare with one commit and cost no git
    request.
    """
    pins = {} if pinned is None else pinned
    out = {}
    for app in selection.apps:
        try:
            comparison = destinations.pipeline(app).compare(
                app, revision=pins.get(app.name, selection.revision), local=selection.local)
        except GitOpsRayError as e:
            message = error_text(e)
            out[app.name] = _save_failed(store, app.name, message) if record else \
                {"sync": SyncStatus.UNKNOWN.value, "error": message, "comparedAt": time.time()}
            continue
        if selection.local is None:
            pins[app.name] = comparison.revision
        if record:
            save_status(store, comparison)
        out[app.name] = store.load(app.name).status if record else status_of(comparison)
    return out


def _save_failed(store: RecordStore, name: str, error: str) -> Status:
    return store.update(name, lambda r: statuswrites.failed(r, error)).status


@click.command("status", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@click.option("--refresh", "refresh_now", is_flag=True,
              help="Compare with git and the cluster now (needs --repo/--apps or --local) "
                   "and record the result, instead of showing the last recorded state.")
@click.option("-o", "--output", type=click.Choice([o.value for o in Output]),
              default=Output.TABLE.value, show_default=True,
              help="wide: also the target revision, the last sync and why the app is in "
                   "its state; json/yaml: the recorded rows, for programs.")
@click.argument("apps", nargs=-1)
def status_command(refresh_now: bool, output: str, apps: tuple[str, ...],
                   **opts: Any) -> None:
    """List apps like argocd app list: sync status, health, revision, policy, conditions.

    On a terminal the table fits its width; piped, each app is one full line.
    """
    names = tuple(apps) + tuple(opts.get("app_names") or ())
    if refresh_now:
        destinations = Destinations(opts)
        selection = select_apps(destinations.source, {**opts, "app_names": names})
        statuses = refresh(destinations, destinations.store, selection, record=True)
    else:
        records = RecordStore(connect(opts), opts["control_namespace"]).list_apps()
        check_known(names, records)
        statuses = {n: r.status for n, r in records.items() if not names or n in names}
    _print_status(statuses, Output(output))


def _print_status(statuses: dict[str, Status], output: Output) -> None:
    if output in (Output.JSON, Output.YAML):
        rows = [status_row(n, decode_status(s)) for n, s in sorted(statuses.items())]
        click.echo(json.dumps(rows, indent=2) if output == Output.JSON
                   else yaml.safe_dump(rows, sort_keys=False), nl=output == Output.JSON)
        return
    width = terminal_width()
    wide = output == Output.WIDE
    headlines = {n: decode_status(s, headline=True) for n, s in statuses.items()}
    for line in table(headlines, wide=wide, width=width, now=time.time()):
        click.echo(line)
    if not wide:  # wide says it in MESSAGE; KubeRay rolls no Pods on a template change
        for name, status in sorted(headlines.items()):
            for pending in status.rollout_pending or ():
                _echo_note(f"{name}: rollout pending: {pending}", width)


def _echo_note(text: str, width: int | None) -> None:
    for line in textwrap.wrap(text, width, subsequent_indent="  ") if width else [text]:
        click.echo(line)


# -- wait ---------------------------------------------------------------------------------

Probe = Callable[[], dict[str, Status]]


@click.command("wait", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@click.option("--sync", "want_sync", is_flag=True, help="Wait until Synced.")
@click.option("--health", "want_health", is_flag=True, help="Wait until Healthy.")
@click.option("--suspended", "want_suspended", is_flag=True,
              help="Wait until Suspended (with --health: Healthy or Suspended), e.g. queued "
                   "in Kueue, as argocd app wait --suspended.")
@click.option("--timeout", default=300.0, show_default=True, type=float, help="Seconds.")
@click.argument("apps", nargs=-1, required=True)
def wait_command(want_sync: bool, want_health: bool, want_suspended: bool, timeout: float,
                 apps: tuple[str, ...], **opts: Any) -> None:
    """Wait until apps are Synced and/or Healthy (both when neither flag is given).

    Health is always read live; sync status too when the apps are selected with
    --repo/--apps or --local (else from the record a sync or the controller wrote).
    A Suspended app (a RayCluster or RayJob waiting for admission in a Kueue queue) is
    not Healthy: --health waits until Kueue admits it and it is ready, and its timeout
    says Kueue's reason; --suspended accepts Suspended (with --health, either).
    """
    if not (want_sync or want_health or want_suspended):
        want_sync = want_health = True
    wanted = ({HealthStatus.HEALTHY} if want_health else set()) | (
        {HealthStatus.SUSPENDED} if want_suspended else set())
    probe = _probe(opts, apps)
    deadline = time.monotonic() + timeout
    while True:
        statuses = {a: decode_status(s, headline=True) for a, s in probe().items()}
        pending = [a for a in apps if not _done(statuses[a], want_sync, wanted)]
        if not pending:
            click.echo(f"{', '.join(apps)}: done")
            return
        if time.monotonic() > deadline:
            click.secho(f"timed out after {timeout:.0f}s waiting for "
                        + ", ".join(_describe(a, statuses[a]) for a in pending),
                        fg="red", err=True)
            sys.exit(EXIT_ERROR)
        time.sleep(POLL_SECONDS)


def _probe(opts: dict[str, Any], apps: tuple[str, ...]) -> Probe:
    """How to read the apps' state each round; fails at once on unknown apps."""
    if _selected(opts):
        destinations = Destinations(opts)
        selection = select_apps(destinations.source, {**opts, "app_names": apps})  # or fail
        pinned: dict[str, str] = {}
        return lambda: refresh(destinations, destinations.store, selection, record=False,
                               pinned=pinned)
    destinations = Destinations(opts)
    store = destinations.store
    check_known(apps, store.list_apps())
    return lambda: {a: _recorded_with_live_health(destinations, store.load(a)) for a in apps}


def _recorded_with_live_health(destinations: Destinations, record: AppRecord) -> Status:
    """The record, with health read live in the cluster the record names."""
    kube = destinations.kube(recorded_destination(record.app_status))
    health = live_health(kube, record)
    status = {**record.status, "health": health.status.value, "healthMessage": health.message}
    if deletions_finished(record, kube):  # the record predates the end of its prune
        status["sync"] = "Synced"
    return status


def _done(status: AppStatus, want_sync: bool, wanted: set[HealthStatus]) -> bool:
    return ((not want_sync or status.sync == SyncStatus.SYNCED)
            and (not wanted or status.health in wanted))


def _describe(name: str, status: AppStatus) -> str:
    detail = status.error or status.health_message or ""
    return (f"{name} ({status.sync or 'Unknown'}, {status.health or 'Unknown'}"
            + (f": {detail}" if detail else "") + ")")


COMMANDS = [sync_command, status_command, wait_command]
