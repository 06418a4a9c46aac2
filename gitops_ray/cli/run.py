"""``gitops-ray run``: the long-running controller teams deploy.

Every flag is generated from :data:`gitops_ray.settings.OPTIONS`, so the flag,
its ``GITOPS_RAY_*`` variable and its key in the ``--config`` file can never drift apart.
Precedence is file < environment < flags; the settings module reads the environment
itself (click's automatic variables are turned off here so there is one reader only).
The global flags typed before ``run`` (``gitops-ray --log-level debug run``) count as
flags of ``run``, unless ``run`` is given its own.

The command line never imports the runtime (an import-linter contract): ``run`` reads the
settings and configures logging here, then calls the :class:`Launcher` the command line
was started with (``click``'s context object). The console entry point,
:mod:`gitops_ray.entry`, above both packages, passes the one that starts the controller;
that call is the only way from the CLI into the runtime.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from gitops_ray.cli.common import EXIT_ERROR, GLOBAL_SETTINGS
from gitops_ray.logs import configure_logging
from gitops_ray.settings import OPTIONS, Option, Settings, load_settings


@dataclass(frozen=True)
class Launcher:
    """How ``run`` starts the controller: ``start`` runs it until it stops, its exit status."""

    start: Callable[[Settings], int]


class NoController(click.ClickException):
    """``run`` on a command line started without a :class:`Launcher` (exit 2)."""

    exit_code = EXIT_ERROR


def _dest(key: str) -> str:
    return "opt_" + key.replace(".", "__")


def _flag(option: Option) -> Any:
    """A click option for one setting; ``None`` (not given) unless set on the command line."""
    assert option.flag_name is not None
    name = option.flag_name
    if "/" in name:  # a boolean: the flag alone turns it on, its --no- form off
        default = name.split("/")[0 if option.default else 1]
        return click.option(name, _dest(option.key), default=None, allow_from_autoenv=False,
                            help=f"{option.help} [env: {option.env}; default: {default}]")
    return click.option(name, _dest(option.key), default=None, metavar="VALUE",
                        help=f"{option.help} [env: {option.env}; default: "
                             f"{option.default!r}]", allow_from_autoenv=False)


def settings_options(func: Any) -> Any:
    for option in reversed([o for o in OPTIONS if o.flag_name]):
        func = _flag(option)(func)
    return func


@click.command("run", context_settings={"max_content_width": 100})
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="GITOPS_RAY_CONFIG", allow_from_autoenv=False,
              help="Settings file (YAML). [env: GITOPS_RAY_CONFIG]")
@settings_options
def run_command(config_file: Path | None, **flags: Any) -> None:
    """Keep the configured apps in sync continuously (auto-sync, self-heal, webhooks).

    Secrets are never taken as flags: the webhook secret comes from
    --webhook-secret-file or GITOPS_RAY_WEBHOOK_SECRET, repository credentials from files
    or Secrets named in the settings file.
    """
    ctx = click.get_current_context()
    launcher = ctx.find_object(Launcher)
    if launcher is None:  # gitops_ray.cli.main called directly, e.g. by a stale script
        raise NoController("this command line cannot start the controller: start gitops-ray "
                           "through its entry point, gitops_ray.entry:main (a gitops-ray "
                           "script installed before it: reinstall the package)")
    given = {o.key: flags.get(_dest(o.key)) for o in OPTIONS if o.flag_name}
    for key, value in _global_flags(ctx).items():
        given[key] = value if given.get(key) is None else given[key]
    settings = load_settings(config_file, env=os.environ, flags=given)
    configure_logging(settings.log_format, settings.log_level)
    sys.exit(launcher.start(settings))


def _global_flags(ctx: click.Context) -> dict[str, Any]:
    """Global flags typed on the group's command line, by settings key."""
    parent = ctx.parent
    if parent is None:
        return {}
    return {key: parent.params[name] for name, key in GLOBAL_SETTINGS.items()
            if parent.get_parameter_source(name) is ParameterSource.COMMANDLINE}


COMMANDS = [run_command]
