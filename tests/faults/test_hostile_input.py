"""Hostile or broken input in a config repo fails the app it belongs to, and only that app.

The real controller process (``tests/faults/conftest.py``) watches an app-of-apps
directory in a real git repo and syncs into the real API server. Each test breaks one
thing (issue 13 items 2, 6 and 7) and checks three facts on real state: the broken app's
recorded status names the problem, another app still syncs a new commit, and nothing
was pruned because of the breakage. Waits are on those conditions, never on time.
"""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_ray.kube import Kube
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController
from tests.harness.runtime import application
from tests.harness.settings import NO_LEADER_ELECTION, controller_settings
from tests.samples import raycluster
from tests.unit.test_render_bounds import alias_bomb

CATALOG = (Path(__file__).parent.parent / "testdata" / "shapes" / "instance-types.yaml")
MEMORY_LIMIT_MIB = 512  # the chart's limit


def configmap(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"value": value}}


def shaped_cluster(name: str) -> dict[str, Any]:
    """A RayCluster whose pods take their size from the repo's instance-type catalog."""
    rc = raycluster(name)
    for group in (rc["spec"]["headGroupSpec"], *rc["spec"]["workerGroupSpecs"]):
        group["template"].setdefault("metadata", {})["annotations"] = {
            "gitops-ray.io/instance-type": "2CPU-8GB"}
    return rc


class Repo:
    """The config repo, the controller and the cluster, seen by one test."""

    def __init__(self, git: GitRepo, kube: Kube, namespace: str) -> None:
        self.git, self.kube, self.namespace = git, kube, namespace
        self.store = RecordStore(kube, namespace)

    def apps(self, *names: str) -> dict[str, object]:
        return {f"apps/{n}.yaml": application(n, self.git.url, self.namespace,
                                              path=f"clusters/{n}") for n in names}

    def status(self, app: str) -> dict[str, Any]:
        return self.store.load(app).status

    def live(self, kind: str, name: str) -> dict[str, Any] | None:
        api = "ray.io/v1" if kind == "RayCluster" else "v1"
        return self.kube.get(api, kind, name=name, namespace=self.namespace)

    def synced(self, app: str, sha: str) -> bool:
        status = self.status(app)
        return status.get("revision") == sha and status.get("sync") == "Synced" \
            and not status.get("error")

    def failed(self, app: str, *needles: str) -> str:
        error = str(self.status(app).get("error") or "")
        return error if all(n in error for n in needles) else ""

    def value(self, name: str) -> str:
        return str(((self.live("ConfigMap", name) or {}).get("data") or {}).get("value", ""))


@pytest.fixture
def repo(git_repo: GitRepo, kube: Kube, namespace: str) -> Repo:
    return Repo(git_repo, kube, namespace)


def start(controller_process: StartController, control_plane: LocalControlPlane,
          repo: Repo, helm_bin: Path) -> ControllerProcess:
    return controller_process("hostile", controller_settings(
        control_plane.kubeconfig, repo.namespace, interval="1s", helm=str(helm_bin),
        leaderElection=NO_LEADER_ELECTION,
        appSources=[{"repo": repo.git.url, "revision": "main", "path": "apps"}]))


def bootstrap(repo: Repo, files: dict[str, object], *apps: str) -> str:
    return repo.git.commit({**repo.apps(*apps), **files}, message="bootstrap")


# -- item 2: an alias bomb ----------------------------------------------------------------

def test_an_alias_bomb_fails_its_app_while_the_others_sync_and_memory_stays_low(
        controller_process: StartController, control_plane: LocalControlPlane, repo: Repo,
        helm_bin: Path) -> None:
    sha = bootstrap(repo, {"clusters/a/rc.yaml": raycluster("a"),
                           "clusters/b/cm.yaml": configmap("b", "1")}, "a", "b")
    controller = start(controller_process, control_plane, repo, helm_bin)
    eventually(lambda: repo.synced("a", sha) and repo.synced("b", sha), message="first sync")
    before = controller.peak_rss_mib()

    bombs = {"clusters/a/bomb.yaml": alias_bomb(10, 6),  # the 462 bytes: 10^6 nodes
             "clusters/a/bigger.yaml": alias_bomb(10, 9)}  # 10^9 nodes; 4.3 GiB reported
    sha = repo.git.commit({**bombs, "clusters/b/cm.yaml": configmap("b", "2")})
    error = eventually(lambda: repo.failed("a", "clusters/a/bigger.yaml", "over the limit"),
                       message="the bomb's error in app a's status")
    eventually(lambda: repo.synced("b", sha) and repo.value("b") == "2", message="b syncs")

    peak = controller.peak_rss_mib()
    print(f"\npeak RSS (VmHWM): {before:.0f} MiB before the bomb, {peak:.0f} MiB after; "
          f"app a: {error}")
    assert controller.alive()
    assert peak < MEMORY_LIMIT_MIB / 2
    assert repo.live("RayCluster", "a") is not None  # a failed render prunes nothing


# -- item 6: a typo in kind or apiVersion -------------------------------------------------

TYPOS = [("kind: RayCluster\n", "", "no kind"),
         ("kind:", "kidn:", "no kind"),
         ("apiVersion: ray.io/v1\n", "", "no apiVersion"),
         ("apiVersion:", "apiVerison:", "no apiVersion")]


