"""argocd-cm: parse, merge with the app's rules, knownTypeFields, Lua health, hostile input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.diff import compare, compile_rules
from gitops_ray.diff.knowntypes import compile_known_fields, normalize_known_types
from gitops_ray.errors import ConfigError, DiffError
from gitops_ray.health import HealthStatus, assess
from gitops_ray.health.lua import BUDGET_ERROR, LuaCheck, run_lua_health
from gitops_ray.quantity import canonical_quantity
from gitops_ray.reconcile.argocdcm import (
    NO_SETTINGS,
    SystemSettings,
    load_argocd_cm_file,
    parse_argocd_cm,
)
from gitops_ray.types import ResourceKey
from tests.samples import raycluster

POD_SPECS = yaml.safe_dump([
    {"field": "spec.headGroupSpec.template.spec", "type": "core/v1/PodSpec"},
    {"field": "spec.workerGroupSpecs.template.spec", "type": "core/v1/PodSpec"}])
HEALTH = """
hs = {}
if obj.status ~= nil and obj.status.state == "ready" then
  hs.status = "Healthy"
  hs.message = "ready per argocd-cm"
  return hs
end
hs.status = "Progressing"
hs.message = "waiting"
return hs
"""


def settings(**data: str) -> SystemSettings:
    return parse_argocd_cm({"kind": "ConfigMap", "data": data}, origin="test argocd-cm")


def rc(cpu: str = "2", memory: str = "4Gi", *, state: str | None = None) -> dict[str, Any]:
    obj = raycluster("rc", "apps")
    for template in [obj["spec"]["headGroupSpec"]["template"],
                     *(g["template"] for g in obj["spec"]["workerGroupSpecs"])]:
        template["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu}}
    if state:
        obj["status"] = {"state": state}
    return obj


def deployment(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps"}, "spec": spec}


def service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc", "namespace": "apps"}, "spec": spec}


# -- quantities ---------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "canonical"), [
    ("2000m", "2"), ("2", "2"), (2, "2"), ("0.5", "500m"), (0.5, "500m"), ("1500m", "1500m"),
    ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("512Mi", "512Mi"),
    ("1000", "1k"), ("1e3", "1e3"), ("1E", "1E"), ("0", "0"), ("0.0000000001", "1n"),
    ("1073741824", "1073741824"),  # the format follows the suffix, as the API server's
])
def test_canonical_quantities_are_the_api_servers(value: object, canonical: str) -> None:
    assert canonical_quantity(value) == canonical


@pytest.mark.parametrize("value", ["abc", "1e999999", "1" * 100, True, None, {}])
def test_what_is_not_a_quantity_is_left_alone(value: object) -> None:
    assert canonical_quantity(value) is None


# -- knownTypeFields ------------------------------------------------------------------------

def test_known_pod_spec_fields_make_equal_quantities_compare_equal() -> None:
    system = settings(**{"resource.customizations.knownTypeFields.ray.io_RayCluster": POD_SPECS})
    assert system.warnings == ()
    git, live = rc("2000m", "1024Mi"), rc("2", "1Gi")
    plain = compile_rules([], builtin=False)
    assert compare(desired=git, predicted=git, live=live, rules=plain).out_of_sync
    rules = compile_rules([], builtin=False, system=system.diff)
    assert not compare(desired=git, predicted=git, live=live, rules=rules).out_of_sync
    assert compare(desired=git, predicted=git, live=rc("3"), rules=rules).out_of_sync
    assert git == rc("2000m", "1024Mi")  # the inputs are untouched


def test_known_types_apply_to_the_exact_group_and_kind_only() -> None:
    system = settings(**{"resource.customizations.knownTypeFields.ray.io_RayJob": POD_SPECS})
    rules = compile_rules([], builtin=False, system=system.diff)
    assert compare(desired=rc("2000m"), predicted=None, live=rc("2"), rules=rules).out_of_sync


def test_known_type_paths_iterate_lists_and_unknown_types_are_warnings() -> None:
    fields, warnings = compile_known_fields([
        {"field": "spec.groups.containers", "type": "core/v1/Container"},
        {"field": "spec.x", "type": "core/v1/NoSuchType"},
        {"field": "spec.y"}], label="k")
    assert [f.type for f in fields] == ["core/v1/Container"]
    assert warnings[0].startswith("k[1]: type 'core/v1/NoSuchType' is not supported")
    assert warnings[1].startswith("k[2]: expected a mapping")
    obj = {"spec": {"groups": [{"containers": [{"resources": {"limits": {"cpu": "1000m"}}}]},
                               "not a dict", {"other": 1}]}}
    normalize_known_types(obj, tuple(fields))
    assert obj["spec"]["groups"][0]["containers"][0]["resources"]["limits"]["cpu"] == "1"


def test_a_bad_type_is_a_warning_of_every_app_not_a_failure() -> None:
    system = settings(**{"resource.customizations.knownTypeFields.ray.io_RayCluster":
                         "- {field: spec.a, type: core/v1/NoSuchType}"})
    assert "core/v1/NoSuchType" in system.warnings[0]
    assert system.broken == ()


# -- ignoreDifferences ----------------------------------------------------------------------

def test_system_ignore_rules_are_scoped_by_the_key() -> None:
    system = settings(**{
        "resource.customizations.ignoreDifferences.apps_Deployment":
            "jsonPointers: [/spec/replicas]",
        "resource.customizations.ignoreDifferences.Service":  # core group: <kind> alone
            "jqPathExpressions: [.spec.clusterIP]",
    })
    rules = compile_rules([], builtin=False, system=system.diff)
    assert rules.normalize(deployment(replicas=3, paused=True)).obj["spec"] == {"paused": True}
    assert rules.normalize(service(clusterIP="1.2.3.4")).obj["spec"] == {}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "spec": {"clusterIP": "x"}}
    assert rules.normalize(cm).obj["spec"] == {"clusterIP": "x"}


def test_all_key_and_legacy_map_and_app_rules_merge_without_duplicates() -> None:
    legacy = yaml.safe_dump({"apps/Deployment": {
        "ignoreDifferences": "jsonPointers: [/spec/paused]"}})
    system = settings(**{
        "resource.customizations": legacy,
        "resource.customizations.ignoreDifferences.all": "jsonPointers: [/spec/note]",
    })
    own = [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/paused"]}]
    rules = compile_rules(own, builtin=False, system=system.diff, where="Application a")
    labels = [r.label for r in rules.rules]
    assert labels == ["Application a: ignoreDifferences[0]",
                      "resource.customizations.ignoreDifferences.all"]  # duplicate dropped
    assert rules.normalize(deployment(paused=True, note="n", replicas=1)).obj["spec"] == {
        "replicas": 1}
    assert rules.normalize(service(note="n")).obj["spec"] == {}


def test_split_key_replaces_the_legacy_value_of_the_same_type() -> None:
    system = settings(**{
        "resource.customizations": yaml.safe_dump({"apps/Deployment": {
            "ignoreDifferences": "jsonPointers: [/spec/paused]"}}),
        "resource.customizations.ignoreDifferences.apps_Deployment":
            "jsonPointers: [/spec/replicas]",
    })
    rules = compile_rules([], builtin=False, system=system.diff)
    assert rules.normalize(deployment(paused=True, replicas=1)).obj["spec"] == {"paused": True}


def test_managed_fields_managers_of_a_system_rule_count() -> None:
    system = settings(**{"resource.customizations.ignoreDifferences.apps_Deployment":
                         "managedFieldsManagers: [kube-controller-manager]"})
    rules = compile_rules([], builtin=False, system=system.diff)
    assert rules.rules[0].managers == frozenset({"kube-controller-manager"})


# -- broken keys: fail only what they govern -----------------------------------------------

@pytest.mark.parametrize("value", [
    "jsonPointers: [unclosed",  # YAML syntax
    "- a list",  # not a mapping
    "jsonPointer: [/x]",  # unknown field
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)),  # an alias bomb
])
def test_a_broken_ignore_key_fails_the_comparison_of_its_kind_only(value: str) -> None:
    key = "resource.customizations.ignoreDifferences.apps_Deployment"
    system = settings(**{key: value})
    rules = compile_rules([], builtin=False, system=system.diff)
    with pytest.raises(DiffError, match=key) as error:
        compare(desired=deployment(), predicted=None, live=deployment(), rules=rules)
    assert value not in str(error.value)  # the key is named, its value is not quoted
    assert not compare(desired=service(), predicted=None, live=service(),
                       rules=rules).out_of_sync


def test_a_huge_value_is_refused_by_the_yaml_bounds() -> None:
    key = "resource.customizations.ignoreDifferences.apps_Deployment"
    system = settings(**{key: "jsonPointers: [" + "/a, " * 3_000_000 + "]"})
    assert "over the limit" in str(system.broken[0])


def test_a_broken_compareoptions_fails_every_comparison() -> None:
    system = settings(**{"resource.compareoptions": "[not, a, mapping]"})
    rules = compile_rules([], builtin=False, system=system.diff)
    with pytest.raises(DiffError, match=r"resource\.compareoptions"):
        compare(desired=service(), predicted=None, live=service(), rules=rules)


def test_unknown_customization_type_and_bad_group_kind_are_warnings() -> None:
    system = settings(**{"resource.customizations.colour.apps_Deployment": "x",
                         "resource.customizations.health.a_b_c": "return {}",
                         "resource.customizations.actions.apps_Deployment": "ignored"})
    assert len(system.warnings) == 2
    assert not system.health


def test_no_configmap_is_no_settings_and_the_digest_follows_relevant_keys() -> None:
    assert parse_argocd_cm(None, origin="x") is NO_SETTINGS
    one = settings(**{"resource.compareoptions": "ignoreAggregatedRoles: true"})
    assert one.digest == settings(**{"resource.compareoptions": "ignoreAggregatedRoles: true",
                                     "url": "https://argocd.example"}).digest
    assert one.digest != settings(**{"resource.compareoptions": "{}"}).digest
    with pytest.raises(ConfigError, match="'data' is not a mapping"):
        parse_argocd_cm({"data": ["x"]}, origin="x")


def test_a_configmap_file(tmp_path: Path) -> None:
    path = tmp_path / "argocd-cm.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "argocd-cm"},
                                    "data": {"resource.compareoptions": "{}"}}))
    assert load_argocd_cm_file(path).digest
    path.write_text("kind: Secret\n")
    with pytest.raises(ConfigError, match="expected a ConfigMap"):
        load_argocd_cm_file(path)
    path.write_text("kind: [")
    with pytest.raises(ConfigError, match="invalid YAML at line 1"):
        load_argocd_cm_file(path)


# -- compare options ------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "status_counts"), [
    ("", False), ("all", False), ("crd", True), ("none", True), ("off", True),
    ("false", True), ("bogus", False)])
def test_ignore_resource_status_field(value: str, status_counts: bool) -> None:
    system = settings(**{"resource.compareoptions": f"ignoreResourceStatusField: '{value}'"})
    rules = compile_rules([], builtin=False, system=system.diff)
    git, live = service(), dict(service(), status={"loadBalancer": {"ingress": [{}]}})
    git["status"] = {}
    assert compare(desired=git, predicted=git, live=live, rules=rules).out_of_sync \
        is status_counts
    assert bool(system.warnings) is (value == "bogus")


def test_crd_status_is_ignored_under_crd() -> None:
    system = settings(**{"resource.compareoptions": "ignoreResourceStatusField: crd"})
    rules = compile_rules([], builtin=False, system=system.diff)
    assert rules.drops_status(ResourceKey("apiextensions.k8s.io", "CustomResourceDefinition",
                                          "", "x"))
    assert not rules.drops_status(ResourceKey("ray.io", "RayCluster", "a", "x"))


def test_ignore_aggregated_roles() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "agg"}, "rules": [{"verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}
    live = dict(copy.deepcopy(role), rules=[{"verbs": ["list"]}])
    on = settings(**{"resource.compareoptions": "ignoreAggregatedRoles: true"})
    off = settings(**{"resource.compareoptions": "ignoreDifferencesOnResourceUpdates: false"})
    assert not compare(desired=role, predicted=role, live=live,
                       rules=compile_rules([], system=on.diff)).out_of_sync
    assert compare(desired=role, predicted=role, live=live,
                   rules=compile_rules([], system=off.diff)).out_of_sync
    assert off.diff.on_resource_updates is False


# -- Lua health -----------------------------------------------------------------------------

def test_a_custom_lua_check_comes_before_the_built_in_one() -> None:
    system = settings(**{"resource.customizations.health.ray.io_RayCluster": HEALTH})
    verdict = assess(rc(state="ready"), custom=system.health)
    assert verdict is not None
    assert (verdict.status, verdict.message) == (HealthStatus.HEALTHY, "ready per argocd-cm")
    builtin = assess(rc(state="ready"))
    assert builtin is not None and builtin.message != "ready per argocd-cm"
    deleting = rc(state="ready")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    pending = assess(deleting, custom=system.health)
    assert pending is not None and pending.status is HealthStatus.PROGRESSING


def test_core_kinds_are_keyed_by_kind_and_the_legacy_map_allows_wildcards() -> None:
    system = settings(**{
        "resource.customizations.health.Service": 'return {status = "Degraded"}',
        "resource.customizations": yaml.safe_dump(
            {"*.io/*": {"health.lua": 'return {status = "Suspended"}'}}),
    })
    assert assess(service(), custom=system.health).status is HealthStatus.DEGRADED  # type: ignore[union-attr]
    assert assess(rc(), custom=system.health).status is HealthStatus.SUSPENDED  # type: ignore[union-attr]


@pytest.mark.parametrize(("script", "status", "message"), [
    ("while true do end", HealthStatus.UNKNOWN, BUDGET_ERROR),
    ("while true do pcall(function() while true do end end) end", HealthStatus.UNKNOWN,
     BUDGET_ERROR),
    ('local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 4096) end',
     HealthStatus.UNKNOWN, "not enough memory"),
    ('return {status = "Fine"}', HealthStatus.UNKNOWN, "Lua returned an invalid health status"),
    ("return 3", HealthStatus.UNKNOWN, "expect table output from Lua script, not number"),
    ('io.open("/etc/passwd")', HealthStatus.UNKNOWN, "global 'io'"),
    ('os.execute("true")', HealthStatus.UNKNOWN, "field 'execute'"),
    ('require("io")', HealthStatus.UNKNOWN, "module 'io' is not available"),
    ('load("return 1")()', HealthStatus.UNKNOWN, "global 'load'"),
    ("\x1bLuaT", HealthStatus.UNKNOWN, "binary chunk"),
    ("syntax error", HealthStatus.UNKNOWN, "syntax error"),
    ('local os = require("os") return {status = os.time() > 0 and "Healthy" or "Degraded",'
     ' message = string.format("%d workers", #obj.spec.workerGroupSpecs)}',
     HealthStatus.HEALTHY, "2 workers"),
])
def test_lua_sandbox_and_budgets(script: str, status: HealthStatus, message: str) -> None:
    # a long deadline: on a busy machine the instruction and memory budgets stop it first
    verdict = run_lua_health(LuaCheck("k", script), rc(), timeout=60)
    assert verdict is not None
    assert verdict.status is status
    assert message in verdict.message
    after = run_lua_health(LuaCheck("k", 'return {status = "Healthy"}'), rc())
    assert after is not None and after.status is HealthStatus.HEALTHY  # the state recovers


def test_scripts_cannot_change_what_later_scripts_see() -> None:
    poison = 'getmetatable("").__index.format = nil; string.format = nil'
    run_lua_health(LuaCheck("k", poison), rc())
    verdict = run_lua_health(LuaCheck("k", 'return {status = "Healthy",'
                                           ' message = ("%s"):format("ok")}'), rc())
    assert verdict is not None and verdict.message == "ok"


def test_no_status_is_no_verdict_and_use_open_libs_is_refused() -> None:
    system = settings(**{
        "resource.customizations.health.ray.io_RayCluster": "return nil",
        "resource.customizations.useOpenLibs.ray.io_RayCluster": "true"})
    assert assess(rc(state="ready"), custom=system.health) is None
    assert "useOpenLibs is not supported" in system.warnings[0]
