"""Argo CD's status and operations as pure functions (``gitops_ray.reconcile.argostatus``).

The status is validated against Argo CD v3.2.11's own Application CRD schema, with every
object closed (``additionalProperties: false``), so a field Argo CD does not know (which
the API server would prune without a word) fails here.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from gitops_ray.reconcile.argostatus import (
    ManualOperation,
    OptIn,
    Projection,
    Selector,
    application_status,
    history,
    opt_in,
    parse_operation,
    requested_operation,
)
from gitops_ray.render.apps import Application, AppSource, HelmSource
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.types import ResourceKey
from localcluster.build import argocd_crds

SPEC = {"project": "default",
        "source": {"repoURL": "https://git.example/ray.git", "path": "apps/ray",
                   "targetRevision": "HEAD"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "ray"}}
APP = Application("ray", AppSource("https://git.example/ray.git", "apps/ray"))
SHA1, SHA2 = "a" * 40, "b" * 40


def record(**extra: Any) -> dict[str, Any]:
    rows = [{"key": "ray.io/RayCluster:ray/demo", "status": "Synced", "reason": "",
             "group": "ray.io", "version": "v1", "kind": "RayCluster", "namespace": "ray",
             "name": "demo", "health": {"status": "Progressing", "message": "head pod pending"}},
            {"key": "ConfigMap:ray/old", "status": "OutOfSync", "reason": "extraneous",
             "group": "", "version": "v1", "kind": "ConfigMap", "namespace": "ray",
             "name": "old"}]
    op = {"revision": SHA1, "phase": "Succeeded", "message": "", "reason": "",
          "startedAt": 1_700_000_000.5, "finishedAt": 1_700_000_002.0, "automated": True,
          "resources": [{"key": "ray.io/RayCluster:ray/demo", "action": "configured",
                         "message": "", "group": "ray.io", "kind": "RayCluster",
                         "namespace": "ray", "name": "demo"},
                        {"key": "ConfigMap:ray/gone", "action": "pruned", "message": "",
                         "group": "", "kind": "ConfigMap", "namespace": "ray", "name": "gone"},
                        {"key": "ConfigMap:ray/x", "action": "not-ours", "message": "",
                         "group": "", "kind": "ConfigMap", "namespace": "ray", "name": "x"}]}
    return {"revision": SHA1, "sync": "OutOfSync", "health": "Progressing",
            "healthMessage": "head pod pending", "resources": rows, "comparedAt": 1_700_000_003.0,
            "images": ["rayproject/ray:2.9.0"], "error": "",
            "conditions": [{"type": "InvalidSpecError", "message": "project says no"}],
            "operation": op, **extra}


def closed(schema: Any) -> Any:
    """The schema with every object closed to unknown properties."""
    if isinstance(schema, dict):
        out = {k: closed(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and \
                not out.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def status_schema() -> dict[str, Any]:
    crd = next(c for c in json.loads(argocd_crds().read_text())
               if c["spec"]["names"]["kind"] == "Application")
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return closed(schema["properties"]["status"])  # type: ignore[no-any-return]


def test_the_status_fits_argo_cds_own_schema(status_schema: dict[str, Any]) -> None:
    live = {"metadata": {"name": "ray"}, "spec": SPEC}
    status = application_status(Projection(decode_status(record()), APP, live,
                                           now=1_700_000_004.0))
    jsonschema.validate(status, status_schema)
    assert status["sync"] == {"status": "OutOfSync", "revision": SHA1,
                              "comparedTo": {"source": SPEC["source"],
                                             "destination": SPEC["destination"]}}
    assert status["health"] == {"status": "Progressing", "message": "head pod pending",
                                "lastTransitionTime": "2023-11-14T22:13:24Z"}
    assert status["resources"][1] == {"group": "", "version": "v1", "kind": "ConfigMap",
                                      "namespace": "ray", "name": "old", "status": "OutOfSync",
                                      "requiresPruning": True}
    results = status["operationState"]["syncResult"]["resources"]
    assert [(r["name"], r["status"]) for r in results] == [("demo", "Synced"),
                                                          ("gone", "Pruned")]
    assert status["operationState"]["operation"]["initiatedBy"] == {"automated": True}
    # milliseconds: a RollingSync step needs startedAt strictly after its own
    # second-precision transition time (moments.rfc3339_fine)
    assert status["operationState"]["startedAt"] == "2023-11-14T22:13:20.500Z"
    assert status["history"][0]["id"] == 0 and status["history"][0]["revision"] == SHA1
    assert status["reconciledAt"] == "2023-11-14T22:13:23Z"
    assert status["sourceType"] == "Directory"
    assert status["summary"] == {"images": ["rayproject/ray:2.9.0"]}


def test_a_failed_sync_and_an_error_are_conditions_that_keep_their_transition_time(
        status_schema: dict[str, Any]) -> None:
    failed = {**record()["operation"], "phase": "Failed", "message": "apply failed"}
    old = [{"type": "InvalidSpecError", "message": "project says no",
            "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    live = {"spec": SPEC, "status": {"conditions": old}}
    status = application_status(Projection(
        decode_status(record(operation=failed, error="render: helm failed")), APP, live, now=1.0e9))
    jsonschema.validate(status, status_schema)
    assert [(c["type"], c["lastTransitionTime"]) for c in status["conditions"]] == [
        ("InvalidSpecError", "2020-01-01T00:00:00Z"),
        ("ComparisonError", "2001-09-09T01:46:40Z"), ("SyncError", "2001-09-09T01:46:40Z")]
    assert status["conditions"][2]["message"] == "Failed sync attempt to aaaaaaa: apply failed"
    assert "history" not in status or status["history"] == []


def test_a_running_operation_has_no_finished_time(status_schema: dict[str, Any]) -> None:
    running = {**record()["operation"], "phase": "Running", "message": "waiting for wave 1",
               "wave": 1}
    status = application_status(Projection(decode_status(record(operationState=running)), APP,
                                           {"spec": SPEC}, now=1.0e9))
    jsonschema.validate(status, status_schema)
    assert status["operationState"]["phase"] == "Running"
    assert "finishedAt" not in status["operationState"]


def test_history_adds_each_deployment_once_with_increasing_ids() -> None:
    op = record()["operation"]
    first = history([], decode_status({"operation": op}), SPEC)
    again = history(first, decode_status({"operation": op}), SPEC, deployed=op["startedAt"])
    assert again == first
    second_op = {**op, "revision": SHA2, "startedAt": op["startedAt"] + 0.1}
    second = history(first, decode_status({"operation": second_op}), SPEC, deployed=op["startedAt"])
    assert [(e["id"], e["revision"]) for e in second] == [(0, SHA1), (1, SHA2)]
    dry = {**second_op, "startedAt": op["startedAt"] + 9, "dryRun": True}
    assert history(second, decode_status({"operation": dry}), SPEC) == second
    many = [{"id": i, "revision": SHA1, "deployedAt": "x"} for i in range(10)]
    assert [e["id"] for e in history(many, decode_status({"operation": second_op}), SPEC)] == \
        [*range(1, 10), 10]


def test_a_rollback_records_the_source_it_asked_for() -> None:
    source = {**SPEC["source"], "path": "old/path"}
    op = {**record()["operation"], "argocdOperation": {
        "sync": {"revision": SHA2, "source": source}, "initiatedBy": {"username": "amy"}}}
    [entry] = history([], decode_status({"operation": op}), SPEC)
    assert entry["source"] == source and entry["initiatedBy"] == {"username": "amy"}


def test_a_partial_sync_is_not_a_deployment() -> None:
    # As Argo CD (controller/sync.go): history only for syncs of the whole app.
    op = {**record()["operation"], "argocdOperation": {
        "sync": {"revision": SHA2, "resources": [{"group": "ray.io", "kind": "RayCluster",
                                                  "name": "demo"}]}}}
    assert history([], decode_status({"operation": op}), SPEC) == []


def test_a_requested_operation_without_a_user_is_not_recorded_as_automated() -> None:
    # argocd-server with auth disabled sets `initiatedBy: {}` (session.Username is "").
    op = {**record()["operation"], "argocdOperation": {
        "sync": {"revision": SHA2}, "initiatedBy": {}}}
    [entry] = history([], decode_status({"operation": op}), SPEC)
    assert entry["initiatedBy"] == {}
    [automated] = history([], decode_status({"operation": record()["operation"]}), SPEC)
    assert automated["initiatedBy"] == {"automated": True}


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"gitops-ray.io/managed": "true", "argocd.argoproj.io/skip-reconcile": "true"},
     OptIn.MANAGED),
    ({"gitops-ray.io/managed": "True", "argocd.argoproj.io/skip-reconcile": "TRUE"},
     OptIn.MANAGED),
    ({"gitops-ray.io/managed": "true"}, OptIn.NOT_SKIPPED),
    ({"argocd.argoproj.io/skip-reconcile": "true"}, OptIn.NOT_MANAGED),
    ({"gitops-ray.io/managed": "false", "argocd.argoproj.io/skip-reconcile": "false"},
     OptIn.NOT_OURS),
    ({}, OptIn.NOT_OURS),
])
def test_opt_in_takes_both_annotations(annotations: dict[str, str], expected: OptIn) -> None:
    assert opt_in({"metadata": {"annotations": annotations}}) is expected
    assert bool(expected.warning) == (expected in (OptIn.NOT_SKIPPED, OptIn.NOT_MANAGED))


def test_an_operation_is_parsed_with_its_selection_and_options() -> None:
    op = parse_operation({
        "sync": {"revision": SHA2, "prune": True, "dryRun": False,
                 "resources": [{"group": "ray.io", "kind": "RayCluster", "name": "demo"}],
                 "syncOptions": ["ServerSideApply=true"]},
        "initiatedBy": {"username": "amy"}, "retry": {"limit": 3}})
    assert op is not None
    assert (op.revision, op.prune, op.dry_run, op.retry_limit, op.user) == (SHA2, True, False,
                                                                            3, "amy")
    assert op.sync_options.written == ("ServerSideApply=true",) and not op.rollback
    keys = [ResourceKey("ray.io", "RayCluster", "ray", "demo"),
            ResourceKey("", "ConfigMap", "ray", "demo")]
    assert op.only(keys) == frozenset(keys[:1])
    assert parse_operation(None) is None and parse_operation({"info": []}) is None


@pytest.mark.parametrize("raw", [
    "sync", {"sync": "all"}, {"sync": {"prune": "yes"}}, {"sync": {"revision": 7}},
    {"sync": {"resources": [{"kind": "RayCluster"}]}}, {"sync": {"syncOptions": "x"}},
    {"sync": {}, "retry": {"limit": "many"}},
])
def test_a_malformed_operation_is_refused_with_the_field_named(raw: object) -> None:
    op = requested_operation(raw)
    assert isinstance(op, ManualOperation)
    assert op.error.startswith("invalid operation: operation")


def test_a_selector_without_namespace_matches_any_namespace() -> None:
    key = ResourceKey("", "ConfigMap", "ray", "c")
    assert Selector("", "ConfigMap", "c").matches(key)
    assert not Selector("", "ConfigMap", "c", "other").matches(key)


def test_source_type_follows_the_source() -> None:
    helm = Application("h", AppSource("u", helm=HelmSource()))
    status = application_status(Projection(decode_status({}), helm, {"spec": SPEC}, now=0))
    assert status["sourceType"] == "Helm"
    assert status["sync"]["status"] == "Unknown" and status["health"]["status"] == "Unknown"


def test_a_multi_source_app_has_argo_cds_revisions_lists(
        status_schema: dict[str, Any]) -> None:
    sources = [{"repoURL": "https://charts.example/", "chart": "ray-cluster",
                "targetRevision": "1.5.*", "helm": {"valueFiles": ["$values/v.yaml"]}},
               {"repoURL": "https://git.example/values.git", "targetRevision": "main",
                "ref": "values"}]
    spec = {**{k: v for k, v in SPEC.items() if k != "source"}, "sources": sources}
    joined = f"1.5.1,{SHA1}"
    rec = record(revision=joined)
    rec["operation"]["revision"] = joined
    live = {"metadata": {"name": "ray"}, "spec": spec}
    status = application_status(Projection(decode_status(rec), APP, live, now=1_700_000_004.0))
    jsonschema.validate(status, status_schema)
    assert status["sync"]["revisions"] == ["1.5.1", SHA1]
    assert "revision" not in status["sync"]
    assert status["sync"]["comparedTo"]["sources"] == sources
    assert status["operationState"]["syncResult"]["revisions"] == ["1.5.1", SHA1]
    assert status["operationState"]["syncResult"]["sources"] == sources
    assert status["history"][0]["revisions"] == ["1.5.1", SHA1]
    assert status["history"][0]["sources"] == sources
    rollback = parse_operation({"sync": {"revisions": ["1.5.0", SHA2], "sources": sources}})
    assert rollback is not None and rollback.revision == f"1.5.0,{SHA2}" and rollback.rollback
def test_health_keeps_its_transition_time_while_the_status_stays() -> None:
    """Argo CD's stock ``on-deployed`` trigger compares it with the operation's times."""
    before = {"status": "Progressing", "lastTransitionTime": "2023-01-01T00:00:00Z"}
    live = {"metadata": {"name": "ray"}, "spec": SPEC, "status": {"health": before}}
    same = application_status(Projection(decode_status(record()), APP, live,
                                           now=1_700_000_004.0))
    assert same["health"]["lastTransitionTime"] == "2023-01-01T00:00:00Z"
    live["status"] = {"health": {**before, "status": "Healthy"}}
    changed = application_status(Projection(decode_status(record()), APP, live,
                                           now=1_700_000_004.0))
    assert changed["health"]["lastTransitionTime"] == "2023-11-14T22:13:24Z"
