"""``gitops-ray get`` on the real Ray stack: what the operator made, and who set replicas.

An app with a two-group RayCluster is synced with the CLI; the real KubeRay operator
makes its Pods and Services (kwok runs them); the Ray autoscaler's own KubeRay provider
scales one group up (a JSON Patch of ``/spec/workerGroupSpecs/0/replicas`` as
``python-requests``). ``get`` must then show git's replicas next to live's with the
autoscaler as their writer, the Pods under the RayCluster with their group, and ready
counts; ``-o json`` the same as data. A RayJob shows the RayCluster the operator made for
it, and that cluster's Pods, under it.

Set ``GITOPS_RAY_CAPTURE=FILE`` to save the text ``get`` printed (docs/ray.md's example).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from tests.e2e.raycluster import operator_ready
from tests.e2e.test_rayjob_rayservice import rayjob
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.samples import raycluster, worker_group

TIMEOUT = 120.0


def sync(cli: Cli, git_repo: GitRepo, app: str, obj: dict[str, Any]) -> None:
    git_repo.commit({f"apps/{app}.yaml": app_yaml(git_repo, app, cli.namespace, app),
                     f"{app}/obj.yaml": obj})
    result = cli("sync", "--repo", git_repo.url, "--apps", "apps", "--app", app)
    assert result.exit_code == 0, result.output


def get_json(cli: Cli, app: str) -> dict[str, Any]:
    result = cli("get", app, "-o", "json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def groups(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["group"]: g for g in doc["tree"][0].get("workerGroups", [])}


def ready(doc: dict[str, Any], want: dict[str, int]) -> bool:
    seen = groups(doc)
    return all(seen.get(g, {}).get("readyPods") == n == seen[g]["totalPods"]
               for g, n in want.items())


def test_get_shows_git_next_to_the_autoscalers_replicas_and_the_pods(
        cli: Cli, git_repo: GitRepo, kube: Kube, control_plane: LocalControlPlane,
        tmp_path: Path) -> None:
    rc = raycluster("scaled", groups=[worker_group("small", replicas=1, max_replicas=5),
                                      worker_group("large", replicas=1, cpu="2")])
    sync(cli, git_repo, "ray", rc)
    eventually(lambda: operator_ready(kube, cli.namespace, "scaled"), TIMEOUT,
               "the operator says ready")
    Autoscaler(control_plane, kube, cli.namespace, "scaled", tmp_path).run(
        "scale", "small", "3")
    doc = eventually(lambda: (d := get_json(cli, "ray")) and ready(d, {"small": 3, "large": 1})
                     and d, TIMEOUT, "3 small and 1 large worker ready, as get shows them")

    small, large = groups(doc)["small"], groups(doc)["large"]
    assert (small["gitReplicas"], small["liveReplicas"], small["replicasManager"]) == \
        (1, 3, "python-requests")
    assert (large["gitReplicas"], large["liveReplicas"]) == (1, 1)
    assert small["stalePods"] == 0 and small["workersToDelete"] == []
    [node] = doc["tree"]
    assert (node["kind"], node["sync"]) == ("RayCluster", "Synced")
    pods = [c for c in node["children"] if c["kind"] == "Pod"]
    assert sorted(p["rayGroup"] for p in pods) == ["head", "large", "small", "small", "small"]
    assert all(p["health"] == "Healthy" for p in pods)
    assert any(c["kind"] == "Service" for c in node["children"])

    text = cli("get", "ray", "--refresh", "--repo", git_repo.url, "--apps", "apps")
    assert text.exit_code == 0, text.output
    assert re.search(r"^RayCluster\s+scaled\s+Synced\s+Healthy", text.stdout, re.M), \
        text.stdout  # compared now: the record said Progressing at the sync
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines()
            if line.split()[:1] in (["small"], ["large"])}
    assert rows["small"][1:5] == ["1", "3", "python-requests", "(autoscaler)"], text.stdout
    assert rows["small"][7] == "3/3", text.stdout
    assert re.search(r"^├─ Pod\s+scaled-small-worker-\S+\s+small\s+Healthy", text.stdout,
                     re.M), text.stdout
    capture = os.environ.get("GITOPS_RAY_CAPTURE")
    if capture:
        Path(capture).write_text(text.stdout)


def test_get_shows_a_rayjobs_cluster_and_its_pods_under_it(
        cli: Cli, git_repo: GitRepo) -> None:
    sync(cli, git_repo, "job", rayjob("train"))
    doc = eventually(lambda: (d := get_json(cli, "job")) and ready(d, {"cpu": 1}) and d,
                     TIMEOUT, "the RayJob's cluster and its worker, as get shows them")
    [job] = doc["tree"]
    assert job["kind"] == "RayJob"
    [cluster] = [c for c in job["children"] if c["kind"] == "RayCluster"]
    assert cluster["name"].startswith("train-")
    assert sorted(c["rayGroup"] for c in cluster["children"] if c["kind"] == "Pod") == \
        ["cpu", "head"]
    assert groups(doc)["cpu"]["gitReplicas"] == 1
    text = cli("get", "job").stdout
    assert f"RayJob {cli.namespace}/train worker groups (RayCluster {cluster['name']}):" \
        in text, text
