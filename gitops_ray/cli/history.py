"""``gitops-ray history``, ``rollback`` and ``resume``: see what was deployed, go back to it.

``history APP`` lists the app's recorded operations, newest first, as ``argocd app
history`` does but with the failures too: the deployment id (``-`` for an operation that
deployed nothing: failed, dry run, partial), when it finished, the revision, the phase,
the commit's subject (recorded at sync time: showing the history needs no git) and the
message. ``-o json|yaml`` gives RFC 3339 times, not the record's epoch seconds.

``rollback APP ID`` syncs the revision of deployment ``ID`` with the same app options as
``sync`` (:mod:`gitops_ray.reconcile.rollback`); an app with automated sync is paused
until ``--pause-until``/``--pause-for`` or ``resume APP``. ``resume APP`` ends the pause;
the controller then syncs git's revision again.
"""

from __future__ import annotations

import datetime
import getpass
import json
import sys
import time
from typing import Any

import click
import yaml

from gitops_ray.cli.common import (
    EXIT_ERROR,
    CliCommand,
    app_options,
    check_known,
    connect,
    kube_options,
    select_apps,
    shapes_options,
)
from gitops_ray.cli.destinations import Destinations
from gitops_ray.cli.diff import diff_options
from gitops_ray.cli.table import Column, render, terminal_width
from gitops_ray.cli.views import human_time
from gitops_ray.errors import ConfigError
from gitops_ray.moments import rfc3339
from gitops_ray.reconcile.pause import MAX_UNTIL, Pause
from gitops_ray.reconcile.rollback import RollbackOutcome, RollbackRequest, resume, rollback
from gitops_ray.render.apps import short_revision
from gitops_ray.settings import parse_duration
from gitops_ray.sync.appstatus import Operation
from gitops_ray.sync.records import AppRecord, RecordStore

POLL_SECONDS = 1.0
MESSAGE_WIDTH = 80  # characters of a message in the table (all of it with -o json)


# -- history ------------------------------------------------------------------------------

@click.command("history", cls=CliCommand)
@kube_options
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]),
              default="table", show_default=True)
@click.argument("app")
def history_command(app: str, output: str, **opts: Any) -> None:
    """Show the app's sync history, newest first, with deployment ids for rollback."""
    store = RecordStore(connect(opts), opts["control_namespace"])
    record = _record(store, app)
    status = record.app_status
    if output == "table":
        _print_table(status.entries, now=time.time())
    elif output == "json":
        click.echo(json.dumps([entry_view(e) for e in status.entries], indent=2))
    else:
        click.echo(yaml.safe_dump([entry_view(e) for e in status.entries], sort_keys=False),
                   nl=False)
    _say_paused(app, status.pause)


def _record(store: RecordStore, app: str) -> AppRecord:
    """The app's record; an error suggesting the closest app when it has none."""
    record = store.read(app)
    if not record.status and not record.inventory:
        check_known([app], store.list_apps())
    return record


def entry_view(op: Operation) -> dict[str, Any]:
    """A history entry as shown: its fields with RFC 3339 times, and its resources.

    The one place ``history -o json|yaml`` is built: the fields it has (``id`` always,
    ``null`` for no deployment), times as RFC 3339, never the record's epoch seconds.
    """
    fields = (("id", op.id), ("revision", op.revision), ("subject", op.subject),
              ("phase", op.phase), ("reason", op.reason), ("message", op.message),
              ("trigger", op.trigger), ("rollbackOf", op.rollback_of),
              ("automated", op.automated), ("initiatedBy", op.initiated_by),
              ("dryRun", op.dry_run))
    view: dict[str, Any] = {k: v for k, v in fields if v not in (None, "")}
    view["id"] = op.id
    for key, when in (("startedAt", op.started_at), ("finishedAt", op.finished_at)):
        if when:
            view[key] = rfc3339(float(when))
    if op.resources is not None:
        view["resources"] = [{k: r.get(k, "") for k in ("key", "action", "message")}
                             for r in op.resources]
    elif op.resource_count is not None:
        view["resourceCount"] = op.resource_count
    return view


COLUMNS = (Column("ID"), Column("DATE", shrink=3, minimum=10), Column("REVISION"),
           Column("PHASE", shrink=4, minimum=8), Column("SUBJECT", shrink=2, minimum=12),
           Column("MESSAGE", shrink=1, minimum=20, wrap=True))
"""The history table's columns (the one table renderer, :mod:`gitops_ray.cli.table`)."""


def _print_table(entries: tuple[Operation, ...], *, now: float) -> None:
    rows = [["-" if op.id is None else str(op.id), _date(op, now),
             short_revision(op.revision or ""),
             (op.phase or "") + (f" ({op.reason})" if op.reason else ""), op.subject or "",
             _message(op)] for op in entries]
    for line in render(COLUMNS, rows, terminal_width()):
        click.echo(line)


def _date(op: Operation, now: float) -> str:
    """``2026-05-01 12:00:00 UTC (3h ago)``."""
    return human_time(op.finished_at or op.started_at, now)


