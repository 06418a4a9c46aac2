"""docs/install.md's image and CLI blocks, run as written (tests/docs_commands.py).

``make image`` runs for real, with its check that the Dockerfile's base images are
pinned; only the Docker client is a stand-in (no daemon, no registry here): a script that
records its arguments, given to make as ``DOCKER=`` and first on ``PATH`` for ``docker
push``. ``pip install .`` runs offline, into a directory of its own, so the wheel is
really built (hatchling, package data included) and its ``gitops-ray`` entry point is the
one that answers ``--version``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gitops_ray import __version__
from tests.docs_commands import ROOT, Shell, block, run_program

IMAGE = "registry.example.com/platform/gitops-ray:0.1.0"


def _docker_stand_in(bin_dir: Path, log: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "docker"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    script.chmod(0o755)
    return script


def test_install_md_builds_and_pushes_the_image(tmp_path: Path) -> None:
    log = tmp_path / "docker.log"
    docker = _docker_stand_in(tmp_path / "bin", log)
    env = {**os.environ, "PATH": f"{docker.parent}:{os.environ['PATH']}"}

    def make(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_program([*argv, f"DOCKER={docker}"], cwd=ROOT, env=env)

    def docker_cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_program(argv, cwd=ROOT, env=env)

    shell = Shell(cwd=ROOT, runners={"make": make, "docker": docker_cli})
    shell.run(block("install.md", "image"))
    assert log.read_text().splitlines() == [f"build -t {IMAGE} .", f"push {IMAGE}"]

    # Without UNPINNED=1, the unpinned bases of the Dockerfile are refused (the page says so).
    refused = run_program(["make", "image", f"IMAGE={IMAGE}", f"DOCKER={docker}"], cwd=ROOT,
                          env=env)
    bases = [line for line in (ROOT / "Dockerfile").read_text().splitlines()
             if line.startswith("ARG ") and "_IMAGE=" in line]
    pinned = all("@sha256:" in line for line in bases)
    assert (refused.returncode == 0) == pinned, refused.stderr
    if not pinned:
        assert "not pinned by digest" in refused.stderr


def test_install_md_installs_the_cli(tmp_path: Path) -> None:
    target = tmp_path / "site"

    def pip(argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert argv[:2] == ["pip", "install"]
        offline = ["--no-deps", "--no-build-isolation", "--target", str(target), "-q"]
        return run_program([sys.executable, "-m", "pip", "install", *offline, *argv[2:]],
                           cwd=ROOT, env=os.environ)

    def installed(argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(target)}
        return run_program([str(target / "bin" / argv[0]), *argv[1:]], cwd=tmp_path, env=env)

    shell = Shell(cwd=ROOT, runners={"pip": pip, "gitops-ray": installed})
    _, version = shell.run(block("install.md", "cli"))
    assert version.stdout.strip() == f"gitops-ray, version {__version__}"
    assert (target / "gitops_ray" / "runtime" / "web" / "templates").is_dir()
