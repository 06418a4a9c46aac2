"""What KubeRay v1.6.2 refuses is said before the sync, and such a sync writes nothing.

Two commits, each also changing a ConfigMap of the same app: one moves a RayCluster's
``spec.managedBy`` (the CRD's CEL rule, ``self == oldSelf``: the API server refuses it),
one sets ``upgradeStrategy`` in a RayJob's cluster spec (the operator copies it into the
RayCluster it makes and then refuses that cluster: ``ValidateRayClusterUpgradeOptions``).
For each, ``diff`` says "refused" naming the object and field, ``sync --dry-run`` and
``sync`` fail ``ChangeRefused`` before any write (the ConfigMap keeps its old value), and
``get`` shows the refusal and the operation's reason. The real operator, given the RayJob
directly, refuses it as the rule says. A RayCronJob (the operator's alpha controller,
turned on by the ``raycronjobs`` fixture) is Healthy before and after it has made a
RayJob, Suspended when git suspends it, and shows the worker groups of its job template.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.e2e.test_rayjob_rayservice import RC_API, rayjob
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.samples import raycluster

TIMEOUT = 180.0
APP = "rules"


def config(value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
            "data": {"value": value}}


def commit(git_repo: GitRepo, cli: Cli, *objs: dict[str, Any]) -> list[str]:
    files = {f"{APP}/{o['kind'].lower()}.yaml": o for o in objs}
    git_repo.commit({f"apps/{APP}.yaml": app_yaml(git_repo, APP, cli.namespace, APP), **files})
    return ["--repo", git_repo.url, "--apps", "apps", "--app", APP]


def get_json(cli: Cli, args: list[str]) -> dict[str, Any]:
    result = cli("get", APP, "--refresh", *args[:4], "-o", "json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def live(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    api = "v1" if kind == "ConfigMap" else RC_API
    obj = kube.get(api, kind, name=name, namespace=namespace)
    assert obj is not None
    return obj


def refused_everywhere(cli: Cli, args: list[str], field: str, by: str) -> None:
    """diff, sync --dry-run, sync and get all say it; the sync fails before any write."""
    diff = cli("diff", *args)
    assert f"refused: app {APP}: " in diff.output and field in diff.output, diff.output
    assert by in diff.output
    records = json.loads(cli("diff", *args, "-o", "json").stdout)[0]["resources"]
    assert [r["field"] for rec in records for r in rec["refused"]] == [field]
    for dry in (["--dry-run"], []):
        synced = cli("sync", *args, *dry)
        assert synced.exit_code != 0, synced.output
        assert "ChangeRefused" in synced.output and field in synced.output, synced.output
    doc = get_json(cli, args)
    assert doc["lastOperation"]["reason"] == "ChangeRefused"
    assert doc["lastOperation"]["phase"] == "Failed"
    assert any(field in r for r in doc["refusals"]), doc["refusals"]


def test_a_managed_by_change_is_refused_before_any_write(
        cli: Cli, git_repo: GitRepo, kube: Kube) -> None:
    rc = raycluster("owned")
    rc["spec"]["managedBy"] = "ray.io/kuberay-operator"
    args = commit(git_repo, cli, rc, config("one"))
    assert cli("sync", *args).exit_code == 0

    moved = copy.deepcopy(rc)
    moved["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    commit(git_repo, cli, moved, config("two"))
    refused_everywhere(cli, args, "spec.managedBy", "refused by the API server")
    assert live(kube, "RayCluster", "owned", cli.namespace)["spec"]["managedBy"] == \
        "ray.io/kuberay-operator"
    assert live(kube, "ConfigMap", "settings", cli.namespace)["data"] == {"value": "one"}


def test_upgrade_strategy_on_a_rayjob_cluster_is_refused_as_the_operator_would(
        cli: Cli, git_repo: GitRepo, kube: Kube) -> None:
    job = rayjob("trainer")
    args = commit(git_repo, cli, job, config("one"))
    assert cli("sync", *args).exit_code == 0

    recreate = copy.deepcopy(job)
    recreate["spec"]["rayClusterSpec"]["upgradeStrategy"] = {"type": "Recreate"}
    commit(git_repo, cli, recreate, config("two"))
    refused_everywhere(cli, args, "spec.rayClusterSpec.upgradeStrategy",
                       "KubeRay operator (v1.6.2 rules)")
    assert "upgradeStrategy" not in live(kube, "RayJob", "trainer",
                                         cli.namespace)["spec"]["rayClusterSpec"]
    assert live(kube, "ConfigMap", "settings", cli.namespace)["data"] == {"value": "one"}

    # The real operator, given such a RayJob directly, refuses the cluster it makes.
    direct = copy.deepcopy(recreate)
    direct["metadata"] = {"name": "direct", "namespace": cli.namespace}
    kube.apply(direct, field_manager="kubectl", force=True)
    eventually(lambda: refusal_event(kube, cli.namespace), TIMEOUT,
               "the operator's InvalidRayClusterSpec Event about the RayJob's cluster")


def refusal_event(kube: Kube, namespace: str) -> bool:
    events = kube.list("v1", "Event", namespace,
                       field_selector="type=Warning,involvedObject.kind=RayCluster")[0]
    return any(e.get("reason") == "InvalidRayClusterSpec"
               and "upgradeStrategy cannot be set when RayCluster is created by RayJob"
               in str(e.get("message")) for e in events)


def raycronjob(suspend: bool = False) -> dict[str, Any]:
    template = rayjob("nightly")["spec"]
    return {"apiVersion": RC_API, "kind": "RayCronJob", "metadata": {"name": "nightly"},
            "spec": {"schedule": "* * * * *", "suspend": suspend, "jobTemplate": template}}


def test_raycronjob_health_and_its_templates_worker_groups(
        raycronjobs: LocalControlPlane, cli: Cli, git_repo: GitRepo, kube: Kube) -> None:
    args = commit(git_repo, cli, raycronjob())
    assert cli("sync", *args).exit_code == 0
    doc = get_json(cli, args)
    assert doc["health"] == "Healthy", doc
    [node] = doc["tree"]
    assert node["kind"] == "RayCronJob"
    groups = [g["group"] for g in node.get("workerGroups", [])]
    assert groups == [g["groupName"] for g in
                      raycronjob()["spec"]["jobTemplate"]["rayClusterSpec"]["workerGroupSpecs"]]

    assert node["health"] == "Healthy" and "no RayJob created yet" in node["message"], node
    made = eventually(lambda: "last RayJob created at" in (d := get_json(cli, args))["tree"][0][
        "message"] and d, TIMEOUT, "the operator made the first RayJob")
    assert made["health"] == "Healthy" and made["sync"] == "Synced"
    jobs = kube.list(RC_API, "RayJob", cli.namespace)[0]
    assert any(j["metadata"]["name"].startswith("nightly-") for j in jobs)

    commit(git_repo, cli, raycronjob(suspend=True))
    assert cli("sync", *args).exit_code == 0
    suspended = get_json(cli, args)
    assert (suspended["health"], suspended["tree"][0]["message"]) == (
        "Suspended", "RayCronJob is suspended: no new RayJobs")
