"""The ``gitops-ray`` entry point: the CLI with ``run`` starting the controller (issue 35).

The CLI package never imports the runtime (import-linter); ``run`` reaches it only through
the :class:`~gitops_ray.cli.run.Launcher` that :mod:`gitops_ray.entry` starts the command
line with. These check that the script and ``python -m gitops_ray`` start there, and that
the CLI alone says so instead of starting nothing.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from gitops_ray import entry
from gitops_ray.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_is_the_entry_point() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["gitops-ray"].partition(":")
    assert getattr(importlib.import_module(module), name) is entry.main


def test_python_dash_m_starts_at_the_entry_point_too() -> None:
    assert "from gitops_ray.entry import main" in (ROOT / "gitops_ray/__main__.py").read_text()
    out = subprocess.run([sys.executable, "-m", "gitops_ray", "run", "--help"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert "--config" in out.stdout and "--argocd" in out.stdout


def test_run_without_the_launcher_fails_clearly_and_reads_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"  # never read: the launcher is checked first
    result = CliRunner().invoke(main, ["run", "--config", str(missing)])
    assert result.exit_code == 2
    assert "cannot start the controller" in result.output
    assert "gitops_ray.entry:main" in result.output
    assert "Traceback" not in result.output
