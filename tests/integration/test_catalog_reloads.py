"""Catalog reloads run one at a time (real git).

A re-merge of the in-cluster Applications (``reload(())``, on an Application event) that
ran while a git reload was still loading could install a view computed before that load,
and report the apps the load added as removed, which deletes apps. So it waits.
"""

from __future__ import annotations

import threading
from pathlib import Path

from gitops_ray.render.apps import Application
from gitops_ray.runtime.catalog import Catalog, CatalogChange
from gitops_ray.settings import AppSourceSpec
from gitops_ray.source import GitSource
from tests.harness.cli import app_yaml
from tests.harness.git import GitRepo


class Gated:
    """The real git source, whose ``resolve`` waits until the test opens the gate."""

    def __init__(self, source: GitSource) -> None:
        self.source = source
        self.entered, self.gate = threading.Event(), threading.Event()

    def resolve(self, repo: str, revision: str) -> str:
        self.entered.set()
        self.gate.wait(60)
        return self.source.resolve(repo, revision)

    def __getattr__(self, name: str) -> object:
        return getattr(self.source, name)


class NoApplications:
    def items(self) -> list[Application | tuple[str, str]]:
        return []


def test_a_cluster_re_merge_waits_for_a_running_git_reload(
        git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.commit({"apps/a.yaml": app_yaml(git_repo, "a", "ns", "a")})
    gated = Gated(GitSource(tmp_path / "cache"))
    catalog = Catalog(gated, [AppSourceSpec(git_repo.url, "main", "apps")],  # type: ignore[arg-type]
                      cluster=NoApplications())
    changes: list[CatalogChange] = []
    loading = threading.Thread(target=lambda: changes.append(catalog.reload()))
    loading.start()
    assert gated.entered.wait(60)
    merging = threading.Thread(target=lambda: changes.append(catalog.reload(())))
    merging.start()
    merging.join(0.5)
    assert merging.is_alive()  # blocked behind the git reload, not racing it
    gated.gate.set()
    loading.join(60)
    merging.join(60)
    assert [c.added for c in changes] == [("a",), ()]
    assert [c.removed for c in changes] == [(), ()]
    assert set(catalog.apps()) == {"a"}
