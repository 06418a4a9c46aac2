"""One failure contract (issue 14 §3): a sync that fails is a recorded, counted operation
with a reason, and auto-sync backs off from it, whatever step failed.

The controller runs as a ServiceAccount with a namespaced Role and nothing more, so the
failures are the API server's own 403s, not injected ones:

* the Role lists and watches ServiceAccounts but may not ``get`` one, so the prune of a
  ServiceAccount that left git cannot check it is ours: ``PruneFailed``, retried with
  backoff up to the retry limit, then blocked, and the object is still there;
* the Role may read but not write ConfigMaps, so no record (inventory, status) can be
  written at all: ``InventoryFailed`` before anything is applied, the backoff is kept in
  memory, the write failure is logged once, and the retries stop at the limit.

Progress is read from the recorded operation, the metrics and the log, never from time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore, record_name
from localcluster import LocalControlPlane
from tests.faults.test_readiness import grant
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController, service_account_kubeconfig
from tests.harness.runtime import application
from tests.harness.settings import NO_LEADER_ELECTION, controller_settings
from tests.samples import raycluster

RETRY_LIMIT = 2  # so the third failed attempt is the last one
RECORDS = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}
EVENTS = {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch", "create"]}
RAY = {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["*"]}
# Everything a sync needs on ServiceAccounts but `get`: the prune's read is refused.
ACCOUNTS_NO_GET = {"apiGroups": [""], "resources": ["serviceaccounts"],
                   "verbs": ["list", "watch", "create", "update", "patch", "delete"]}
READ_ONLY_RECORDS = {"apiGroups": [""], "resources": ["configmaps"],
                     "verbs": ["get", "list", "watch"]}


def settings(kubeconfig: Path, namespace: str, repo: GitRepo, app: str,
             interval: str = "1h") -> dict[str, Any]:
    return controller_settings(
        kubeconfig, namespace, interval=interval, leaderElection=NO_LEADER_ELECTION,
        retry={"limit": RETRY_LIMIT, "backoff": {"initial": "200ms", "factor": 1,
                                                 "cap": "200ms"}},
        applications=[application(app, repo.url, namespace)])


def as_account(kube: Kube, control_plane: LocalControlPlane, namespace: str, tmp: Path,
               rules: list[dict[str, Any]]) -> Path:
    """A kubeconfig for a fresh ServiceAccount bound to a Role with exactly ``rules``."""
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "syncer", "namespace": namespace}},
                field_manager="tests")
    grant(kube, "Role", "syncer", namespace, "syncer", rules)
    return service_account_kubeconfig(kube, control_plane, namespace=namespace,
                                      name="syncer", path=tmp / "syncer.kubeconfig")


def service_account(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace}}


def metric(proc: ControllerProcess, name: str, **labels: str) -> float:
    """The series' value (0 while it does not exist or the process is still starting)."""
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{selector}}} "
    try:
        text = proc.metrics()
    except requests.RequestException:
        return 0.0
    return sum(float(line[len(prefix):]) for line in text.splitlines()
               if line.startswith(prefix))


def refreshes(proc: ControllerProcess, app: str) -> float:
    return sum(metric(proc, "gitops_ray_reconcile_total", app=app, result=result)
               for result in ("success", "error"))


def sync_failed_events(kube: Kube, namespace: str, app: str) -> list[str]:
    items, _ = kube.list("v1", "Event", namespace)
    return [str(e.get("message", "")) for e in items if e.get("reason") == "SyncFailed"
            and (e.get("involvedObject") or {}).get("name") == record_name(app)]


