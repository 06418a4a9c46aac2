"""Shared fixtures: a real control plane, real git repositories, real helm.

The control plane is started once per test session (it takes a few seconds once built)
and every test that needs the cluster gets a fresh namespace of its own. ``ray_stack`` is
the same with Pods that run and the KubeRay operator (used by ``tests/e2e``).
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.build import argocd_crds as argocd_crds_file
from localcluster.build import ensure_helm
from localcluster.crds import install_crds

TIERS = ("unit", "integration", "e2e", "faults", "argocd")
"""Test tiers: each is a directory of ``tests/`` and a marker (registered in pyproject)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, from its directory: ``-m "unit or integration"``."""
    root = Path(__file__).parent
    for item in items:
        try:
            tier = item.path.relative_to(root).parts[0]
        except ValueError:  # collected from outside tests/
            continue
        if tier in TIERS:
            item.add_marker(tier)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    with LocalControlPlane() as cp:
        yield cp


@pytest.fixture(scope="session")
def ray_stack() -> Iterator[LocalControlPlane]:
    """A control plane with kube-scheduler, kwok fake nodes and the KubeRay operator."""
    with LocalControlPlane(kuberay=True) as cp:
        yield cp


@pytest.fixture(scope="session")
def argocd_crds(control_plane: LocalControlPlane) -> None:
    """Argo CD's own Application, AppProject and ApplicationSet CRDs (its Go module's)."""
    install_crds(control_plane.kubeconfig, json.loads(argocd_crds_file().read_text()))


@pytest.fixture(scope="session")
def kube(control_plane: LocalControlPlane) -> Kube:
    return Kube.connect(str(control_plane.kubeconfig))


def fresh_namespace(kube: Kube, prefix: str) -> Iterator[str]:
    """A new namespace named ``<prefix>-<random>`` for one test, deleted after it."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                field_manager="tests")
    yield name
    kube.delete("v1", "Namespace", name=name)


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


class GitRepo:
    """A bare repository on disk plus a work tree to commit into (real git, no mocks)."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        root.mkdir(parents=True, exist_ok=True)
        self._git(root, "init", "--bare", "-b", "main", str(self.bare))
        self._git(root, "clone", "-q", str(self.bare), str(self.work))

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    @staticmethod
    def _git(cwd: Path, *args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
            cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()

    def git(self, *args: str) -> str:
        return self._git(self.work, *args)

    def write(self, files: dict[str, str | object]) -> None:
        for rel, content in files.items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                path.unlink(missing_ok=True)
            elif isinstance(content, str):
                path.write_text(content)
            else:
                path.write_text(yaml.safe_dump_all(content if isinstance(content, list)
                                                   else [content]))

    def commit(self, files: dict[str, str | object], message: str = "update",
               branch: str = "main") -> str:
        """Write (``None`` deletes), commit and push; return the new commit SHA."""
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        self.git("push", "-q", "origin", f"HEAD:{branch}")
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")