def _message(op: Operation) -> str:
    text = op.message or ""
    if op.rollback_of is not None:
        text = f"rollback to #{op.rollback_of}" + (f": {text}" if text else "")
    return text if len(text) <= MESSAGE_WIDTH else text[:MESSAGE_WIDTH - 1] + "…"


def _say_paused(app: str, pause: Pause | None) -> None:
    if pause is not None and pause.active(time.time()):
        click.secho(f"app {app}: {pause.message}; gitops-ray resume {app} resumes it now",
                    fg="yellow", err=True)


# -- rollback -----------------------------------------------------------------------------

@click.command("rollback", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@diff_options
@click.option("--prune", is_flag=True, help="Delete objects of the app that the old "
                                            "revision does not have.")
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait for sync waves to become healthy, as for sync.")
@click.option("--pause-until", help="With automated sync: pause it until this time "
                                    "(RFC 3339, e.g. 2026-05-01T18:00:00Z) instead of "
                                    "until gitops-ray resume.")
@click.option("--pause-for", help="With automated sync: pause it for this long (e.g. 2h, "
                                  "30m) instead of until gitops-ray resume.")
@click.argument("app")
@click.argument("history_id", metavar="ID", type=int)
def rollback_command(app: str, history_id: int, **opts: Any) -> None:
    """Sync APP at the revision of its history entry ID (see gitops-ray history).

    An app with automated sync is paused, so the controller does not sync git's revision
    again: until resumed (gitops-ray resume APP), or --pause-until / --pause-for.
    """
    pause_until, pause_for = opts.pop("pause_until"), opts.pop("pause_for")
    prune, timeout = bool(opts.pop("prune")), float(opts.pop("timeout"))
    if opts.get("local_dir") is not None:
        raise ConfigError("rollback syncs a revision of the app's repository: use --repo "
                          "(with --apps or --path), not --local")
    now = time.time()
    until = pause_end(pause_until, pause_for, now=now)
    destinations = Destinations(opts)
    [application] = select_apps(destinations.source, {**opts, "app_names": (app,)}).apps
    if until is not None and not application.sync_policy.automated:
        click.secho(f"warning: app {app} has no automated sync: there is nothing to pause",
                    fg="yellow", err=True)
    request = RollbackRequest(history_id, now, pause_until=until, prune=prune,
                              timeout=timeout, poll=POLL_SECONDS, by=_user())
    done = rollback(destinations.reconciler(application), application, request)
    _report(app, history_id, done)
    sys.exit(0 if done.result.ok else EXIT_ERROR)


def pause_end(until: str | None, duration: str | None, *, now: float) -> float | None:
    """When the pause ends (``None``: when resumed), from ``--pause-until``/``--pause-for``."""
    if until and duration:
        raise ConfigError("give --pause-until or --pause-for, not both")
    if duration:
        try:
            seconds = parse_duration(duration)
        except ValueError as e:
            raise ConfigError(f"--pause-for: {e}") from None
        if seconds <= 0:
            raise ConfigError("--pause-for: give a positive duration, e.g. 2h")
        if now + seconds >= MAX_UNTIL:
            raise ConfigError("--pause-for: too long (omit it to pause until resumed)")
        return now + seconds
    if not until:
        return None
    try:
        moment = datetime.datetime.fromisoformat(until)
    except ValueError:
        raise ConfigError(f"--pause-until: not an RFC 3339 time: {until!r} "
                          "(e.g. 2026-05-01T18:00:00Z)") from None
    if moment.tzinfo is None:
        raise ConfigError("--pause-until: give a time zone, e.g. 2026-05-01T18:00:00Z")
    if moment.timestamp() <= now:
        raise ConfigError(f"--pause-until: {until} is not in the future")
    return moment.timestamp()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return ""


def _report(app: str, wanted: int, done: RollbackOutcome) -> None:
    result = done.result
    for res in result.resources:
        click.echo(f"{app}\t{res.key}\t{res.action}" + (f"\t{res.message}" if res.message
                                                         else ""))
    subject = f" ({done.entry['subject']})" if done.entry.get("subject") else ""
    phase = f"{result.phase} ({result.reason})" if result.reason else str(result.phase)
    click.secho(f"app {app}: rollback to #{wanted} at {short_revision(result.revision)}{subject}: "
                f"{phase}" + (f": {result.message}" if result.message else ""),
                fg="green" if result.ok else "red", err=True)
    if done.outcome.unrecorded is not None:
        click.secho(f"warning: app {app}: rollback not recorded: {done.outcome.unrecorded}",
                    fg="yellow", err=True)
    if done.pause is not None:
        click.secho(f"app {app}: {done.pause.message}; gitops-ray resume {app} resumes it",
                    fg="yellow", err=True)


# -- resume -------------------------------------------------------------------------------

@click.command("resume", cls=CliCommand)
@kube_options
@click.argument("app")
def resume_command(app: str, **opts: Any) -> None:
    """End the pause of automated sync a rollback set: the controller syncs git again."""
    store = RecordStore(connect(opts), opts["control_namespace"])
    _record(store, app)
    ended = resume(store, app)
    if ended is None:
        click.echo(f"app {app}: automated sync was not paused")
    else:
        click.echo(f"app {app}: automated sync resumed ({ended.message} before)")


COMMANDS = [history_command, rollback_command, resume_command]
