"""``gitops-ray diff``: what a sync would change, ignoring what the autoscaler owns.

Like ``kubectl diff`` and ``argocd app diff``: one unified diff per changed resource on
stdout (Secret values masked), ``-o json`` for machines, and exit code 0 when nothing
differs, 1 when something does, 2 on errors. Predictions come from a server-side dry run,
so defaults filled by the API server never show up as drift. Nothing is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from gitops_ray.cli.common import app_options, build_pipeline, kube_options, select_apps
from gitops_ray.diff.format import to_json, unified
from gitops_ray.reconcile.pipeline import Comparison, Pipeline
from gitops_ray.render.apps import Application


def diff_options(func: Any) -> Any:
    func = click.option("--no-builtin-rules", is_flag=True,
                        help="Do not ignore the Ray autoscaler's fields by default.")(func)
    return click.option("--jq-timeout", default=1.0, show_default=True, type=float,
                        help="Deadline in seconds for each jq ignore expression.")(func)


def compare_all(pipeline: Pipeline, apps: list[Application], revision: str | None,
                local: Any) -> Iterator[Comparison]:
    """Compare apps one by one, with a progress bar on a terminal when there are many."""
    console = Console(stderr=True)
    if len(apps) < 3 or not console.is_terminal:
        for app in apps:
            yield pipeline.compare(app, revision=revision, local=local)
        return
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("comparing", total=len(apps))
        for app in apps:
            progress.update(task, description=f"comparing {app.name}")
            yield pipeline.compare(app, revision=revision, local=local)
            progress.advance(task)


@click.command("diff")
@kube_options
@app_options
@diff_options
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True)
@click.option("--exit-code/--no-exit-code", default=True, show_default=True,
              help="Exit 1 when there are differences.")
def diff_command(output: str, color: str, exit_code: bool, **opts: Any) -> None:
    """Show what would change in the cluster if the config repo were synced."""
    pipeline, _ = build_pipeline(opts)
    selection = select_apps(pipeline.source, opts)
    use_color = color == "always" or (color == "auto" and sys.stdout.isatty())
    changed, report = False, []
    for comparison in compare_all(pipeline, selection.apps, selection.revision,
                                  selection.local):
        for warning in comparison.warnings:
            click.secho(f"warning: app {comparison.app.name}: {warning}", fg="yellow",
                        err=True)
        changed |= comparison.diff.status == "OutOfSync"
        if output == "json":
            report.append({"app": comparison.app.name, "revision": comparison.revision,
                           "status": comparison.diff.status,
                           "resources": to_json(comparison.diff)})
            continue
        for resource in comparison.diff.resources:
            if resource.status == "OutOfSync":
                click.echo(unified(resource, color=use_color), nl=False)
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    sys.exit(1 if changed and exit_code else 0)


COMMANDS = [diff_command]
