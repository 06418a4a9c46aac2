"""``ignoreDifferences`` and sync options are parsed into types once, where the Application
is, and the rules compiled once per sync (issue 35)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from gitops_ray.diff.system import SystemDiff
from gitops_ray.errors import ConfigError
from gitops_ray.kube import Kube
from gitops_ray.reconcile.argocdcm import SystemSettings
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.render import application_from_flags
from gitops_ray.render.applications import parse_application
from gitops_ray.render.apps import SyncPolicy
from gitops_ray.runtime.operations import with_sync_options
from gitops_ray.source import GitSource
from gitops_ray.sync.order import sync_options
from gitops_ray.sync.records import RecordStore
from gitops_ray.types import IgnoreRule, SyncOption, SyncOptions
from tests.harness.pipeline import count_compiles

WRITTEN = [
    {"group": "ray.io", "kind": "RayCluster",
     "jqPathExpressions": [".spec.workerGroupSpecs[].replicas"]},
    {"kind": "ConfigMap", "name": "settings", "namespace": "ml",
     "jsonPointers": ["/data/kept", "/metadata/labels"]},
    {"group": "apps", "kind": "Deployment", "managedFieldsManagers": ["kube-controller-manager"]},
]


def app_doc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "ray", "namespace": "argocd"},
            "spec": {"source": {"repoURL": "https://git.example.com/r.git", "path": "."},
                     "destination": {"namespace": "ray"}, **spec}}


def test_parsed_rules_round_trip_what_users_write() -> None:
    app = parse_application(app_doc(ignoreDifferences=WRITTEN), origin="apps/ray.yaml")
    assert all(isinstance(r, IgnoreRule) for r in app.ignore_differences)
    assert [r.as_spec() for r in app.ignore_differences] == WRITTEN
    assert app.ignore_differences[0] == IgnoreRule(
        "RayCluster", "ray.io", jq_path_expressions=(".spec.workerGroupSpecs[].replicas",))
    assert hash(app.ignore_differences)  # a memo key


@pytest.mark.parametrize(("rule", "message"), [
    ({"kind": "ConfigMap", "jsonPointer": ["/x"]},
     r"spec.ignoreDifferences\[0\]: unknown field\(s\) jsonPointer; known fields: group"),
    ({"group": "apps"}, r"spec.ignoreDifferences\[0\]: 'kind' is required"),
    ({"kind": "ConfigMap", "jsonPointers": "/x"},
     r"spec.ignoreDifferences\[0\].jsonPointers: expected a list of strings"),
    ({"kind": 3}, r"spec.ignoreDifferences\[0\].kind: expected a string, got int"),
])
def test_a_malformed_rule_is_an_error_of_the_application(rule: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_application(app_doc(ignoreDifferences=[rule]), origin="apps/ray.yaml")


def test_flags_take_rules_as_written_or_typed() -> None:
    app = application_from_flags(name="a", repo_url="https://x/r.git",
                                 ignore_differences=[WRITTEN[1], IgnoreRule("Secret")])
    assert app.ignore_differences == (IgnoreRule.parse(WRITTEN[1], "x"), IgnoreRule("Secret"))
    with pytest.raises(ConfigError, match=r"app a: ignoreDifferences\[0\]: 'kind' is required"):
        application_from_flags(name="a", repo_url="https://x/r.git", ignore_differences=[{}])


def test_sync_options_are_parsed_once_with_the_policy_and_round_trip() -> None:
    written = ("CreateNamespace=true", "PrunePropagationPolicy=orphan", "Prune=false")
    app = parse_application(app_doc(syncPolicy={"syncOptions": list(written)}),
                            origin="apps/ray.yaml")
    options = app.sync_policy.options
    assert options.written == written == app.sync_policy.sync_options
    assert options.has(SyncOption.CREATE_NAMESPACE) and options.has(SyncOption.PRUNE_FALSE)
    assert not options.has(SyncOption.REPLACE)
    assert options.prune_propagation() == "orphan"
    assert SyncOptions().prune_propagation() == "foreground"
    assert app.sync_policy.options is options  # not parsed again when asked
    again = dataclasses.replace(app.sync_policy, sync_options=("Replace=true",))
    assert again.options.has(SyncOption.REPLACE) and not again.options.has("Prune=false")


def test_an_operations_options_replace_the_apps_of_the_same_name() -> None:
    app = application_from_flags(name="a", repo_url="https://x/r.git", sync_policy=SyncPolicy(
        sync_options=("Prune=false", "CreateNamespace=true")))
    merged = with_sync_options(app, ["Prune=true", "Replace=true"])
    assert merged.sync_policy.sync_options == ("CreateNamespace=true", "Prune=true",
                                               "Replace=true")
    assert merged.sync_policy.has_option("Prune=true")
    assert not merged.sync_policy.has_option(SyncOption.PRUNE_FALSE)
    assert with_sync_options(app, []) is app


def test_a_resources_annotation_is_parsed_trimmed() -> None:
    obj = {"metadata": {"annotations": {
        "argocd.argoproj.io/sync-options": " Prune=false ,Delete=false,, "}}}
    options = sync_options(obj)
    assert options.written == ("Prune=false", "Delete=false")
    assert options.has(SyncOption.PRUNE_FALSE) and options.has(SyncOption.DELETE_FALSE)
    assert sync_options({}).written == ()


def test_rules_are_compiled_once_per_rule_set(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """A sync asks for the rules three times (compare, sync, compare after): one compile,
    and again only when the app's rules or argocd-cm's change."""
    compiled = count_compiles(monkeypatch)
    system = [SystemSettings()]
    pipeline = Pipeline(cast(Kube, None), GitSource(tmp_path), cast(RecordStore, None),
                        system=lambda: system[0])
    app = parse_application(app_doc(ignoreDifferences=WRITTEN), origin="apps/ray.yaml")
    first = pipeline.rules(app)
    assert pipeline.rules(app) is first and pipeline.rules(app, system[0]) is first
    assert compiled == ["Application ray"]
    reparsed = parse_application(app_doc(ignoreDifferences=WRITTEN), origin="apps/ray.yaml")
    assert pipeline.rules(reparsed) is first  # the same rules, parsed again: same key
    changed = dataclasses.replace(app, ignore_differences=app.ignore_differences[:1])
    assert pipeline.rules(changed) is not first
    system[0] = SystemSettings(SystemDiff(), digest="edited")
    pipeline.rules(changed)
    assert len(compiled) == 3
    pipeline.forget("ray")  # the app was deleted: a re-added one compiles afresh
    assert pipeline.rules(changed) is not first and len(compiled) == 4
