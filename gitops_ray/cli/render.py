"""``gitops-ray render``: print an app's rendered manifests, pod shapes expanded.

Needs no cluster, so it doubles as an Argo CD Config Management Plugin ``generate``
command: run in the app's directory with ``--local .``, it prints the manifests Argo CD
should apply (``ARGOCD_APP_NAME`` and ``ARGOCD_APP_NAMESPACE`` fill name and namespace,
``ARGOCD_APP_SOURCE_PATH`` locates the repository root for ``.gitops-ray/``; elsewhere
``--repo-root`` does, like ``argocd --local-repo-root``). The global ``--kubeconfig`` and
``--context`` are accepted and unused, so one alias or environment works for every verb.
"""

from __future__ import annotations

import os
from typing import Any

import click
import yaml

from gitops_ray.cli.common import (
    CliCommand,
    app_options,
    cli_source,
    global_options,
    render_settings,
    select_apps,
)
from gitops_ray.render import render_app
from gitops_ray.render.tools import RenderTools


@click.command("render", cls=CliCommand)
@global_options
@app_options
def render_command(**opts: Any) -> None:
    """Print the rendered manifests of the selected apps as a YAML stream."""
    if opts.get("local_dir") is not None:
        opts["app_name"] = opts.get("app_name") or os.environ.get("ARGOCD_APP_NAME")
        opts["source_path"] = os.environ.get("ARGOCD_APP_SOURCE_PATH")
        if os.environ.get("ARGOCD_APP_NAMESPACE") and opts["dest_namespace"] == "default":
            opts["dest_namespace"] = os.environ["ARGOCD_APP_NAMESPACE"]
    tools = RenderTools(helm_bin=opts["helm_bin"], value_file_hosts=render_settings(opts))
    source = cli_source(opts)
    selection = select_apps(source, opts)
    docs = []
    for app in selection.apps:
        root = selection.local or source.checkout(
            app.source.repo_url, selection.revision or app.source.target_revision,
            chart=app.source.chart).root
        for warning in app.warnings:
            click.secho(f"warning: app {app.name}: {warning}", fg="yellow", err=True)
        docs += render_app(app, root, tools=tools)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


COMMANDS = [render_command]
