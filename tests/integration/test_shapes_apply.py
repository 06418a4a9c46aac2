"""Rendered pod shapes against the real API server: the KubeRay-typed CRD accepts them and
keeps every field (it prunes unknown fields in pod templates, so a typo would vanish)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray import FIELD_MANAGER
from gitops_ray.kube import Kube, KubeError
from gitops_ray.render.shapes import expand_pod_shapes

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "shapes"
SETTINGS = {
    "eks": {"provider": "aws", "enableZoneSelector": True,
            "sidecarReservation": {"cpu": "500m", "memory": "1Gi"}},
    "eks-karpenter": {"provider": "aws", "karpenter": True},
    "gke": {"provider": "gcp", "enableZoneSelector": True},
    "aks": {"provider": "azure"},
    "generic": {},
}


def render_app(repo: Path, app: str) -> list[dict[str, Any]]:
    app_dir = repo / "apps" / app
    docs = [doc for path in sorted(app_dir.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]
    return expand_pod_shapes(docs, repo_root=repo, app_dir=app_dir)


def assert_kept(sent: Any, live: Any, path: str = "") -> None:
    """Everything in ``sent`` is in ``live`` (the server may add defaults, not drop)."""
    if isinstance(sent, dict):
        assert isinstance(live, dict), f"{path}: server returned {live!r}"
        for key, value in sent.items():
            assert key in live, f"{path}/{key}: pruned by the API server"
            assert_kept(value, live[key], f"{path}/{key}")
    elif isinstance(sent, list):
        assert isinstance(live, list) and len(live) == len(sent), f"{path}: {live!r}"
        for index, (a, b) in enumerate(zip(sent, live, strict=True)):
            assert_kept(a, b, f"{path}/{index}")
    else:
        assert sent == live, f"{path}: sent {sent!r}, server kept {live!r}"


@pytest.fixture(params=sorted(SETTINGS))
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    (repo / ".gitops-ray" / "shapes.yaml").write_text(yaml.safe_dump(SETTINGS[request.param]))
    return repo


def test_rendered_clusters_pass_a_server_side_dry_run(kube: Kube, namespace: str,
                                                      repo: Path) -> None:
    clusters = render_app(repo, "analytics") + render_app(repo, "training")
    assert [c["kind"] for c in clusters] == ["RayCluster", "RayCluster"]
    for cluster in clusters:
        cluster["metadata"]["namespace"] = namespace
        live = kube.apply(cluster, field_manager=FIELD_MANAGER, dry_run=True)
        assert_kept(cluster["spec"], live["spec"], f"RayCluster {cluster['metadata']['name']}")
        assert all(g["replicas"] == 0 for g in live["spec"]["workerGroupSpecs"])  # CRD default


def test_compute_config_keeps_scheduling_fields(kube: Kube, namespace: str, tmp_path: Path
                                               ) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    (repo / ".gitops-ray" / "shapes.yaml").write_text(yaml.safe_dump(SETTINGS["gke"]))
    [cluster] = render_app(repo, "analytics")
    cluster["metadata"]["namespace"] = namespace
    live = kube.apply(cluster, field_manager=FIELD_MANAGER, dry_run=True)
    groups = {g["groupName"]: g for g in live["spec"]["workerGroupSpecs"]}
    cpu, gpu = groups["cpu"]["template"], groups["gpu"]["template"]
    assert cpu["spec"]["nodeSelector"] == {"cloud.google.com/gke-spot": "true",
                                           "topology.kubernetes.io/zone": "us-west-2a"}
    assert gpu["spec"]["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert gpu["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert gpu["metadata"]["labels"]["gitops-ray.io/accelerator-type"] == "T4"
    assert groups["gpu"]["rayStartParams"]["resources"] == '"{\\"accelerator_type:T4\\": 1}"'
    head = live["spec"]["headGroupSpec"]["template"]["spec"]
    terms = head["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms["nodeSelectorTerms"]) == 2
    assert head["containers"][0]["ports"][0]["protocol"] == "TCP"  # server defaulting ran
    assert live["spec"]["enableInTreeAutoscaling"] is True


def test_shaped_rayjob_and_rayservice_pass_a_server_side_dry_run(
        kube: Kube, namespace: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    [cluster] = render_app(repo, "training")
    spec = yaml.safe_load((EXAMPLE / "apps" / "training" / "raycluster.yaml").read_text())["spec"]
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "train", "namespace": namespace},
           "spec": {"entrypoint": "python train.py", "rayClusterSpec": copy.deepcopy(spec)}}
    service = {"apiVersion": "ray.io/v1", "kind": "RayService",
               "metadata": {"name": "serve", "namespace": namespace},
               "spec": {"serveConfigV2": "applications: []\n",
                        "rayClusterConfig": copy.deepcopy(spec)}}
    shaped_job, shaped_service = expand_pod_shapes([job, service], repo_root=repo,
                                                   app_dir=repo / "apps" / "training")
    for part in ("headGroupSpec", "workerGroupSpecs"):  # the same shaping as a RayCluster
        assert shaped_job["spec"]["rayClusterSpec"][part] == cluster["spec"][part]
    for obj, key in ((shaped_job, "rayClusterSpec"), (shaped_service, "rayClusterConfig")):
        live = kube.apply(obj, field_manager=FIELD_MANAGER, dry_run=True)
        assert_kept(obj["spec"][key], live["spec"][key], f"{obj['kind']} {key}")


def test_a_typo_in_a_patch_is_caught_by_the_dry_run(kube: Kube, namespace: str,
                                                    tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    (repo / ".gitops-ray" / "patches.yaml").write_text(
        "- {kind: Pod, patch: [{op: add, path: /spec/nodeSelecter/pool, value: ray}]}")
    [cluster] = render_app(repo, "training")
    cluster["metadata"]["namespace"] = namespace
    with pytest.raises(KubeError, match="nodeSelecter"):
        kube.apply(cluster, field_manager=FIELD_MANAGER, dry_run=True)
