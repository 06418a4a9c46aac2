"""The sync stages wired to the test cluster without a controller: pipeline, syncer,
reconciler (fixture ``env``), and the writes another party makes beside them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from gitops_ray.kube import Kube
from gitops_ray.reconcile import pipeline as pipeline_module
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.reconcile.reconciler import Reconciler
from gitops_ray.render import application_from_flags
from gitops_ray.render.apps import Application, SyncPolicy
from gitops_ray.render.tools import RenderTools
from gitops_ray.source import GitSource
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness.git import GitRepo


class Env:
    """A pipeline, syncer and reconciler wired to the test cluster and one namespace."""

    def __init__(self, kube: Kube, namespace: str, tmp: Path, helm: Path) -> None:
        self.kube, self.namespace = kube, namespace
        self.store = RecordStore(kube, namespace)
        self.pipeline = Pipeline(kube, GitSource(tmp / "cache"), self.store,
                                 tools=RenderTools(helm_bin=str(helm)))
        self.syncer = Syncer(kube, self.store)
        self.reconciler = Reconciler(self.pipeline, self.syncer)

    def app(self, repo: GitRepo, name: str = "ray", path: str = "manifests",
            **policy: object) -> Application:
        app = application_from_flags(name=name, repo_url=repo.url, path=path,
                                     dest_namespace=self.namespace)
        return replace(app, sync_policy=SyncPolicy(**policy)) if policy else app  # type: ignore[arg-type]

    def live(self, name: str, kind: str = "RayCluster", api: str = "ray.io/v1") -> dict:
        return self.kube.get(api, kind, name=name, namespace=self.namespace)


def autoscaler_patch(cp: LocalControlPlane, namespace: str, name: str, ops: list) -> None:
    """Patch exactly like the Ray autoscaler: python-requests, JSON Patch by list index."""
    url = f"{cp.url}/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{name}"
    requests.patch(url, json=ops, timeout=10, verify=str(cp.workdir / "ca.crt"),
                   headers={"Authorization": f"Bearer {cp.token}",
                            "Content-Type": "application/json-patch+json"}
                   ).raise_for_status()


def groups_by_name(obj: dict) -> dict[str, dict]:
    return {g["groupName"]: g for g in obj["spec"]["workerGroupSpecs"]}


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each compile of an app's ignore rules from now on, by its ``where`` (the app)."""
    compiled: list[str] = []
    real = pipeline_module.compile_rules

    def counted(*args: Any, **kwargs: Any) -> Any:
        compiled.append(kwargs["where"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline_module, "compile_rules", counted)
    return compiled