def test_a_forbidden_prune_read_is_a_recorded_prune_failure_that_backs_off(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("pruned"),
                     "manifests/sa.yaml": service_account("ray-head", namespace)})
    admin = ["--kubeconfig", str(control_plane.kubeconfig), "--control-namespace", namespace,
             "--cache-dir", str(tmp_path / "cli")]
    first = CliRunner().invoke(main, ["sync", *admin, "--repo", git_repo.url, "--path",
                                      "manifests", "--dest-namespace", namespace,
                                      "--name", "pruned"], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert kube.get("v1", "ServiceAccount", name="ray-head", namespace=namespace) is not None
    git_repo.commit({"manifests/sa.yaml": None})  # left git: to be pruned

    config = as_account(kube, control_plane, namespace, tmp_path,
                        [RECORDS, EVENTS, RAY, ACCOUNTS_NO_GET])
    proc = controller_process("prune-denied", settings(config, namespace, git_repo, "pruned"))
    store = RecordStore(kube, namespace)
    status = eventually(lambda: _blocked(store, "pruned"), timeout=120,
                        message="auto-sync blocked after the last retry")

    operation = status["operation"]
    print(f"last operation: {operation}")
    assert (operation["phase"], operation["reason"]) == ("Failed", "PruneFailed")
    assert operation["automated"] and operation["attempt"] == RETRY_LIMIT + 1
    assert "prune failed" in operation["message"] and "forbidden" in operation["message"]
    automated = [op for op in status["history"] if op.get("automated")]
    assert [(op["attempt"], op["reason"]) for op in automated] == [
        (3, "PruneFailed"), (2, "PruneFailed"), (1, "PruneFailed")]
    assert "failed 3 times" in status["autoSync"]["reason"]
    # not pruned:
    assert kube.get("v1", "ServiceAccount", name="ray-head", namespace=namespace) is not None
    assert kube.get("ray.io/v1", "RayCluster", name="pruned", namespace=namespace) is not None

    assert metric(proc, "gitops_ray_sync_failures_total", app="pruned",
                  reason="PruneFailed") == RETRY_LIMIT + 1
    messages = eventually(lambda: sync_failed_events(kube, namespace, "pruned"),
                          message="a SyncFailed Event")
    assert all(m.startswith("app pruned: PruneFailed: auto-sync to ") for m in messages)
    shown = CliRunner().invoke(main, ["status", *admin[:4], "-o", "json", "pruned"],
                               catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert '"reason": "PruneFailed"' in shown.output and '"lastSync": "Failed"' in shown.output


def _blocked(store: RecordStore, app: str) -> dict[str, Any] | None:
    status = store.load(app).status
    return status if (status.get("autoSync") or {}).get("action") == "blocked" else None


def test_an_unwritable_record_applies_nothing_and_backs_off_in_memory(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path, controller_process: StartController) -> None:
    git_repo.commit({"manifests/rc.yaml": raycluster("locked")})
    config = as_account(kube, control_plane, namespace, tmp_path,
                        [READ_ONLY_RECORDS, EVENTS, RAY])
    proc = controller_process("record-denied",
                              settings(config, namespace, git_repo, "locked", interval="1s"))
    attempts = RETRY_LIMIT + 1
    eventually(lambda: metric(proc, "gitops_ray_sync_failures_total", app="locked",
                              reason="InventoryFailed") == attempts, timeout=120,
               message=f"{attempts} failed syncs")
    seen = refreshes(proc, "locked")
    eventually(lambda: refreshes(proc, "locked") >= seen + 3, timeout=60,
               message="three more refreshes (polls) after the last retry")

    assert metric(proc, "gitops_ray_sync_total", app="locked", phase="Failed",
                  trigger="auto-sync") == attempts  # blocked: the polls did not sync again
    assert len(proc.events("record_not_written")) == 1
    finished = proc.events("sync_finished")
    assert [r["reason"] for r in finished] == ["InventoryFailed"] * attempts
    # nothing applied without an inventory entry first, and no record:
    assert kube.get("ray.io/v1", "RayCluster", name="locked", namespace=namespace) is None
    assert kube.get("v1", "ConfigMap", name=record_name("locked"), namespace=namespace) is None
