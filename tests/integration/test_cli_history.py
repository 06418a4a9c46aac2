"""``gitops-ray history``, ``rollback`` and ``resume`` on the real API server and real git:
two commits, two syncs, the autoscaler scaling a group, a rollback to the first commit that
keeps the autoscaler's replicas, and the history that records all of it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.reconcile.pause import PAUSE_KEY
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.pipeline import autoscaler_patch, groups_by_name
from tests.harness.runtime import application, with_version
from tests.samples import raycluster, worker_group


def history(cli: Cli, app: str) -> list[dict[str, Any]]:
    shown = cli.raw("history", *cli.kube_args, app, "-o", "json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def test_rollback_applies_the_old_revision_keeps_the_autoscalers_replicas_and_is_recorded(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    app = ["--repo", git_repo.url, "--path", "manifests", "--dest-namespace", namespace,
           "--name", "roll"]
    rc = raycluster("roll", groups=[worker_group("cpu", replicas=1, max_replicas=10)])
    first = git_repo.commit({"manifests/rc.yaml": rc}, "ray 2.52 for the analytics team")
    assert cli.sync(*app).exit_code == 0
    second = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")},
                             "upgrade to ray 2.53\n\nThe body is not recorded.")
    assert cli.sync(*app).exit_code == 0
    autoscaler_patch(control_plane, namespace, "roll", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 5}])

    before = history(cli, "roll")
    assert [(e["id"], e["revision"], e["subject"]) for e in before] == [
        (1, second, "upgrade to ray 2.53"), (0, first, "ray 2.52 for the analytics team")]
    assert before[0]["finishedAt"].endswith("Z")  # RFC 3339, not epoch seconds
    table = cli.raw("history", *cli.kube_args, "roll")
    assert table.exit_code == 0, table.output
    assert "SUBJECT" in table.stdout and "ray 2.52 for the analytics team" in table.stdout
    assert first[:12] in table.stdout and "UTC (" in table.stdout

    rolled = cli.raw("rollback", *cli.kube_args, "--cache-dir", str(cli.cache), *app, "roll", "0")
    assert rolled.exit_code == 0, rolled.output
    live = kube.get("ray.io/v1", "RayCluster", name="roll", namespace=namespace)
    assert live is not None and live["spec"]["rayVersion"] == "2.52.0"
    assert groups_by_name(live)["cpu"]["replicas"] == 5  # the autoscaler's, not git's 1

    after = history(cli, "roll")
    assert [(e["id"], e["revision"]) for e in after] == [(2, first), (1, second), (0, first)]
    assert after[0]["trigger"] == "rollback" and after[0]["rollbackOf"] == 0
    record = RecordStore(kube, namespace).read("roll").status
    assert PAUSE_KEY not in record  # no automated sync: nothing to pause
    assert record["revision"] == first and record["sync"] == "Synced"

    unknown = cli.raw("rollback", *cli.kube_args, "--cache-dir", str(cli.cache), *app, "roll", "7")
    assert unknown.exit_code == 2
    assert unknown.output.strip().splitlines() == [
        "error (config): app roll has no deployment #7 in its history (known ids: 0-2; "
        "see gitops-ray history roll)"]
    nothing = cli.raw("resume", *cli.kube_args, "roll")
    assert nothing.exit_code == 0 and "was not paused" in nothing.stdout
    missing = cli.raw("history", *cli.kube_args, "rol")
    assert missing.exit_code == 2 and "did you mean roll?" in missing.output


def test_rollback_of_an_automated_app_pauses_it_for_the_given_time_until_resumed(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    cli = Cli(control_plane, namespace, tmp_path / "cache")
    app = ["--repo", git_repo.url, "--apps", "apps"]
    rc = raycluster("auto")
    git_repo.commit({"apps/auto.yaml": application("auto", git_repo.url, namespace),
                     "manifests/rc.yaml": rc}, "first")
    assert cli.sync(*app).exit_code == 0
    git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")}, "second")
    assert cli.sync(*app).exit_code == 0

    started = time.time()
    rolled = cli.raw("rollback", *cli.kube_args, "--cache-dir", str(cli.cache), *app,
                 "--pause-for", "2h", "auto", "0")
    assert rolled.exit_code == 0, rolled.output
    assert "automated sync paused until" in rolled.output and "(rollback to #0)" in rolled.output
    pause = RecordStore(kube, namespace).read("auto").status[PAUSE_KEY]
    assert pause["rollbackId"] == 0 and pause["until"] >= started + 7200
    shown = cli.raw("history", *cli.kube_args, "auto")
    assert "automated sync paused until" in shown.output  # on stderr, after the table

    resumed = cli.raw("resume", *cli.kube_args, "auto")
    assert resumed.exit_code == 0 and "automated sync resumed" in resumed.stdout
    assert PAUSE_KEY not in RecordStore(kube, namespace).read("auto").status
