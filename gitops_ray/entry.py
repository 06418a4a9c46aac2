"""The ``gitops-ray`` console entry point: the command line, with ``run`` starting the controller.

Why a module of its own, above both packages: the one-shot commands (:mod:`gitops_ray.cli`)
never import the runtime, so they start without the controller's imports and cannot
reach its state by accident, and the runtime has no command-line code (import-linter
checks both). ``run`` (:mod:`gitops_ray.cli.run`) reads its flags, file and environment
into :class:`~gitops_ray.settings.Settings` and configures logging, then calls the
:class:`~gitops_ray.cli.run.Launcher` the command line was started with: this module's
:data:`LAUNCHER`, which builds and runs :class:`~gitops_ray.runtime.runner.Runtime`. That
call is the only way from the command line into the runtime. The ``gitops-ray`` script
and ``python -m gitops_ray`` both start here.
"""

from __future__ import annotations

from gitops_ray.cli import main as command_line
from gitops_ray.cli.run import Launcher
from gitops_ray.settings import Settings


def start_controller(settings: Settings) -> int:
    """Run the controller with ``settings`` until it stops; its exit status."""
    from gitops_ray.runtime.runner import Runtime  # only `run` pays for the runtime's imports

    return Runtime(settings).run()


LAUNCHER = Launcher(start_controller)
"""What ``run`` calls: the controller (see the module docstring)."""


def main() -> None:
    """The ``gitops-ray`` command (exits with the command's status)."""
    command_line(obj=LAUNCHER)
