"""An Application's ``ignoreDifferences``, parsed where the Application is, compiled once
per sync, and carried to the apply (issue 35)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops_ray.render.applications import parse_application
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env, count_compiles


def test_a_sync_compiles_the_rules_once_and_applies_them(
        env: Env, git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = count_compiles(monkeypatch)
    git_repo.commit({"manifests/cm.yaml": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"a": "1", "kept": "git"}}})
    app = parse_application({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "ray", "namespace": "argocd"},
        "spec": {"source": {"repoURL": git_repo.url, "path": "manifests"},
                 "destination": {"namespace": env.namespace},
                 "ignoreDifferences": [{"kind": "ConfigMap", "jsonPointers": ["/data/kept"]}]}},
        origin="apps/ray.yaml")
    outcome = env.reconciler.sync(app)
    assert outcome.result.ok, outcome.result.message
    assert compiled == ["Application ray"]  # compare, sync and compare after: one compile
    env.kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "settings", "namespace": env.namespace},
                    "data": {"kept": "theirs"}}, field_manager="someone-else", force=True)
    assert not env.pipeline.compare(app).out_of_sync  # the rule, in the comparison
    assert env.reconciler.sync(app).result.ok
    assert env.live("settings", "ConfigMap", "v1")["data"]["kept"] == "theirs"  # and the apply
    assert compiled == ["Application ray"]
