"""``gitops-ray diff``: what a sync would change, ignoring what the autoscaler owns.

Like ``kubectl diff`` and ``argocd app diff``: one unified diff per changed resource on
stdout (Secret values masked), ``-o json`` for machines, and exit code 0 when nothing
differs, 1 when something does, 2 on errors. Predictions come from a server-side dry run,
so defaults filled by the API server never show up as drift. Nothing is written.

An app that cannot be compared (bad source, render or ignore rule) is reported on its own,
on stderr and as ``"error"`` in the JSON, and the others are still compared: one broken
Application must not hide every other app's drift. Any such error makes the exit code 2.

``--argocd-app NS/NAME`` previews handing an in-cluster Argo CD Application over
(:mod:`gitops_ray.cli.handover`): its diff as the controller would compare it, and each of
its fields gitops-ray would not honour, on stderr (``notHonoured`` in the JSON); any such
field makes the exit code 2.

When a sync would change a Ray object's worker groups, the diff is followed by their
worker-group view (git's ``replicas`` next to live's, who set them, ready and stale Pods),
on stderr so stdout stays a diff; ``-o json`` carries it as ``workerGroupView`` next to
the per-group changes (``workerGroups``). Then what the KubeRay operator will do with each
changed Ray object (:mod:`gitops_ray.cli.impact`; ``impact`` in the JSON).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from gitops_ray.cli.common import (
    EXIT_DIFFERENCES,
    EXIT_ERROR,
    CliCommand,
    Selection,
    app_options,
    kube_options,
    select_apps,
    shapes_options,
)
from gitops_ray.cli.destinations import Destinations
from gitops_ray.cli.handover import not_honoured, preview_options, previewed
from gitops_ray.cli.impact import print_impacts, with_impacts
from gitops_ray.cli.live import key_of, read_tree
from gitops_ray.cli.views import print_groups, stderr_console
from gitops_ray.diff.format import to_json, unified
from gitops_ray.diff.groups import worker_group_changes
from gitops_ray.diff.rules import JQ_TIMEOUT
from gitops_ray.errors import GitOpsRayError
from gitops_ray.heap import settling
from gitops_ray.kube import Kube
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.reconcile.project import format_conditions, stops_sync
from gitops_ray.reconcile.status import resources_of
from gitops_ray.reconcile.tree import TreeNode
from gitops_ray.render.apps import Application
from gitops_ray.types import ResourceKey, SyncStatus


def diff_options(func: Any) -> Any:
    func = click.option("--no-builtin-rules", is_flag=True,
                        help="Do not ignore the Ray autoscaler's fields by default.")(func)
    return click.option("--jq-timeout", default=JQ_TIMEOUT, show_default=True, type=float,
                        help="Deadline in seconds for each jq ignore expression.")(func)


Compared = tuple[Application, Comparison | GitOpsRayError]


def compare_all(pipeline: Destinations, apps: list[Application], revision: str | None,
                local: Any) -> Iterator[Compared]:
    """Compare apps one by one (progress bar on a terminal when there are many).

    Each app against its destination cluster. An app whose cluster, source, render or
    diff fails yields its error, and the others go on.
    """
    console = Console(stderr=True)
    if len(apps) < 3 or not console.is_terminal:
        for app in apps:
            yield app, _compare(pipeline, app, revision, local)
        return
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("comparing", total=len(apps))
        for app in apps:
            progress.update(task, description=f"comparing {app.name}")
            yield app, _compare(pipeline, app, revision, local)
            progress.advance(task)


def _compare(pipeline: Destinations, app: Application, revision: str | None,
             local: Any) -> Comparison | GitOpsRayError:
    try:
        return pipeline.pipeline(app).compare(app, revision=revision, local=local)
    except GitOpsRayError as e:
        return e


def error_text(error: GitOpsRayError) -> str:
    return f"error ({error.stage}): {error}"


@click.command("diff", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@diff_options
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True)
@click.option("--exit-code/--no-exit-code", default=True, show_default=True,
              help="Exit 1 when there are differences.")
@click.option("--argocd-app", "argocd_apps", multiple=True, metavar="NS/NAME",
              help="Preview handing this in-cluster Argo CD Application over: what its "
                   "first sync would change and each of its fields gitops-ray would not "
                   "honour (then exit 2). Repeatable; implies --argocd (Argo CD's namespace: "
                   "--argocd-namespace, else NS).")
def diff_command(output: str, color: str, exit_code: bool, argocd_apps: tuple[str, ...],
                 **opts: Any) -> None:
    """Show what would change in the cluster if the config repo were synced."""
    if argocd_apps:
        opts = preview_options(opts, argocd_apps)
    pipeline = Destinations(opts)
    selection = previewed(pipeline.local.kube, argocd_apps, opts) if argocd_apps \
        else select_apps(pipeline.source, opts)
    use_color = color == "always" or (color == "auto" and sys.stdout.isatty())
    refused = _not_honoured(selection.apps, text=output != "json") if argocd_apps else {}
    with settling():  # many apps compared: see gitops_ray.heap
        changed, failed, report = _diff_all(pipeline, selection, output=output,
                                            color=use_color, quiet=bool(argocd_apps))
    if output == "json":
        for entry in report if argocd_apps else ():
            entry["notHonoured"] = refused.get(entry["app"], [])
        click.echo(json.dumps(report, indent=2))
    failed |= any(refused.values())
    sys.exit(EXIT_ERROR if failed else EXIT_DIFFERENCES if changed and exit_code else 0)


def _not_honoured(apps: list[Application], *, text: bool) -> dict[str, list[str]]:
    """Each app's fields gitops-ray would not honour, said on stderr (see cli.handover)."""
    out = {app.name: not_honoured(app) for app in apps}
    for name, fields in out.items() if text else ():
        if not fields:
            click.secho(f"app {name}: gitops-ray honours every field of it", fg="green",
                        err=True)
        for field in fields:
            click.secho(f"app {name}: not honoured after the hand-over: {field}", fg="red",
                        err=True)
    return out


