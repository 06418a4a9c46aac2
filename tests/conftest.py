"""Shared fixtures: a real control plane, real git repositories, real helm.

The control plane is started once per test session (it takes a few seconds once built)
and every test that needs the cluster gets a fresh namespace of its own. The helpers the
fixtures hand out (a controller in-process or as a process, the CLI, git) are in
:mod:`tests.harness`. ``ray_stack`` (``tests/e2e/conftest.py``) is the same with Pods
that run and the KubeRay operator; which worker runs which tests is
:mod:`tests.harness.groups`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

import pytest
import structlog

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.build import argocd_crds as argocd_crds_file
from localcluster.build import ensure_helm
from localcluster.crds import install_crds
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.groups import FIRST, GroupScheduling, group_of, rank
from tests.harness.namespaces import fresh_namespace
from tests.harness.pipeline import Env
from tests.harness.process import ControllerProcesses, StartController
from tests.harness.runtime import Controller, Controllers

structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.__stdout__))
"""In-process controllers log with structlog's defaults (a test does not configure logging
for them), but to the process's own stdout rather than to ``sys.stdout`` as found at each
line: click's ``CliRunner`` swaps ``sys.stdout`` while a command runs, so a controller's
thread logging in those moments wrote into the command's output (a ``-o json`` that no
longer parsed). Pytest's fd capture still shows the lines with a failed test and ``capfd``
reads them; between tests they go where fd 1 goes (``/dev/null`` in an xdist worker)."""

TIERS = ("unit", "integration", "e2e", "faults", "argocd")
"""Test tiers: each is a directory of ``tests/`` and a marker (registered in pyproject)."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> GroupScheduling | None:
    """``--dist loadgroup`` (the Makefile's): a group (:mod:`tests.harness.groups`) per worker."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupScheduling(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, from its directory (``-m "unit or integration"``), and
    order the groups longest first (:mod:`tests.harness.groups`).
    """
    root = Path(__file__).parent
    ranks: dict[int, int] = {}
    for item in items:
        try:
            module = PurePosixPath(item.path.relative_to(root).as_posix())
        except ValueError:  # collected from outside tests/
            continue
        if module.parts[0] in TIERS:
            item.add_marker(module.parts[0])
        ranks[id(item)] = rank(group_of(module))
    items.sort(key=lambda item: ranks.get(id(item), len(FIRST)))  # stable: modules stay whole


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """Each test leaves structlog and the root logger as it found them.

    ``gitops-ray`` commands run in-process (``Cli``) configure logging for the process, to
    the stream of that moment; a later test of the same process (an in-process controller
    whose lines a test reads with ``capfd``) would log there instead. Run one after
    another, the tiers met in an order where no test noticed; side by side (pytest-xdist
    workers, each its own mix of modules) one did.
    """
    saved, root = structlog.get_config(), logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    with LocalControlPlane() as cp:
        yield cp


@pytest.fixture(scope="session")
def argocd_crds(control_plane: LocalControlPlane) -> None:
    """Argo CD's own Application, AppProject and ApplicationSet CRDs (its Go module's)."""
    install_crds(control_plane.kubeconfig, json.loads(argocd_crds_file().read_text()))


@pytest.fixture(scope="session")
def kube(control_plane: LocalControlPlane) -> Kube:
    return Kube.connect(str(control_plane.kubeconfig))


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    yield from fresh_namespace(kube, "t")


@pytest.fixture
def extra_namespace(kube: Kube, namespace: str) -> Iterator[Callable[[str], str]]:
    """``make(suffix)``: one more fresh namespace, ``<namespace>-<suffix>``, removed after."""
    made: list[str] = []

    def make(suffix: str) -> str:
        made.append(f"{namespace}-{suffix}")
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": made[-1]}},
                    field_manager="tests")
        return made[-1]

    yield make
    for name in made:
        kube.delete("v1", "Namespace", name=name)


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    return ensure_helm()


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def start_controller(control_plane: LocalControlPlane, kube: Kube, namespace: str,
                     tmp_path: Path, helm_bin: Path) -> Iterator[Callable[..., Controller]]:
    """``start(settings, **flags)``: an in-process controller on the test namespace."""
    controllers = Controllers(control_plane, kube, namespace, tmp_path, helm_bin)
    yield controllers
    controllers.shutdown()


@pytest.fixture
def controller_process(tmp_path: Path) -> Iterator[StartController]:
    """``start(identity, settings, env=..., args=...)``: the controller as a process; every
    process is killed after the test."""
    processes = ControllerProcesses(tmp_path)
    yield processes
    processes.stop()


@pytest.fixture
def cli(control_plane: LocalControlPlane, namespace: str, tmp_path: Path,
        helm_bin: Path) -> Cli:
    return Cli(control_plane, namespace, tmp_path / "cache", helm_bin)


@pytest.fixture
def env(kube: Kube, namespace: str, tmp_path: Path, helm_bin: Path) -> Env:
    """A pipeline, syncer and reconciler on the test namespace (no controller)."""
    return Env(kube, namespace, tmp_path, helm_bin)
