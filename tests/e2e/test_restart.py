"""``gitops-ray restart`` on the real KubeRay operator, with the controller watching.

The restart deletes Pods and the operator recreates them (new uids, same replicas); the
``gitops-ray.io/restartedAt`` annotation it leaves on the RayCluster must not look like
drift to a self-healing controller, so the app stays Synced and no sync is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from click.testing import CliRunner, Result

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.sync.restartplan import RESTART_FIELD_MANAGER, RESTARTED_AT
from localcluster import LocalControlPlane
from tests.e2e.raycluster import live_status, operator_ready, pods, wait
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.samples import raycluster, worker_group

APP = "restarted"
CLUSTER = "restarted"
TIMEOUT = 120.0
SIZES = {"headgroup": 1, "g1": 2, "g2": 1}


def uids(kube: Kube, namespace: str) -> dict[str, dict[str, str]]:
    """``{group: {pod name: uid}}`` of the cluster's Running Pods (head: ``headgroup``)."""
    out: dict[str, dict[str, str]] = {group: {} for group in SIZES}
    for pod in pods(kube, namespace, CLUSTER):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Running":
            continue
        out.setdefault(meta["labels"].get("ray.io/group", ""), {})[meta["name"]] = meta["uid"]
    return out


def settled(kube: Kube, namespace: str) -> dict[str, dict[str, str]] | None:
    """The Pods when every group has its replicas Running and the operator says ready."""
    now = uids(kube, namespace)
    if {g: len(now.get(g, {})) for g in SIZES} == SIZES and operator_ready(kube, namespace,
                                                                           CLUSTER):
        return now
    return None


def replicas(live: dict[str, Any]) -> list[int]:
    return [g["replicas"] for g in live["spec"]["workerGroupSpecs"]]


def restart_events(kube: Kube, namespace: str) -> list[str]:
    items, _ = kube.list("v1", "Event", namespace)
    return [e["message"] for e in items if e.get("reason") == "Restarted"
            and e["involvedObject"]["name"] == CLUSTER]


def refreshes(ctl: Controller) -> float:
    """How many comparisons of the app the controller finished."""
    series = f'gitops_ray_reconcile_total{{app="{APP}",result="success"}}'
    lines = [line for line in ctl.metrics().splitlines() if line.startswith(series)]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_restart_replaces_the_chosen_pods_and_is_never_reverted(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str, control_plane: LocalControlPlane) -> None:
    rc = raycluster(CLUSTER, groups=[worker_group("g1", replicas=2),
                                     worker_group("g2", replicas=1)])
    git_repo.commit({"manifests/rc.yaml": rc})
    ctl = start_controller({"applications": [application(APP, git_repo.url, namespace,
                                                         self_heal=True)]})

    def cli(*args: str) -> Result:
        return CliRunner().invoke(main, ["restart", *args, "--kubeconfig",
                                         str(control_plane.kubeconfig),
                                         "--control-namespace", namespace])

    def describe() -> Any:
        return ctl.status(APP), live_status(kube, namespace, CLUSTER), uids(kube, namespace)

    wait(lambda: ctl.status(APP).get("health") == "Healthy" and settled(kube, namespace),
         describe, TIMEOUT, "Healthy with every Pod Running")
    before = settled(kube, namespace)
    assert before is not None
    recorded = ctl.status(APP)
    live = ctl.live(CLUSTER)
    assert live is not None

    # Names that match nothing: one line, exit 2, the closest name suggested.
    for args, said in [((APP + "x",), f"no such app: {APP}x (did you mean {APP}?)"),
                       ((APP, "restartd"), f"did you mean {CLUSTER}?"),
                       ((APP, "--group", "g11"), "no worker group g11"),
                       ((APP, "--group", "g11"), "(did you mean g1?)")]:
        shown = cli(*args)
        assert shown.exit_code == 2, shown.output
        assert said in shown.output and "Traceback" not in shown.output
        assert len(shown.output.strip().splitlines()) == 1, shown.output

    dry = cli(APP, "--group", "g1", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert sorted(line.split("\t")[3] for line in dry.stdout.splitlines()) == sorted(before["g1"])
    assert all(line.endswith("\twould-delete") for line in dry.stdout.splitlines())

    def refreshed_in_sync() -> None:
        """A comparison after the restart: Synced, and no sync was recorded."""
        count = refreshes(ctl)
        ctl.runtime.queue.submit(APP, "test")
        eventually(lambda: refreshes(ctl) > count and not ctl.runtime.queue.busy(), TIMEOUT,
                   "refreshed")
        status = ctl.status(APP)
        assert status.get("sync") == "Synced", status
        assert status.get("operation") == recorded.get("operation")
        assert status.get("history") == recorded.get("history")

    # One group: g1's Pods are replaced, g2's and the head's are untouched.
    shown = cli(APP, "--group", "g1")
    assert shown.exit_code == 0, shown.output
    assert sorted(line.split("\t")[3] for line in shown.stdout.splitlines()) == sorted(
        before["g1"])
    assert f"RayCluster {namespace}/{CLUSTER}: restarted group g1, 2 pods" in shown.output
    wait(lambda: (now := settled(kube, namespace))
         and not set(now["g1"].values()) & set(before["g1"].values()),
         describe, TIMEOUT, "g1 replaced")
    after = settled(kube, namespace)
    assert after is not None
    assert after["headgroup"] == before["headgroup"]
    assert after["g2"] == before["g2"]

    restarted = ctl.live(CLUSTER)
    assert restarted is not None
    assert RESTARTED_AT in restarted["metadata"]["annotations"]
    assert RESTART_FIELD_MANAGER in {m["manager"] for m in restarted["metadata"]["managedFields"]}
    assert replicas(restarted) == replicas(live) == [2, 1]
    assert restarted["metadata"]["generation"] == live["metadata"]["generation"]
    eventually(lambda: "Restarted by gitops-ray restart: group g1, 2 pods"
               in restart_events(kube, namespace), TIMEOUT, "the Event")

    refreshed_in_sync()
    kept = ctl.live(CLUSTER)
    assert kept is not None
    assert kept["metadata"]["annotations"][RESTARTED_AT] == \
        restarted["metadata"]["annotations"][RESTARTED_AT]

    # The whole cluster: the head first, then every worker; --wait returns once they are
    # all back.
    shown = cli(APP, "--wait", "--timeout", str(TIMEOUT))
    assert shown.exit_code == 0, shown.output
    assert [line.split("\t")[2] for line in shown.stdout.splitlines()] == [
        "headgroup", "g1", "g1", "g2"]
    back = uids(kube, namespace)
    assert {g: len(back[g]) for g in SIZES} == SIZES
    assert all(not set(back[g].values()) & set(after[g].values()) for g in SIZES)
    wait(lambda: settled(kube, namespace), describe, TIMEOUT, "the operator says ready")
    eventually(lambda: "Restarted by gitops-ray restart: head, group g1, group g2, 4 pods"
               in restart_events(kube, namespace), TIMEOUT, "the Event")
    final = ctl.live(CLUSTER)
    assert final is not None
    assert replicas(final) == [2, 1]
    refreshed_in_sync()
    assert RESTARTED_AT in (ctl.live(CLUSTER) or {})["metadata"]["annotations"]
