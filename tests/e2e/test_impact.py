"""What a change will do to running Ray, said before the sync and checked against the operator.

Two changes, each previewed by ``diff`` (text on stderr and ``impact`` in ``-o json``),
``sync --dry-run`` and ``get`` (after ``status --refresh`` recorded the comparison), then
synced; the real KubeRay operator v1.6.1 (kwok runs the Pods) must then do exactly what
was said, by count and by group:

* a worker template edit of a RayCluster with ``upgradeStrategy: Recreate``: every Pod is
  deleted (the head and each group's) and the same number made again from the new spec;
* a ``rayClusterConfig`` edit of a RayService: its pending RayCluster (on kwok the first
  cluster never serves: no dashboard answers) is replaced by a new one with the Pods
  named, and the old one and its Pods go (``rayClusterDeletionDelaySeconds: 0``). Its
  Pods wait for a node pool that never comes: with a ready head the operator (v1.6.1)
  asks the head's dashboard for Serve's status before it looks at the spec, and on kwok
  that never answers, so it would never get to the upgrade (with a real head it does).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from gitops_ray.kube import Kube
from tests.e2e.raycluster import pods
from tests.e2e.test_rayjob_rayservice import live, rayservice
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.samples import raycluster, worker_group

TIMEOUT = 180.0
APP = "impact"


def commit(git_repo: GitRepo, cli: Cli, obj: dict[str, Any]) -> str:
    return git_repo.commit({f"apps/{APP}.yaml": app_yaml(git_repo, APP, cli.namespace, APP),
                            f"{APP}/obj.yaml": obj})


def app_args(git_repo: GitRepo) -> list[str]:
    return ["--repo", git_repo.url, "--apps", "apps", "--app", APP]


def by_group(items: list[dict[str, Any]]) -> dict[str, int]:
    return {i["group"]: i["pods"] for i in items}


def running_pods(kube: Kube, namespace: str, cluster: str) -> dict[str, dict[str, Any]]:
    """Pods of ``cluster`` not being deleted, by uid."""
    return {p["metadata"]["uid"]: p for p in pods(kube, namespace, cluster)
            if not p["metadata"].get("deletionTimestamp")}


def groups_of(found: dict[str, dict[str, Any]]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for pod in found.values():
        labels = pod["metadata"]["labels"]
        out["headgroup" if labels.get("ray.io/node-type") == "head"
            else labels["ray.io/group"]] += 1
    return dict(out)


def all_running(kube: Kube, namespace: str, cluster: str, want: dict[str, int]) -> bool:
    found = running_pods(kube, namespace, cluster)
    return groups_of(found) == want and all(
        p.get("status", {}).get("phase") == "Running" for p in found.values())


def preview(cli: Cli, git_repo: GitRepo, key: str) -> dict[str, Any]:
    """``diff``'s impact for ``key``, checked against its text, dry run and ``get``."""
    args = app_args(git_repo)
    shown = cli("diff", *args, "-o", "json")
    assert shown.exit_code == 1, shown.output
    record = next(r for r in json.loads(shown.stdout)[0]["resources"] if r["key"] == key)
    impact: dict[str, Any] = record["impact"]
    text = cli("diff", *args)
    assert text.exit_code == 1, text.output
    assert f"impact: {key}: {impact['message']}" in text.stderr
    dry = cli("sync", *args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"{APP}: impact: {key}: {impact['message']}" in dry.stdout
    refreshed = cli("status", "--refresh", *args)  # the harness gives status its --cache-dir
    assert refreshed.exit_code == 0, refreshed.output
    got = cli("get", APP, "-o", "json")
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["impact"] == [impact]
    table = cli("get", APP)
    assert f"{key}: {impact['message']}" in " ".join(table.stdout.split()), table.stdout
    return impact


def test_recreate_deletes_and_makes_the_pods_diff_named(
        cli: Cli, git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    rc = raycluster("recreated", groups=[worker_group("gpu", replicas=2),
                                         worker_group("cpu", replicas=1)],
                    autoscaling=False)
    rc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    commit(git_repo, cli, rc)
    assert cli("sync", *app_args(git_repo)).exit_code == 0
    first = {"headgroup": 1, "gpu": 2, "cpu": 1}
    eventually(lambda: all_running(kube, namespace, "recreated", first), TIMEOUT,
               "the cluster's Pods running")
    before = running_pods(kube, namespace, "recreated")

    edited = copy.deepcopy(rc)
    edited["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = \
        "rayproject/ray:2.52.1"
    commit(git_repo, cli, edited)
    key = f"ray.io/RayCluster:{namespace}/recreated"
    impact = preview(cli, git_repo, key)
    assert impact["effect"] == "Recreates"
    assert impact["changed"] == ["gpu"]
    assert by_group(impact["deletes"]) == first == groups_of(before)
    assert by_group(impact["creates"]) == first
    assert running_pods(kube, namespace, "recreated").keys() == before.keys()  # no sync yet

    assert cli("sync", *app_args(git_repo)).exit_code == 0
    want = by_group(impact["creates"])

    def recreated() -> bool:
        now = running_pods(kube, namespace, "recreated")
        return not now.keys() & before.keys() and all_running(kube, namespace, "recreated",
                                                              want)

    eventually(recreated, TIMEOUT, "every Pod recreated, as diff said")
    assert not {p["metadata"]["name"] for p in pods(kube, namespace, "recreated")
                if p["metadata"]["uid"] in before}  # the old ones are gone
    images = {p["spec"]["containers"][0]["image"]
              for p in running_pods(kube, namespace, "recreated").values()
              if p["metadata"]["labels"].get("ray.io/group") == "gpu"}
    assert images == {"rayproject/ray:2.52.1"}
    after = cli("diff", *app_args(git_repo), "-o", "json")
    assert after.exit_code == 0, after.output
    assert not [r for r in json.loads(after.stdout)[0]["resources"] if "impact" in r]


def test_rayservice_config_change_replaces_its_cluster_as_diff_said(
        cli: Cli, git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    svc = rayservice("serve", pool=namespace, head_waits=True)  # no such nodes: Pods wait
    svc["spec"]["rayClusterDeletionDelaySeconds"] = 0
    svc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 2
    commit(git_repo, cli, svc)
    assert cli("sync", *app_args(git_repo)).exit_code == 0

    def pending() -> str:
        status = live(kube, namespace, "RayService", "serve")
        return str(status.get("pendingServiceStatus", {}).get("rayClusterName", ""))

    def made(cluster: str) -> dict[str, int]:
        return groups_of(running_pods(kube, namespace, cluster))

    first = {"headgroup": 1, "cpu": 2}
    eventually(lambda: pending() and made(pending()) == first, TIMEOUT,
               "the RayService's first cluster's Pods")
    old = pending()
    before = running_pods(kube, namespace, old)

    edited = copy.deepcopy(svc)
    worker = edited["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    worker["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.52.1"
    worker["replicas"] = 3
    commit(git_repo, cli, edited)
    impact = preview(cli, git_repo, f"ray.io/RayService:{namespace}/serve")
    assert impact["effect"] == "ReplacesPending"
    assert impact["cluster"] == old
    assert by_group(impact["deletes"]) == first == groups_of(before)
    assert by_group(impact["creates"]) == {"headgroup": 1, "cpu": 3}

    assert cli("sync", *app_args(git_repo)).exit_code == 0
    want = by_group(impact["creates"])
    eventually(lambda: pending() not in ("", old) and made(pending()) == want, TIMEOUT,
               "a new cluster with the Pods diff named")
    eventually(lambda: kube.get("ray.io/v1", "RayCluster", name=old,
                                namespace=namespace) is None
               and not running_pods(kube, namespace, old), TIMEOUT,
               "the old cluster and its Pods deleted")
