"""Argo CD's resource tree and managed resources as gitops-ray writes them into Redis.

The format (keys, cache version, JSON) is :mod:`gitops_ray.reconcile.argoviews`'s; the
real argocd-server reading it is ``tests/argocd/test_ui_views.py``. Here: which Argo CD
versions get a write at all, the tree's parent links, Secret masking, and that a failure
(an unknown version, Redis not answering) is a reason, never a raise or a write.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import pytest

from gitops_ray.diff import AppDiff, ResourceDiff, compare, compile_rules
from gitops_ray.kube import NotFound
from gitops_ray.reconcile.argoviews import (
    Format,
    application_tree,
    cache_version,
    managed_resources,
)
from gitops_ray.reconcile.pipeline import Comparison, DesiredObject
from gitops_ray.render.applications import application_from_flags
from gitops_ray.runtime.argoredis import ArgoViews, encode
from gitops_ray.settings import ArgoCD
from gitops_ray.types import Manifest, ResourceKey, SyncStatus
from tests.samples import raycluster

RULES = compile_rules([])
TOKEN = "t0p-s3cret"


@pytest.mark.parametrize("version", ["v3.6.1+c0ffee1", "v3.2.11", "v3.4.0-rc2", "3.5.7"])
def test_the_versions_whose_source_was_read_get_cache_version_1_8_3(version: str) -> None:
    fmt = cache_version(version)
    assert isinstance(fmt, Format)
    assert fmt.tree_key("ray-prod") == "app|resources-tree|ray-prod|1.8.3"
    assert fmt.managed_key("ns_app") == "app|managed-resources|ns_app|1.8.3"


@pytest.mark.parametrize("version", ["v2.14.3", "v3.7.0", "v99.99.99+unknown", "latest", ""])
def test_any_other_version_is_a_reason_not_a_format(version: str) -> None:
    why = cache_version(version)
    assert isinstance(why, str)
    assert "gitops-ray" in why and (version[:10] in why)


def _live(obj: Manifest, uid: str, owner: Manifest | None = None) -> Manifest:
    out = json.loads(json.dumps(obj))
    out["metadata"].update(uid=uid, resourceVersion="7",
                           creationTimestamp="2026-12-02T01:00:00Z")
    if owner is not None:
        out["metadata"]["ownerReferences"] = [
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    return out


def _pod(name: str, group: str) -> Manifest:
    labels = {"ray.io/node-type": "head"} if group == "head" else {"ray.io/group": group,
                                                                   "ray.io/node-type": "worker"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "labels": labels},
            "spec": {"nodeName": "kwok-cpu-0",
                     "containers": [{"name": "ray", "image": "rayproject/ray:2.52.0"}]},
            "status": {"phase": "Running", "containerStatuses": [{"ready": True}]}}


def test_the_tree_has_the_apps_objects_and_what_kuberay_made_under_them() -> None:
    cluster = _live(raycluster("demo", "team"), "uid-rc")
    head = _live(_pod("demo-head", "head"), "uid-head", cluster)
    service = _live({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "demo-head-svc", "namespace": "team"}},
                    "uid-svc", cluster)
    stray = _live(_pod("other", "cpu"), "uid-other")  # owned by nothing of the app
    rows = [{"group": "ray.io", "version": "v1", "kind": "RayCluster", "namespace": "team",
             "name": "demo", "status": "Synced", "health": {"status": "Healthy"}},
            {"version": "v1", "kind": "ConfigMap", "namespace": "team", "name": "gone",
             "status": "OutOfSync"}]
    tree = application_tree(rows, {ResourceKey.of(cluster): cluster},
                            [head, service, stray])
    names = [(n["kind"], n["name"]) for n in tree["nodes"]]
    assert names == [("ConfigMap", "gone"), ("Pod", "demo-head"), ("Service", "demo-head-svc"),
                     ("RayCluster", "demo")]  # sorted by group/kind/namespace/name
    by_name = {n["name"]: n for n in tree["nodes"]}
    assert by_name["gone"]["health"] == {"status": "Missing"}
    assert by_name["demo"]["uid"] == "uid-rc" and "parentRefs" not in by_name["demo"]
    assert by_name["demo"]["health"] == {"status": "Healthy"}
    assert by_name["demo-head"]["parentRefs"] == [
        {"group": "ray.io", "version": "v1", "kind": "RayCluster", "namespace": "team",
         "name": "demo", "uid": "uid-rc"}]
    assert {"name": "Ray Group", "value": "head"} in by_name["demo-head"]["info"]
    assert by_name["demo-head"]["images"] == ["rayproject/ray:2.52.0"]
    assert by_name["demo-head"]["createdAt"] == "2026-12-02T01:00:00Z"


def _secret(value: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token",
                                                               "namespace": "team"},
            "data": {"token": base64.b64encode(value.encode()).decode()}}


def test_managed_resources_mask_every_side_of_a_secret() -> None:
    desired, live = _secret(TOKEN), _live(_secret(TOKEN + "-old"), "uid-s")
    diff = compare(desired=desired, predicted=None, live=live, rules=RULES)
    [item] = managed_resources([diff], {diff.key: desired}, {diff.key: live})
    assert item["modified"] is True and item["resourceVersion"] == "7"
    text = json.dumps(item)
    for value in (TOKEN, TOKEN + "-old", desired["data"]["token"], live["data"]["token"]):
        assert value not in text
    assert json.loads(item["targetState"])["data"]["token"].startswith("++++++++")
    assert json.loads(item["liveState"])["data"]["token"] != \
        json.loads(item["targetState"])["data"]["token"]  # different values, masks


def test_an_absent_side_is_null_as_argo_cd_writes_it() -> None:
    desired = raycluster("demo", "team")
    diff = compare(desired=desired, predicted=None, live=None, rules=RULES)
    [item] = managed_resources([diff], {diff.key: desired}, {})
    assert item["liveState"] == "null" and item["normalizedLiveState"] == "null"
    assert json.loads(item["targetState"])["metadata"]["name"] == "demo"


def _comparison() -> Comparison:
    app = application_from_flags(name="team", repo_url="https://git.example/ray.git",
                                 path="apps/team", dest_namespace="team")
    desired = DesiredObject.of(raycluster("demo", "team"))
    diff = compare(desired=desired.manifest(), predicted=None, live=None, rules=RULES)
    return Comparison(app, "a" * 40, [desired], AppDiff(resources=[diff]))


class _NoSecrets:
    """The API server's answer for a missing ``argocd-redis`` Secret."""

    def get(self, *_args: Any, **_kwargs: Any) -> Manifest:
        raise NotFound("secrets \"argocd-redis\" not found")


