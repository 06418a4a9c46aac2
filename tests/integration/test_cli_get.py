"""``gitops-ray get`` and ``diff``'s worker-group view on the real API server, without the
operator (so no Pods: ready counts are 0/0; tests/e2e/test_get.py has them)."""

from __future__ import annotations

import json
import re

from gitops_ray.health.workergroups import writer_label
from localcluster import LocalControlPlane
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.integration.test_cli_diff import autoscale
from tests.samples import raycluster

EPOCH = re.compile(r"\b1[0-9]{9}(\.[0-9]+)?\b")
"""An epoch time in seconds (2001..2286), which people must never be shown."""


def synced(cli: Cli, git_repo: GitRepo, name: str = "groups") -> list[str]:
    git_repo.commit({"apps/ray.yaml": app_yaml(git_repo, "ray", cli.namespace, "ray"),
                     "ray/rc.yaml": raycluster(name)})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args).exit_code == 0
    return args


def test_unknown_app_is_one_line_with_the_closest_name(cli: Cli, git_repo: GitRepo) -> None:
    synced(cli, git_repo)
    result = cli("get", "rya")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error (config): no such app: rya (did you mean ray?)"
    assert result.stdout == ""


def test_summary_tree_and_groups_with_human_times(
        cli: Cli, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    synced(cli, git_repo)
    autoscale(control_plane, cli.namespace, "groups", 3)
    result = cli("get", "ray")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for label, value in (("Name:", "ray"), ("Repo:", git_repo.url), ("Path:", "ray"),
                         ("Target:", "main"), ("Sync Policy:", "Manual"),
                         ("Sync Status:", "Synced"), ("Last Operation:", "Succeeded")):
        assert re.search(rf"^{re.escape(label)}\s+{re.escape(value)}", out, re.M), (label, out)
    assert re.search(r"Last Operation:.* UTC \(<?[0-9.]+[smhd]+\S* ago\), took ", out), out
    assert not EPOCH.search(out), out
    assert re.search(r"^RayCluster\s+groups\s+Synced", out, re.M), out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[-2:]}
    assert rows["cpu"][1:4] == ["1", "3", "python-requests"], out  # git 1, live 3: autoscaler
    assert "(autoscaler)" in " ".join(rows["cpu"])
    assert rows["gpu"][1:3] == ["0", "0"], out


def test_json_has_the_summary_tree_and_worker_groups(
        cli: Cli, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    args = synced(cli, git_repo)
    autoscale(control_plane, cli.namespace, "groups", 3)
    doc = json.loads(cli("get", "ray", "-o", "json").stdout)
    assert doc["sync"] == "Synced" and doc["syncPolicy"] == "Manual"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["comparedAt"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["lastOperation"]["finishedAt"])
    assert not EPOCH.search(json.dumps(doc))
    [node] = doc["tree"]
    assert (node["kind"], node["name"], node["sync"]) == ("RayCluster", "groups", "Synced")
    cpu = node["workerGroups"][0]
    assert (cpu["group"], cpu["gitReplicas"], cpu["liveReplicas"], cpu["replicasManager"]) \
        == ("cpu", 1, 3, "python-requests")

    changed = raycluster("groups")
    changed["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    git_repo.commit({"ray/rc.yaml": changed})
    stale = json.loads(cli("get", "ray", "-o", "json").stdout)  # the record: git's old 1
    assert stale["tree"][0]["workerGroups"][0]["gitReplicas"] == 1
    fresh = cli("get", "ray", "--refresh", *args, "-o", "json")
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(fresh.stdout)["tree"][0]["workerGroups"][0]["gitReplicas"] == 2


def test_get_refresh_says_why_out_of_sync(cli: Cli, git_repo: GitRepo) -> None:
    args = synced(cli, git_repo)
    changed = raycluster("groups")
    changed["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = "x:1"
    git_repo.commit({"ray/rc.yaml": changed})
    result = cli("get", "ray", "--refresh", *args)
    assert result.exit_code == 0, result.output
    assert re.search(r"^Sync Status:\s+OutOfSync \(1 modified\)", result.stdout, re.M), \
        result.stdout
    assert re.search(r"^RayCluster\s+groups\s+OutOfSync", result.stdout, re.M)
    missing = cli("get", "nope", "--refresh", *args)
    assert missing.exit_code == 2 and "no such app: nope" in missing.stderr


def test_diff_shows_the_view_of_changed_groups(
        cli: Cli, git_repo: GitRepo, control_plane: LocalControlPlane) -> None:
    args = synced(cli, git_repo)
    autoscale(control_plane, cli.namespace, "groups", 3)
    changed = raycluster("groups")
    changed["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = "x:1"
    git_repo.commit({"ray/rc.yaml": changed})
    text = cli("diff", *args)
    assert text.exit_code == 1
    assert text.stdout.startswith("--- live/ray.io/RayCluster:")
    assert "worker groups" not in text.stdout  # stdout stays a diff
    assert "RayCluster " + cli.namespace + "/groups worker groups" in text.stderr
    assert writer_label("python-requests") in text.stderr
    [record] = json.loads(cli("diff", *args, "-o", "json").stdout)[0]["resources"]
    assert record["workerGroups"] == {"gpu": {"changed": {
        "template.spec.containers[0].image": {"from": "rayproject/ray:2.52.0", "to": "x:1"}}}}
    view = {g["group"]: g for g in record["workerGroupView"]}
    assert (view["cpu"]["gitReplicas"], view["cpu"]["liveReplicas"]) == (1, 3)
    assert view["cpu"]["replicasManager"] == "python-requests"


def test_no_view_when_no_group_changed(cli: Cli, git_repo: GitRepo,
                                       control_plane: LocalControlPlane) -> None:
    args = synced(cli, git_repo)
    autoscale(control_plane, cli.namespace, "groups", 3)  # not drift, not a group change
    quiet = cli("diff", *args, "-o", "json")
    assert quiet.exit_code == 0
    assert "workerGroupView" not in quiet.stdout
    assert cli("diff", *args).stderr == ""
