"""A commit git says did not touch an app's directory (or ``.gitops-ray/``) reads none of
its files, and every app's desired objects still follow every commit exactly.

Real git (a bare repository, :class:`GitSource` trees derived commit to commit) and a real
API server for the pipeline's cluster facts; random commits edit, add, delete and rename
files of three apps, one of which reads a file through a symlink (its inputs are read on
every commit).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.kube import Kube
from gitops_ray.reconcile import desired as desired_module
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.render import application_from_flags
from gitops_ray.source import GitSource
from gitops_ray.sync.records import RecordStore
from tests.harness.git import GitRepo

APPS = ("a", "b", "linked")


def _cm(name: str, value: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name}, "data": {"v": value}})


def _expected(work: Path, app: str) -> list[tuple[str, str]]:
    """(name, value) of every ConfigMap file of ``app`` in the work tree, links followed."""
    out = []
    for path in sorted((work / "apps" / app).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        out.append((doc["metadata"]["name"], doc["data"]["v"]))
    return sorted(out)


def _got(objects: list[Any]) -> list[tuple[str, str]]:
    return sorted((o.manifest()["metadata"]["name"], o.manifest()["data"]["v"])
                  for o in objects)


def _random_change(rng: random.Random, work: Path, step: int) -> tuple[dict[str, Any], str]:
    """Files to write (``None`` deletes) and the area they touch ("a", "b", "shared", "")."""
    area = rng.choice(["a", "b", "shared", "elsewhere"])
    if area == "shared":
        return {"shared/s.yaml": _cm("shared", f"s{step}")}, "shared"
    if area == "elsewhere":
        return {f"docs/note{step % 3}.md": f"step {step}\n"}, ""
    existing = sorted(p.name for p in (work / "apps" / area).glob("*.yaml"))
    action = rng.choice(["edit", "add", "delete", "rename"] if len(existing) > 1 else ["add"])
    if action == "edit":
        name = rng.choice(existing)
        return {f"apps/{area}/{name}": _cm(f"{area}-{name[:-5]}", f"v{step}")}, area
    if action == "add":
        return {f"apps/{area}/n{step}.yaml": _cm(f"{area}-n{step}", f"v{step}")}, area
    name = rng.choice(existing)
    if action == "delete":
        return {f"apps/{area}/{name}": None}, area
    text = (work / "apps" / area / name).read_text()
    return {f"apps/{area}/{name}": None, f"apps/{area}/r{step}.yaml": text}, area


@pytest.mark.parametrize("seed", [1, 2])
def test_untouched_apps_read_nothing_and_every_app_follows_every_commit(
        kube: Kube, namespace: str, git_repo: GitRepo, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    files: dict[str, Any] = {f"apps/{app}/c{i}.yaml": _cm(f"{app}-c{i}", "v0")
                             for app in ("a", "b") for i in range(3)}
    files["shared/s.yaml"] = _cm("shared", "s0")
    files["apps/linked/own.yaml"] = _cm("linked-own", "o0")
    git_repo.write(files)
    os.symlink("../../shared/s.yaml", git_repo.work / "apps" / "linked" / "s.yaml")
    git_repo.commit({})
    pipeline = Pipeline(kube, GitSource(tmp_path / "cache"), RecordStore(kube, namespace))
    apps = {name: application_from_flags(name=name, repo_url=git_repo.url,
                                         path=f"apps/{name}", dest_namespace=namespace)
            for name in APPS}
    reads: Counter[str] = Counter()
    real = desired_module.render_inputs

    def counted(app: Any, root: Path, **kwargs: Any) -> Any:
        reads[app.name] += 1
        return real(app, root, **kwargs)

    monkeypatch.setattr(desired_module, "render_inputs", counted)
    for app in apps.values():
        pipeline.desired(app)
    rng = random.Random(seed)
    for step in range(1, 26):
        change, area = _random_change(rng, git_repo.work, step)
        sha = git_repo.commit(change)
        reads.clear()
        for name, app in apps.items():
            got_sha, objects = pipeline.desired(app)
            assert got_sha == sha
            assert _got(objects) == _expected(git_repo.work, name), (step, name, change)
        touched = {area} & {"a", "b"}
        assert set(reads) == touched | {"linked"}, (step, change)  # a link: always read