def test_a_typo_in_kind_or_api_version_is_an_error_and_prunes_nothing(
        controller_process: StartController, control_plane: LocalControlPlane, repo: Repo,
        helm_bin: Path) -> None:
    good = "apiVersion: ray.io/v1\nkind: RayCluster\n" + _yaml_body(raycluster("a"))
    sha = bootstrap(repo, {"clusters/a/rc.yaml": good,
                           "clusters/b/cm.yaml": configmap("b", "0")}, "a", "b")
    start(controller_process, control_plane, repo, helm_bin)
    eventually(lambda: repo.synced("a", sha) and repo.synced("b", sha), message="first sync")
    uid = (repo.live("RayCluster", "a") or {})["metadata"]["uid"]

    for index, (old, new, message) in enumerate(TYPOS, start=1):
        assert old in good
        sha = repo.git.commit({"clusters/a/rc.yaml": good.replace(old, new, 1),
                               "clusters/b/cm.yaml": configmap("b", str(index))})
        eventually(partial(repo.failed, "a", "clusters/a/rc.yaml", message),
                   message=f"typo {index} recorded")
        eventually(partial(repo.synced, "b", sha), message=f"b syncs past typo {index}")
        live = repo.live("RayCluster", "a")
        assert live is not None and live["metadata"]["uid"] == uid, f"typo {index} pruned it"
        assert "deletionTimestamp" not in live["metadata"]
        sha = repo.git.commit({"clusters/a/rc.yaml": good})
        eventually(partial(repo.synced, "a", sha), message=f"fixed after typo {index}")


def _yaml_body(obj: dict[str, Any]) -> str:
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return yaml.safe_dump(rest, sort_keys=False)


# -- item 7: a broken patch file, a bad Application ----------------------------------------

def test_a_broken_patch_file_fails_only_the_apps_using_shapes(
        controller_process: StartController, control_plane: LocalControlPlane, repo: Repo,
        helm_bin: Path) -> None:
    sha = bootstrap(repo, {".gitops-ray/instance-types.yaml": CATALOG.read_text(),
                           "clusters/s/rc.yaml": shaped_cluster("s"),
                           "clusters/b/cm.yaml": configmap("b", "1")}, "s", "b")
    start(controller_process, control_plane, repo, helm_bin)
    eventually(lambda: repo.synced("s", sha) and repo.synced("b", sha), message="first sync")

    sha = repo.git.commit({".gitops-ray/patches.yaml": "- kind: Pod\n  patch: [\n",
                           "clusters/b/cm.yaml": configmap("b", "2")})
    eventually(lambda: repo.failed("s", ".gitops-ray/patches.yaml", "invalid YAML"),
               message="the shapes app fails with the file's error")
    eventually(lambda: repo.synced("b", sha) and repo.value("b") == "2", message="b syncs")
    assert repo.live("RayCluster", "s") is not None


def test_a_bad_application_fails_only_itself_and_is_visible(
        controller_process: StartController, control_plane: LocalControlPlane, repo: Repo,
        helm_bin: Path) -> None:
    sha = bootstrap(repo, {"clusters/a/rc.yaml": raycluster("a"),
                           "clusters/b/cm.yaml": configmap("b", "1")}, "a", "b")
    controller = start(controller_process, control_plane, repo, helm_bin)
    eventually(lambda: repo.synced("a", sha) and repo.synced("b", sha), message="first sync")

    evil = application("evil", repo.git.url, repo.namespace, path="../../../../etc")
    sha = repo.git.commit({"apps/evil.yaml": evil, "clusters/b/cm.yaml": configmap("b", "2")})
    eventually(lambda: repo.failed("evil", "apps/evil.yaml", "points outside the repository"),
               message="evil's error in its own status")
    eventually(lambda: repo.synced("b", sha) and repo.value("b") == "2", message="b syncs")
    eventually(lambda: repo.synced("a", sha), message="a keeps syncing")
    eventually(lambda: 'gitops_ray_app_source_errors{source="apps"} 1.0' in controller.metrics(),
               message="the metric counts it")

    # An Application file that is no longer YAML at all: its app stays managed, invalid
    # with the file's error; nothing of it is pruned, and the other apps go on.
    broken = copy.deepcopy(repo.apps("a"))
    broken["apps/a.yaml"] = "apiVersion: argoproj.io/v1alpha1\nkind: Application\n" \
                            "metadata: {name: a\n"
    sha = repo.git.commit({**broken, "clusters/b/cm.yaml": configmap("b", "3")})
    eventually(lambda: repo.failed("a", "apps/a.yaml", "invalid YAML"),
               message="a's file error in a's status")
    eventually(lambda: repo.synced("b", sha) and repo.value("b") == "3", message="b syncs")
    assert repo.live("RayCluster", "a") is not None


def test_a_skipped_file_blocks_prune_but_the_rest_still_syncs(
        controller_process: StartController, control_plane: LocalControlPlane, repo: Repo,
        helm_bin: Path) -> None:
    sha = bootstrap(repo, {"clusters/a/rc.yaml": raycluster("a"),
                           "clusters/a/cm.yaml": configmap("a", "1")}, "a")
    start(controller_process, control_plane, repo, helm_bin)
    eventually(lambda: repo.synced("a", sha), message="first sync")

    # kind: deleted *and* a syntax error: Argo CD's rule skips the file as "not a
    # manifest", so its RayCluster drops out of the render. The sync still applies the
    # ConfigMap, but prunes nothing and says why.
    broken = "apiVersion: ray.io/v1\nmetadata: {name: a\nspec: {}\n"
    repo.git.commit({"clusters/a/rc.yaml": broken, "clusters/a/cm.yaml": configmap("a", "2")})
    eventually(lambda: repo.value("a") == "2", message="the rest of app a syncs")
    status = eventually(lambda: repo.status("a") if repo.status("a").get("renderWarnings")
                        else None, message="the skipped file in a's status")
    assert "clusters/a/rc.yaml" in status["renderWarnings"][0]
    pending = [r for r in status["operation"]["resources"] if r["action"] == "pending-prune"]
    assert pending and "not pruned: the render had problems" in pending[0]["message"]
    assert repo.live("RayCluster", "a") is not None
