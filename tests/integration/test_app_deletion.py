"""Deleting an Application follows Argo CD's resources finalizer, in the controller and CLI.

With ``resources-finalizer.argocd.argoproj.io`` the app's objects go with it (by
inventory, only those whose tracking id names the app); without it they are orphaned.
Either way the app's record goes. An app whose source failed to load is never deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.kube import Kube
from gitops_ray.sync.operation import OPERATION_STATE
from gitops_ray.sync.records import RecordStore
from gitops_ray.sync.tracking import TRACKING_ANNOTATION
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import RC_API, Controller, application
from tests.samples import raycluster

FINALIZER = "resources-finalizer.argocd.argoproj.io"


def app_with(name: str, repo: GitRepo, namespace: str, *, cascade: bool) -> dict[str, Any]:
    app = application(name, repo.url, namespace, path=name)
    if cascade:
        app["metadata"]["finalizers"] = [FINALIZER]
    return app


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"a": "1"}}


def adopt(kube: Kube, namespace: str, name: str, app: str) -> None:
    """Give an object another app's tracking id, as if that app had taken it over."""
    kube.patch("v1", "ConfigMap", name=name, namespace=namespace,
               patch={"metadata": {"annotations": {
                   TRACKING_ANNOTATION: f"{app}:/ConfigMap:{namespace}/{name}"}}},
               content_type="application/merge-patch+json", field_manager="other")


def records(kube: Kube, namespace: str) -> set[str]:
    return set(RecordStore(kube, namespace).list_apps())


