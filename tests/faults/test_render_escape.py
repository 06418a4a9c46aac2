"""A config repo reads only itself, and no child process takes the controller down.

Issue 36 items 1, 2, 3 and 8, tried as an author with commit access to one repository
would, against the real controller process, git, helm and kubectl kustomize, syncing
into the real API server:

* a chart reads a file outside the checkout through a link inside a linked directory
  (``.Files.Get`` into a ConfigMap, ``fail`` into the render error); a kustomization
  names another repository's mirror by ``file://``, a remote base, a ``../`` path; a
  chart's ``valueFiles`` names a URL: each app fails, saying why, and the secret shows
  nowhere (status, Events, log, live objects);
* a chart that makes helm allocate without bound fails its app with
  ``MemoryLimitExceeded``; the controller lives, stays small, keeps syncing the other
  app and does not render the same commit again at every refresh.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from tests.faults.test_hostile_input import Repo, configmap
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import StartController
from tests.harness.runtime import application
from tests.harness.settings import NO_LEADER_ELECTION, controller_settings

SECRET = "TOP-SECRET-TOKEN-VALUE"
CHART = "apiVersion: v2\nname: c\nversion: 0.1.0\n"
CHILD_LIMIT_MIB = 256
BALLOON = """{{- $s := "xxxxxxxxxxxxxxxx" }}{{- range until 28 }}{{- $s = print $s $s }}{{- end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: balloon}
data: {n: {{ len $s | quote }}}
"""


@pytest.fixture
def repo(git_repo: GitRepo, kube: Kube, namespace: str) -> Repo:
    return Repo(git_repo, kube, namespace)


def settings(control_plane: LocalControlPlane, repo: Repo, helm_bin: Path) -> dict[str, object]:
    return controller_settings(
        control_plane.kubeconfig, repo.namespace, interval="1s", helm=str(helm_bin),
        leaderElection=NO_LEADER_ELECTION, childMemoryLimit=f"{CHILD_LIMIT_MIB}Mi",
        appSources=[{"repo": repo.git.url, "revision": "main", "path": "apps"}])


def evil_files(repo: Repo, outside: Path, cache: Path) -> dict[str, object]:
    """The attacks, one app each (links are made in the work tree, see below)."""
    mirror = cache / "repos" / hashlib.sha256(b"https://example.com/other.git").hexdigest()[:16]
    cm = yaml.safe_dump(configmap("x", "1"))
    return {
        "clusters/files-get/Chart.yaml": CHART, "clusters/files-get/templates/cm.yaml":
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n"
            'data: {t: {{ .Files.Get "shared/token" | quote }}}\n',
        "clusters/fail/Chart.yaml": CHART,
        "clusters/fail/templates/x.yaml": '{{ fail (.Files.Get "shared/token") }}\n',
        "shared/README": "shared files\n",
        "clusters/mirror/kustomization.yaml": yaml.safe_dump(
            {"resources": [f"file://{mirror}/mirror.git//base"]}),
        "clusters/remote/kustomization.yaml": yaml.safe_dump(
            {"resources": ["https://169.254.169.254/latest/user-data"]}),
        "clusters/updir/kustomization.yaml": yaml.safe_dump({"resources": ["../../.."]}),
        "clusters/values/Chart.yaml": CHART, "clusters/values/templates/cm.yaml": cm,
        "clusters/good/cm.yaml": configmap("good", "1"),
    }


EVIL = {"files-get": "symlink 'shared/token' (reached through 'clusters/files-get/shared')",
        "fail": "symlink 'shared/token' (reached through 'clusters/fail/shared')",
        "mirror": "file:// URLs are not allowed",
        "remote": "remote bases and resources are not fetched",
        "updir": "resolves outside the repository",
        "values": "render.valueFileHosts"}


def test_a_repo_reads_nothing_outside_its_checkout_and_the_other_apps_sync(
        controller_process: StartController, control_plane: LocalControlPlane,
        repo: Repo, kube: Kube, helm_bin: Path, tmp_path: Path) -> None:
    outside = tmp_path / "pod" / "token"  # stands for /var/run/secrets/.../token
    outside.parent.mkdir()
    outside.write_text(SECRET)
    files = evil_files(repo, outside, tmp_path / "evil" / "repos")
    apps: dict[str, object] = {
        f"apps/{n}.yaml": application(n, repo.git.url, repo.namespace, path=f"clusters/{n}")
        for n in [*EVIL, "good"]}
    values = apps["apps/values.yaml"]["spec"]["source"]  # type: ignore[index]
    values["helm"] = {"valueFiles": ["http://169.254.169.254/latest/meta-data/iam"]}
    repo.git.write(files)
    (repo.git.work / "shared" / "token").symlink_to(outside)
    for app in ("files-get", "fail"):
        (repo.git.work / "clusters" / app / "shared").symlink_to("../../shared")
    sha = repo.git.commit(apps, message="attacks")

    controller = controller_process("evil", settings(control_plane, repo, helm_bin))
    eventually(lambda: repo.synced("good", sha), message="the good app syncs")
    for app, needle in EVIL.items():
        eventually(lambda a=app, n=needle: repo.failed(a, n),  # type: ignore[misc]
                   message=f"app {app} says why")
    sha = repo.git.commit({"clusters/good/cm.yaml": configmap("good", "2")})
    eventually(lambda: repo.synced("good", sha) and repo.value("good") == "2",
               message="the good app syncs a new commit")

    assert controller.alive()
    assert repo.live("ConfigMap", "stolen") is None
    events = kube.list("v1", "Event", namespace=repo.namespace)[0]
    shown = [str(repo.status(a)) for a in EVIL] + [controller.text(), str(events)]
    assert not [text for text in shown if SECRET in text]


def test_a_chart_that_balloons_helm_fails_alone_and_is_not_retried_in_a_loop(
        controller_process: StartController, control_plane: LocalControlPlane,
        repo: Repo, helm_bin: Path) -> None:
    apps: dict[str, object] = {
        f"apps/{n}.yaml": application(n, repo.git.url, repo.namespace, path=f"clusters/{n}")
        for n in ("balloon", "good")}
    sha = repo.git.commit({**apps, "clusters/balloon/Chart.yaml": CHART,
                           "clusters/balloon/templates/cm.yaml": BALLOON,
                           "clusters/good/cm.yaml": configmap("good", "1")})
    controller = controller_process("balloon", settings(control_plane, repo, helm_bin))
    error = eventually(lambda: repo.failed("balloon", "MemoryLimitExceeded",
                                           f"{CHILD_LIMIT_MIB} MiB"),
                       message="the balloon's app says it ran out of memory")
    eventually(lambda: repo.synced("good", sha), message="the good app syncs")

    def refreshes() -> int:
        return len([r for r in controller.events("refresh_failed")
                    if r.get("app") == "balloon"])
    eventually(lambda: refreshes() >= 4, message="the balloon's app refreshed again")
    renders = len(controller.events("render_out_of_memory"))
    sha = repo.git.commit({"clusters/good/cm.yaml": configmap("good", "2")})
    eventually(lambda: repo.synced("good", sha), message="the good app syncs a new commit")
    print(f"\n{refreshes()} failed refreshes, {renders} renders; peak RSS "
          f"{controller.peak_rss_mib():.0f} MiB; app balloon: {error}")
    assert controller.alive()
    assert renders < refreshes()  # the same commit is not rendered at every refresh
    assert controller.peak_rss_mib() < CHILD_LIMIT_MIB