def _diff_all(pipeline: Destinations, selection: Selection, *, output: str, color: bool,
              quiet: bool = False) -> tuple[bool, bool, list[dict[str, Any]]]:
    """Compare and print (or collect, for JSON) each app; (changed, failed, report)."""
    changed, failed = False, False
    report: list[dict[str, Any]] = []
    for app, comparison in compare_all(pipeline, selection.apps, selection.revision,
                                       selection.local):
        if isinstance(comparison, GitOpsRayError):
            failed = True
            click.secho(f"app {app.name}: {error_text(comparison)}", fg="red", err=True)
            report.append({"app": app.name, "revision": "", "status": SyncStatus.UNKNOWN,
                           "error": error_text(comparison), "resources": []})
            continue
        _warn(comparison, quiet=set(app.warnings) if quiet else set())
        failed |= _refused(comparison)
        changed |= comparison.diff.status == SyncStatus.OUT_OF_SYNC
        views = group_views(pipeline.pipeline(app).kube, comparison)  # compared there
        if output == "json":
            report.append({"app": app.name, "revision": comparison.revision,
                           "status": comparison.diff.status,
                           "conditions": [{"type": c.type, "message": c.message}
                                          for c in comparison.conditions],
                           "resources": with_impacts(_with_views(
                               to_json(comparison.diff), views), comparison.impacts)})
            continue
        for resource in comparison.diff.resources:
            if resource.out_of_sync:
                click.echo(unified(resource, color=color), nl=False)
        _print_views(views)
        print_impacts(comparison.impacts)
    return changed, failed, report


def group_views(kube: Kube, comparison: Comparison) -> dict[str, TreeNode]:
    """The worker-group view of each Ray object whose worker groups a sync would change.

    Only objects that exist on both sides (a new cluster has no live groups to show);
    read live with a bounded number of requests (:mod:`gitops_ray.cli.live`).
    """
    changed = {r.key for r in comparison.diff.resources
               if r.out_of_sync and r.desired_normalized is not None
               and r.live_normalized is not None
               and worker_group_changes(r.desired_normalized, r.live_normalized)}
    if not changed:
        return {}
    manifests = comparison.manifests()
    rows = [row for row in resources_of(comparison, manifests) if key_of(row) in changed]
    desired = {key: m for m in manifests if (key := ResourceKey.of(m)) in changed}
    return {str(n.key): n for n in read_tree(kube, rows, desired).nodes if n.worker_groups}


def _with_views(records: list[dict[str, Any]],
                views: dict[str, TreeNode]) -> list[dict[str, Any]]:
    """``-o json``: ``workerGroupView`` next to ``workerGroups`` (the changes by group)."""
    for record in records:
        node = views.get(record["key"])
        if node is not None:
            record["workerGroupView"] = [g.as_dict() for g in node.worker_groups]
    return records


def _print_views(views: dict[str, TreeNode]) -> None:
    """After the diff, on stderr (stdout is the diff alone): git's and live's groups."""
    out = stderr_console()
    for node in views.values():
        print_groups(out, f"{node.kind} {node.namespace}/{node.name} worker groups "
                          "(a sync changes them; replicas stay live's):", node.worker_groups)


def _refused(comparison: Comparison) -> bool:
    """Say why an app its AppProject stops was not compared (an error: exit code 2)."""
    stopping = stops_sync(comparison.conditions)
    if stopping:
        click.secho(f"app {comparison.app.name}: {format_conditions(stopping)}", fg="red",
                    err=True)
    return bool(stopping)


def _warn(comparison: Comparison, *, quiet: set[str]) -> None:
    """The comparison's warnings on stderr, but those in ``quiet`` (said already)."""
    for warning in comparison.warnings:
        if warning in quiet:
            continue
        click.secho(f"warning: app {comparison.app.name}: {warning}", fg="yellow", err=True)
    for conflict in comparison.diff.conflicts:
        click.secho(f"conflict: app {comparison.app.name}: {conflict}", fg="yellow", err=True)
    for refusal in comparison.diff.refusals:  # a sync of this would fail: diff/refusals.py
        click.secho(f"refused: app {comparison.app.name}: {refusal}", fg="red", err=True)


COMMANDS = [diff_command]
