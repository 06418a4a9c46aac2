"""The ``gitops-ray`` command line: kubectl- and argocd-like verbs over the pipeline.

stdout carries data (diffs, tables, JSON); logs and progress go to stderr. Exit codes
follow ``kubectl diff``: 0 no differences or success, 1 differences, 2 errors. Global
flags (``--log-level``, ``--kubeconfig``, ``--context``) go before or after the command,
as with kubectl; every option also reads ``GITOPS_RAY_<OPTION>``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from gitops_ray import __version__
from gitops_ray.cli.common import EXIT_ERROR, global_options, name_envvars
from gitops_ray.errors import GitOpsRayError


class _Group(click.Group):
    """Turns our own errors into a one-line message and exit code 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except GitOpsRayError as e:
            click.secho(f"error ({e.stage}): {e}", fg="red", err=True)
            sys.exit(EXIT_ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gitops-ray")
@global_options
def main(**global_flags: Any) -> None:
    """Keep Ray clusters on Kubernetes in sync with git, without fighting the autoscaler.

    --log-level, --kubeconfig and --context may be given here or after the command.
    """


def _register() -> None:
    from gitops_ray.cli import delete, diff, get, history, render, restart, run, sync

    for module in (render, diff, sync, get, history, delete, restart, run):
        for command in module.COMMANDS:
            name_envvars(command)
            main.add_command(command)


name_envvars(main)
_register()
