"""``ignoreDifferences`` and sync options are parsed into types once, where the Application
is, and the rules compiled once per sync (issue 35); argocd-cm's system rules where
argocd-cm is read, an operation's sync options where the operation is."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from gitops_ray.diff import compare, compile_rules
from gitops_ray.diff.system import SystemDiff, SystemRule
from gitops_ray.errors import ConfigError, SystemSettingsError
from gitops_ray.kube import Kube
from gitops_ray.reconcile.argocdcm import SystemSettings, configmap_settings, parse_argocd_cm
from gitops_ray.reconcile.argostatus import parse_operation
from gitops_ray.reconcile.pipeline import Pipeline
from gitops_ray.render import application_from_flags
from gitops_ray.render.applications import parse_application
from gitops_ray.render.apps import SyncPolicy
from gitops_ray.runtime.operations import with_sync_options
from gitops_ray.source import GitSource
from gitops_ray.sync.order import sync_options
from gitops_ray.sync.reasons import Reason, reason_of
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
    merged = with_sync_options(app, SyncOptions.parse(["Prune=true", "Replace=true"]))
    assert merged.sync_policy.sync_options == ("CreateNamespace=true", "Prune=true",
                                               "Replace=true")
    assert merged.sync_policy.has_option("Prune=true")
    assert not merged.sync_policy.has_option(SyncOption.PRUNE_FALSE)
    assert with_sync_options(app, SyncOptions()) is app


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


# -- argocd-cm's system rules: typed where argocd-cm is read ------------------------------

CM_KEY = "resource.customizations.ignoreDifferences.apps_Deployment"


def cm_settings(**data: str) -> SystemSettings:
    return parse_argocd_cm({"kind": "ConfigMap", "data": data}, origin="test argocd-cm")


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps"}, "spec": {"replicas": 1}}


def service() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc", "namespace": "apps"}, "spec": {}}


def test_system_rules_are_typed_and_scoped_by_their_key() -> None:
    legacy = yaml.safe_dump({"batch/Job": {"ignoreDifferences": "jsonPointers: [/spec/x]"}})
    system = cm_settings(**{
        CM_KEY: "jsonPointers: [/spec/replicas]\nmanagedFieldsManagers: [hpa]",
        "resource.customizations.ignoreDifferences.Service": "jqPathExpressions: [.spec.a]",
        "resource.customizations.ignoreDifferences.all": "jsonPointers: []",  # ignores nothing
        "resource.customizations": legacy})
    assert system.diff.ignore == (  # in the order of their override keys
        SystemRule("resource.customizations.ignoreDifferences.Service",
                   IgnoreRule("Service", jq_path_expressions=(".spec.a",))),
        SystemRule(CM_KEY, IgnoreRule("Deployment", "apps", json_pointers=("/spec/replicas",),
                                      managed_fields_managers=("hpa",))),
        SystemRule("resource.customizations[batch/Job].ignoreDifferences",
                   IgnoreRule("Job", "batch", json_pointers=("/spec/x",))))
    assert hash(system.diff.ignore) and system.broken == () and system.warnings == ()


def test_the_compile_takes_typed_system_and_built_in_rules_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    system = cm_settings(**{CM_KEY: "jsonPointers: [/spec/replicas]",
                            "resource.compareoptions": "ignoreAggregatedRoles: true"})

    def parse(*_: object) -> IgnoreRule:
        raise AssertionError("a rule parsed at compile time")

    monkeypatch.setattr(IgnoreRule, "parse", parse)
    rules = compile_rules([IgnoreRule("Secret")], system=system.diff, where="Application a")
    labels = [r.label for r in rules.rules]
    assert labels[:3] == ["Application a: ignoreDifferences[0]", CM_KEY,
                          "argocd-cm ignoreAggregatedRoles"]
    assert all(label.startswith("built-in") for label in labels[3:]) and labels[3:]
    assert rules.normalize(deployment()).obj["spec"] == {}


@pytest.mark.parametrize(("value", "reason"), [
    ("jsonPointers: /spec/replicas", "jsonPointers: expected a list of strings"),
    ("jsonPointers: [1]", "jsonPointers: expected a list of strings"),
    ("managedFieldsManagers: hpa", "managedFieldsManagers: expected a list of strings"),
    ("jsonPointers: [spec-secret]", "jsonPointers[0]: not a JSON pointer"),
    ("jqPathExpressions: [.spec.ok, '.spec[secret']", "jqPathExpressions[1]: not a valid jq"),
    ("jsonPointer: [/x]", "unknown field(s) jsonPointer"),
    ("[a, list]", "expected a mapping of jsonPointers"),
])
def test_a_malformed_system_rule_fails_the_comparison_of_its_kind_only(
        value: str, reason: str) -> None:
    system = cm_settings(**{CM_KEY: value})
    [broken] = system.broken
    assert str(broken).startswith(f"{CM_KEY}: {reason}")
    assert "secret" not in str(broken)  # the key and field are named, the value is not
    rules = compile_rules([], system=system.diff)  # never fails on a system rule
    with pytest.raises(SystemSettingsError, match=re.escape(CM_KEY)) as error:
        compare(desired=deployment(), predicted=None, live=deployment(), rules=rules)
    assert error.value.reason == "SystemSettingsInvalid" == Reason.SYSTEM_SETTINGS_INVALID
    assert reason_of(error.value) is Reason.SYSTEM_SETTINGS_INVALID
    assert not compare(desired=service(), predicted=None, live=service(),
                       rules=rules).out_of_sync


def test_ignore_resource_updates_are_typed_and_a_malformed_one_is_a_warning() -> None:
    system = cm_settings(**{
        "resource.customizations.ignoreResourceUpdates.all": "jsonPointers: [/status]",
        "resource.customizations.ignoreResourceUpdates.apps_Deployment": "jsonPointers: x",
        "resource.customizations.ignoreResourceUpdates.ray.io_RayCluster": "[unclosed",
        "resource.customizations": yaml.safe_dump({"batch/Job": {
            "ignoreResourceUpdates": "jqPathExpressions: [.status.a]"}})})
    assert system.diff.resource_updates == (
        SystemRule("resource.customizations.ignoreResourceUpdates.all",
                   IgnoreRule("*", "*", json_pointers=("/status",))),
        SystemRule("resource.customizations[batch/Job].ignoreResourceUpdates",
                   IgnoreRule("Job", "batch", jq_path_expressions=(".status.a",))))
    assert system.broken == ()  # gitops-ray does not use them: nothing fails
    assert sorted(w.split(":")[0] for w in system.warnings) == [
        "resource.customizations.ignoreResourceUpdates.apps_Deployment",
        "resource.customizations.ignoreResourceUpdates.ray.io_RayCluster"]
    assert compile_rules([], builtin=False, system=system.diff).rules == ()


def test_an_unreadable_argocd_cm_is_a_system_settings_error() -> None:
    read = configmap_settings(lambda namespace, name: {"data": ["x"]}, namespace="argocd")
    with pytest.raises(SystemSettingsError, match="'data' is not a mapping"):
        read()


# -- an operation's sync options: typed where the operation is read -----------------------

def test_an_operations_sync_options_are_parsed_with_the_operation() -> None:
    op = parse_operation({"sync": {"syncOptions": ["Replace=true", "",
                                                   "PrunePropagationPolicy=orphan"]}})
    assert op is not None and isinstance(op.sync_options, SyncOptions)
    assert op.sync_options.written == ("Replace=true", "PrunePropagationPolicy=orphan")
    assert op.sync_options.has(SyncOption.REPLACE)
    assert op.sync_options.prune_propagation() == "orphan"
    none = parse_operation({"sync": {}})
    assert none is not None and not none.sync_options and none.sync_options == SyncOptions()
    app = application_from_flags(name="a", repo_url="https://x/r.git", sync_policy=SyncPolicy(
        sync_options=("PrunePropagationPolicy=background",)))
    merged = with_sync_options(app, op.sync_options).sync_policy.options
    assert merged.written == ("Replace=true", "PrunePropagationPolicy=orphan")
    assert merged.prune_propagation() == "orphan"
