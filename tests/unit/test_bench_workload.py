"""The benchmark workload generator: deterministic, the requested shape, honest diff cases."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from bench.workload import (
    REPLICAS_RULE,
    Workload,
    diff_case,
    one_line_change,
    raycluster,
    with_server_defaults,
    write_config_repo,
)


def test_same_inputs_give_the_same_bytes() -> None:
    a, b = Workload(40, 4), Workload(40, 4)
    assert json.dumps(raycluster(a, 7)) == json.dumps(raycluster(b, 7))
    assert diff_case(a, 7) == diff_case(b, 7)


def test_a_cluster_does_not_depend_on_the_run_size() -> None:
    small, large = Workload(100, 50), Workload(5000, 50)
    assert raycluster(small, 3)["spec"] == raycluster(large, 3)["spec"]


def test_clusters_spread_evenly_over_apps() -> None:
    wl = Workload(1000, 50)
    sizes = [len(wl.members(app)) for app in range(wl.apps)]
    assert sum(sizes) == 1000
    assert set(sizes) == {20}


def test_realistic_pod_templates() -> None:
    spec = raycluster(Workload(10, 2), 0)["spec"]
    assert [g["groupName"] for g in spec["workerGroupSpecs"]] == ["cpu", "gpu", "highmem"]
    for template in [spec["headGroupSpec"]["template"],
                     *(g["template"] for g in spec["workerGroupSpecs"])]:
        pod = template["spec"]
        container = pod["containers"][0]
        assert pod["nodeSelector"] and pod["tolerations"] and pod["volumes"]
        assert container["env"] and container["volumeMounts"] and container["ports"]
        assert container["resources"]["limits"] and container["readinessProbe"]


def test_config_repo_layout(tmp_path: Path) -> None:
    wl = Workload(12, 3)
    assert write_config_repo(wl, tmp_path, repo_url="file:///repo.git") == 15
    app = yaml.safe_load((tmp_path / "apps" / "team-000.yaml").read_text())
    assert app["kind"] == "Application"
    assert app["spec"]["ignoreDifferences"] == [REPLICAS_RULE]
    assert app["spec"]["source"]["path"] == "clusters/team-000"
    files = sorted((tmp_path / "clusters" / "team-000").iterdir())
    assert len(files) == 4
    assert yaml.safe_load(files[0].read_text())["kind"] == "RayCluster"


def test_one_line_change_changes_one_line(tmp_path: Path) -> None:
    wl = Workload(4, 2)
    write_config_repo(wl, tmp_path, repo_url="file:///repo.git")
    path = tmp_path / "clusters" / "team-000" / "rc-00001.yaml"
    before = path.read_text().splitlines()
    one_line_change(wl, tmp_path, 1, "42")
    after = path.read_text().splitlines()
    assert len(before) == len(after)
    assert sum(1 for x, y in zip(before, after, strict=True) if x != y) == 1
    head = yaml.safe_load(path.read_text())["spec"]["headGroupSpec"]["template"]["spec"]
    assert {"name": "CONFIG_REVISION", "value": "42"} in head["containers"][0]["env"]


def test_live_is_the_server_view_and_only_drift_differs_from_predicted() -> None:
    wl = Workload(200, 10)
    cases = [diff_case(wl, i) for i in range(wl.clusters)]
    assert 0 < sum(c.drifted for c in cases) < 30
    for case in cases:
        assert {"uid", "resourceVersion", "managedFields"} <= set(case.live["metadata"])
        assert "status" in case.live
        assert (case.live["spec"] != case.predicted["spec"]) == case.drifted
    scaled = [c for c in cases
              if any(g["replicas"] != d["replicas"] for g, d in zip(
                  c.live["spec"]["workerGroupSpecs"], c.desired["spec"]["workerGroupSpecs"],
                  strict=True))]
    assert len(scaled) > len(cases) // 2


def test_server_defaults_fill_protocol_and_group_bounds() -> None:
    obj = with_server_defaults(raycluster(Workload(2, 1), 0))
    port = obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["protocol"] == "TCP"
    assert obj["spec"]["workerGroupSpecs"][0]["numOfHosts"] == 1
