"""The ``gitops-ray`` command line: kubectl- and argocd-like verbs over the pipeline.

stdout carries data (diffs, tables, JSON); logs and progress go to stderr. Exit codes
follow ``kubectl diff``: 0 no differences or success, 1 differences, 2 errors.
"""

from __future__ import annotations

import sys

import click

from gitops_ray import __version__
from gitops_ray.errors import GitOpsRayError

EXIT_ERROR = 2


class _Group(click.Group):
    """Turns our own errors into a one-line message and exit code 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except GitOpsRayError as e:
            click.secho(f"error ({e.stage}): {e}", fg="red", err=True)
            sys.exit(EXIT_ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"],
                                           "auto_envvar_prefix": "GITOPS_RAY"})
@click.version_option(__version__, prog_name="gitops-ray")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="warning", show_default=True,
              help="Log level of one-shot commands (logs go to stderr).")
def main(log_level: str) -> None:
    """Keep Ray clusters on Kubernetes in sync with git, without fighting the autoscaler."""
    from gitops_ray.runtime.logs import configure_logging

    configure_logging("auto", log_level)  # stderr: stdout stays clean for data


def _register() -> None:
    from gitops_ray.cli import diff, render, run, sync

    for module in (render, diff, sync, run):
        for command in module.COMMANDS:
            main.add_command(command)


_register()