def test_removed_applications_cascade_or_orphan_but_never_on_a_failed_load(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    kept = config_map("cm-adopted")
    kept["metadata"]["annotations"] = {"argocd.argoproj.io/sync-options": "Prune=false"}
    git_repo.commit({
        "apps/cascade.yaml": app_with("cascade", git_repo, namespace, cascade=True),
        "apps/orphan.yaml": app_with("orphan", git_repo, namespace, cascade=False),
        "apps/keep.yaml": app_with("keep", git_repo, namespace, cascade=True),
        "cascade/rc.yaml": raycluster("rc-cascade"),
        "cascade/cm.yaml": [config_map("cm-cascade"), kept],
        "orphan/rc.yaml": raycluster("rc-orphan"),
        "keep/rc.yaml": raycluster("rc-keep")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           interval="1s")
    for name in ("rc-cascade", "rc-orphan", "rc-keep"):
        eventually(lambda n=name: ctl.live(n), message=f"{name} synced")
    eventually(lambda: kube.get("v1", "ConfigMap", name="cm-adopted",
                                namespace=namespace), message="cm")
    # cm-adopted leaves git but stays (Prune=false), in the inventory; then another app
    # takes it over: deleting "cascade" must leave it alone.
    sha = git_repo.commit({"cascade/cm.yaml": [config_map("cm-cascade")]})
    eventually(lambda: ctl.status("cascade").get("revision") == sha, message="resynced")
    adopt(kube, namespace, "cm-adopted", "someone-else")
    assert {"cascade", "orphan", "keep"} <= records(kube, namespace)

    # A file of the source cannot be read in the same commit that drops two apps:
    # nothing may be deleted, since the unreadable file may be where they went.
    git_repo.commit({"apps/cascade.yaml": None, "apps/orphan.yaml": None,
                     "apps/broken.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: [\n"})
    eventually(lambda: 'gitops_ray_app_source_errors{source="apps"} 1.0' in ctl.metrics(),
               message="the unreadable file")
    assert {"cascade", "orphan"} <= set(ctl.runtime.catalog.apps())
    assert ctl.live("rc-cascade") is not None and ctl.live("rc-orphan") is not None
    assert {"cascade", "orphan"} <= records(kube, namespace)

    git_repo.commit({"apps/broken.yaml": None})  # loads again: two apps really are gone
    eventually(lambda: ctl.live("rc-cascade") is None, message="cascade deletion")
    eventually(lambda: kube.get("v1", "ConfigMap", name="cm-cascade", namespace=namespace) is None,
               message="cascade deletion of the ConfigMap")
    eventually(lambda: records(kube, namespace) == {"keep"}, message="records dropped")
    assert kube.get("v1", "ConfigMap", name="cm-adopted",
                    namespace=namespace) is not None  # not ours now
    assert ctl.live("rc-orphan") is not None  # no finalizer: orphaned, still running
    assert ctl.live("rc-keep") is not None


def test_an_app_removed_while_its_sync_waits_comes_back_with_nothing_remembered(
        start_controller: Callable[..., Controller], git_repo: GitRepo, kube: Kube,
        namespace: str) -> None:
    """The controller forgets all it knew of a deleted app, its waiting sync too.

    Else the app re-added under the same name inherits that sync: continued at the old
    revision, or recorded as superseded in the new app's fresh history.
    """
    waiting = config_map("cm-wave-1")
    waiting["metadata"]["annotations"] = {"argocd.argoproj.io/sync-wave": "1"}
    app = app_with("again", git_repo, namespace, cascade=False)
    git_repo.commit({"apps/again.yaml": app, "again/a.yaml": [raycluster("rc-again"), waiting],
                     "apps/keep.yaml": app_with("keep", git_repo, namespace, cascade=False),
                     "keep/cm.yaml": config_map("cm-keep")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           interval="1s")
    # The RayCluster never reports ready (no operator): the sync waits at wave 0.
    eventually(lambda: "trigger" in (ctl.status("again").get(OPERATION_STATE) or {}),
               message="sync waiting for wave 0")
    git_repo.commit({"apps/again.yaml": None})
    eventually(lambda: "again" not in records(kube, namespace), message="record dropped")

    again = git_repo.commit({"apps/again.yaml": app, "again/a.yaml": config_map("cm-again")})
    eventually(lambda: kube.get("v1", "ConfigMap", name="cm-again", namespace=namespace),
               message="the re-added app synced")
    history = eventually(lambda: ctl.status("again").get("history"), message="history")
    assert [op.get("reason") for op in history if op.get("reason")] == [], history
    assert [op["revision"] for op in history] == [again]
    assert history[0]["phase"] == "Succeeded"
    assert OPERATION_STATE not in ctl.status("again")


def test_cli_delete_cascades_or_orphans_and_forgets_the_app(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    git_repo.commit({"one/rc.yaml": raycluster("del-one"), "two/rc.yaml": raycluster("del-two")})
    kube_args = ["--kubeconfig", str(control_plane.kubeconfig), "--control-namespace",
                 namespace]
    runner = CliRunner()
    for name in ("one", "two"):
        synced = runner.invoke(main, [
            "sync", *kube_args, "--cache-dir", str(tmp_path / "c"), "--repo", git_repo.url,
            "--path", name, "--dest-namespace", namespace, "--name", name])
        assert synced.exit_code == 0, synced.output
    unknown = runner.invoke(main, ["delete", *kube_args, "onee"])
    assert unknown.exit_code == 2 and "did you mean one?" in unknown.output
    cascade = runner.invoke(main, ["delete", *kube_args, "one"])
    assert cascade.exit_code == 0, cascade.output
    # Foreground: gone when the garbage collector says so ("deleting" until then).
    assert re.search(r"del-one\tdelet(ed|ing)\b", cascade.stdout), cascade.stdout
    orphan = runner.invoke(main, ["delete", *kube_args, "--no-cascade", "two"])
    assert orphan.exit_code == 0, orphan.output
    eventually(lambda: kube.get(RC_API, "RayCluster", name="del-one", namespace=namespace) is None,
               message="cascade deletion")
    assert kube.get(RC_API, "RayCluster", name="del-two", namespace=namespace) is not None
    listed = runner.invoke(main, ["status", *kube_args, "-o", "json"])
    assert json.loads(listed.stdout) == []


def test_cli_sync_prune_deletes_apps_whose_application_left_the_directory(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, git_repo: GitRepo,
        tmp_path: Path) -> None:
    git_repo.commit({"apps/gone.yaml": app_with("gone", git_repo, namespace, cascade=True),
                     "apps/left.yaml": app_with("left", git_repo, namespace, cascade=False),
                     "apps/stay.yaml": app_with("stay", git_repo, namespace, cascade=True),
                     **{f"{n}/rc.yaml": raycluster(f"rc-{n}") for n in
                        ("gone", "left", "stay", "flags")}})
    base = ["--kubeconfig", str(control_plane.kubeconfig), "--control-namespace", namespace,
            "--cache-dir", str(tmp_path / "c"), "--repo", git_repo.url]
    runner = CliRunner()
    for args in (["--apps", "apps/"], ["--path", "flags", "--dest-namespace", namespace]):
        synced = runner.invoke(main, ["sync", *base, *args])
        assert synced.exit_code == 0, synced.output
    git_repo.commit({"apps/gone.yaml": None, "apps/left.yaml": None})

    plain = runner.invoke(main, ["sync", *base, "--apps", "apps"])
    assert plain.exit_code == 0, plain.output
    assert records(kube, namespace) == {"gone", "left", "stay", "flags"}  # no --prune
    pruned = runner.invoke(main, ["sync", *base, "--apps", "apps", "--prune"])
    assert pruned.exit_code == 0, pruned.output
    assert re.search(r"gone\tray\.io/RayCluster:\S+\tdelet(ed|ing)\b", pruned.stdout), \
        pruned.stdout
    assert records(kube, namespace) == {"stay", "flags"}
    eventually(lambda: kube.get(RC_API, "RayCluster", name="rc-gone", namespace=namespace) is None,
               message="cascade deletion")
    for name in ("rc-left", "rc-stay", "rc-flags"):
        assert kube.get(RC_API, "RayCluster", name=name, namespace=namespace) is not None, name
