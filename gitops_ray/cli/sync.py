"""``gitops-ray sync``, ``status`` and ``wait``: one-shot operations, argocd-style.

``sync`` applies the selected apps once, several at a time (``--prune`` to delete what
left git, ``--dry-run`` to send everything with ``dryRun=All``); an app whose source,
render or sync fails is reported and the others carry on; ``status`` lists the apps'
recorded state like ``argocd app list``; ``wait`` blocks until apps are Synced and/or
Healthy. Results go to stdout, progress and warnings to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from gitops_ray.cli.common import app_options, build_pipeline, kube_options, select_apps
from gitops_ray.cli.diff import diff_options
from gitops_ray.errors import GitOpsRayError
from gitops_ray.kube import Kube
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render.apps import Application
from gitops_ray.sync.engine import Syncer, SyncResult
from gitops_ray.sync.records import AppRecord, RecordStore

EXIT_FAILED = 2


@click.command("sync")
@kube_options
@app_options
@diff_options
@click.option("--prune", is_flag=True, help="Delete objects of the app that left git.")
@click.option("--dry-run", is_flag=True, help="Send every write with dryRun=All.")
@click.option("--parallel", default=4, show_default=True, type=click.IntRange(1, 32),
              help="Apps synced at the same time (results are printed in app order).")
def sync_command(prune: bool, dry_run: bool, parallel: int, **opts: Any) -> None:
    """Apply the selected apps once."""
    pipeline, store = build_pipeline(opts)
    selection = select_apps(pipeline.source, opts)
    reconciler = Reconciler(pipeline, Syncer(pipeline.kube, store))

    def sync_one(app: Application) -> SyncResult:
        try:
            return reconciler.sync(app, revision=selection.revision, local=selection.local,
                                   prune=prune, dry_run=dry_run).result
        except GitOpsRayError as e:  # this app's input is bad: the others go on
            return SyncResult(app.name, selection.revision or "").fail(
                f"error ({e.stage}): {e}")

    failed = False
    with Console(stderr=True).status(f"syncing {len(selection.apps)} app(s)", spinner="dots"), \
            ThreadPoolExecutor(parallel, thread_name_prefix="sync") as pool:
        for app, result in zip(selection.apps, pool.map(sync_one, selection.apps),
                               strict=True):
            _report(app.name, result, dry_run=dry_run)
            failed |= not result.ok
    sys.exit(EXIT_FAILED if failed else 0)


def _report(name: str, result: SyncResult, *, dry_run: bool) -> None:
    for res in result.resources:
        click.echo(f"{name}\t{res.key}\t{res.action}"
                   + (f"\t{res.message}" if res.message else ""))
    suffix = " (dry run)" if dry_run else ""
    click.secho(f"app {name}: {result.phase}{suffix} at {result.revision[:12]}"
                + (f": {result.message}" if result.message else ""),
                fg="green" if result.ok else "red", err=True)


def _rows(records: dict[str, AppRecord]) -> list[dict[str, Any]]:
    return [{"name": name, "sync": r.status.get("sync", "Unknown"),
             "health": r.status.get("health", "Unknown"),
             "revision": r.status.get("revision", ""),
             "error": r.status.get("error", ""),
             "warnings": r.status.get("renderWarnings", []),
             "lastSync": (r.status.get("operation") or {}).get("phase", ""),
             "history": r.status.get("history", [])}
            for name, r in sorted(records.items())]


@click.command("status")
@kube_options
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]),
              default="table", show_default=True)
@click.argument("apps", nargs=-1)
def status_command(output: str, apps: tuple[str, ...], **opts: Any) -> None:
    """List apps with their sync status, health and revision."""
    kube = Kube.connect(opts.get("kubeconfig"), opts.get("kube_context"))
    records = RecordStore(kube, opts["control_namespace"]).list_apps()
    rows = [r for r in _rows(records) if not apps or r["name"] in apps]
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
    elif output == "yaml":
        click.echo(yaml.safe_dump(rows, sort_keys=False), nl=False)
    else:
        table = Table(box=None, header_style="bold")
        for column in ("NAME", "SYNC STATUS", "HEALTH STATUS", "REVISION", "LAST SYNC"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["name"], row["sync"], row["health"], row["revision"][:12],
                          row["error"] or _with_warnings(row))
        Console(width=200).print(table)


def _with_warnings(row: dict[str, Any]) -> str:
    count = len(row["warnings"])
    return f"{row['lastSync']} ({count} render warning(s): -o yaml)" if count \
        else str(row["lastSync"])


@click.command("wait")
@kube_options
@click.option("--sync", "want_sync", is_flag=True, help="Wait until Synced.")
@click.option("--health", "want_health", is_flag=True, help="Wait until Healthy.")
@click.option("--timeout", default=300.0, show_default=True, type=float, help="Seconds.")
@click.argument("apps", nargs=-1, required=True)
def wait_command(want_sync: bool, want_health: bool, timeout: float, apps: tuple[str, ...],
                 **opts: Any) -> None:
    """Wait until apps are Synced and/or Healthy (both when neither flag is given)."""
    if not (want_sync or want_health):
        want_sync = want_health = True
    store = RecordStore(Kube.connect(opts.get("kubeconfig"), opts.get("kube_context")),
                        opts["control_namespace"])
    deadline = time.monotonic() + timeout
    while True:
        pending = [a for a in apps if not _done(store.load(a), want_sync, want_health)]
        if not pending:
            click.echo(f"{', '.join(apps)}: done")
            return
        if time.monotonic() > deadline:
            click.secho(f"timed out after {timeout:.0f}s waiting for {', '.join(pending)}",
                        fg="red", err=True)
            sys.exit(EXIT_FAILED)
        time.sleep(1)


def _done(record: AppRecord, want_sync: bool, want_health: bool) -> bool:
    status = record.status
    return ((not want_sync or status.get("sync") == "Synced")
            and (not want_health or status.get("health") == "Healthy"))


COMMANDS = [sync_command, status_command, wait_command]
