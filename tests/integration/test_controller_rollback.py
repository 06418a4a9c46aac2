"""A rollback while the controller runs with automated sync and self-heal: it pauses the
app, a pass that would have synced a new commit does not, and ``resume`` brings git's
revision back. Real API server, real git, the controller in-process; no sleeps: every wait
is on a recorded fact (the revision a pass compared, the decision it recorded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops_ray.reconcile.pause import PAUSE_KEY
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.cli import Cli
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload, ray_version, with_version
from tests.samples import raycluster


def test_rollback_pauses_auto_sync_until_resumed_then_git_wins_again(
        start_controller: Callable[..., Controller],
        control_plane: LocalControlPlane, git_repo: GitRepo, namespace: str,
        tmp_path: Path) -> None:
    rc = raycluster("paused")
    git_repo.commit({"apps/paused.yaml": application("paused", git_repo.url, namespace,
                                                     self_heal=True),
                     "manifests/rc.yaml": rc}, "ray 2.52")
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: ray_version(ctl, "paused") == "2.52.0", message="first sync")
    second = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")}, "ray 2.53")
    assert ctl.webhook(push_payload(git_repo, second)).status_code == 202
    eventually(lambda: _newest(ctl).get("revision") == second, message="second sync")
    assert [e.get("id") for e in ctl.status("paused")["history"]] == [1, 0]

    cli = Cli(control_plane, namespace, tmp_path / "cli-cache")
    rolled = cli.raw("rollback", *cli.kube_args, "--cache-dir", str(cli.cache), "--repo",
                 git_repo.url, "--apps", "apps", "paused", "0")
    assert rolled.exit_code == 0, rolled.output
    assert ray_version(ctl, "paused") == "2.52.0"

    # The controller compares git's revision with the rolled-back cluster and holds off.
    status = eventually(lambda: _paused_at(ctl, second), message="the pause seen")
    assert status["sync"] == "OutOfSync"
    assert {"type": "AutoSyncPaused",
            "message": "automated sync paused until resumed (rollback to #0)"} \
        in status["conditions"]

    # A pass that would have synced a new commit (auto-sync) does not.
    third = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.54.0")}, "ray 2.54")
    assert ctl.webhook(push_payload(git_repo, third)).status_code == 202
    eventually(lambda: _paused_at(ctl, third), message="a paused pass at the new commit")
    assert ray_version(ctl, "paused") == "2.52.0"
    newest = _newest(ctl)
    assert (newest["id"], newest["trigger"], newest["rollbackOf"]) == (2, "rollback", 0)

    resumed = cli.raw("resume", *cli.kube_args, "paused")
    assert resumed.exit_code == 0, resumed.output
    eventually(lambda: ray_version(ctl, "paused") == "2.54.0", message="git's revision again")
    eventually(lambda: _newest(ctl).get("revision") == third and "trigger" in _newest(ctl),
               message="recorded (pushed, then marked: two writes)")
    assert _newest(ctl)["id"] == 3 and _newest(ctl)["trigger"] == "auto-sync"
    status = eventually(lambda: _synced(ctl), message="the pause gone from the status")
    assert PAUSE_KEY not in status


def _newest(ctl: Controller) -> dict[str, Any]:
    entries = ctl.status("paused").get("history") or [{}]
    return entries[0]  # type: ignore[no-any-return]


def _paused_at(ctl: Controller, revision: str) -> dict[str, Any] | None:
    """The status once a pass compared ``revision`` and decided to stay paused."""
    status = ctl.status("paused")
    paused = (status.get("autoSync") or {}).get("action") == "paused"
    return status if paused and status.get("revision") == revision else None


def _synced(ctl: Controller) -> dict[str, Any] | None:
    status = ctl.status("paused")
    conditions = [c["type"] for c in status.get("conditions") or ()]
    return status if status.get("sync") == "Synced" and "AutoSyncPaused" not in conditions \
        else None