class _EmptyCache:
    def cached(self, *_args: Any) -> Manifest | None:
        return None


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unknown_argo_cd_version_writes_nothing_and_says_why() -> None:
    settings = ArgoCD(enabled=True, views=True, redis=f"127.0.0.1:{_closed_port()}")
    views = ArgoViews(_NoSecrets(), settings, version=lambda: "v3.7.0")  # type: ignore[arg-type]
    views.compared("team", _comparison(), _EmptyCache())
    assert views.publish("team", {"resources": []}) is False
    assert "Argo CD v3.7.0: its cache format is not known to gitops-ray" in views.problem
    assert views._client is None  # never connected: nothing could be written


def test_redis_not_answering_is_a_reason_not_an_error() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    settings = ArgoCD(enabled=True, views=True, redis=address)
    views = ArgoViews(_NoSecrets(), settings, version=lambda: "v3.6.1")  # type: ignore[arg-type]
    views.compared("team", _comparison(), _EmptyCache())
    assert views.publish("team", {"resources": []}) is False
    assert views.problem.startswith(f"Argo CD's Redis at {address}: ConnectionError")
    assert views.publish("team", {"resources": []}) is False  # backing off: not tried again


def test_a_value_over_the_cap_is_refused() -> None:
    huge = {"nodes": [{"name": "x" * 1024}] * (8 * 1024 + 1)}
    with pytest.raises(ValueError, match=r"resource tree is \d+ bytes of JSON, more than"):
        encode((huge, []), gzipped=True)


def test_a_kept_verdict_without_sides_shows_live_on_both_sides() -> None:
    live = _live(_secret(TOKEN), "uid-s")
    diff = ResourceDiff(ResourceKey.of(live), SyncStatus.SYNCED, "", None, None)
    [item] = managed_resources([diff], {diff.key: _secret(TOKEN)}, {diff.key: live})
    assert item["predictedLiveState"] == item["normalizedLiveState"] == item["targetState"]
    shown = json.loads(item["normalizedLiveState"])
    assert "uid" not in shown["metadata"] and shown["data"]["token"].startswith("++++++++")
    assert TOKEN not in json.dumps(item) and "modified" not in item
