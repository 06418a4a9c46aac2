"""The parse memo in a running controller: a commit to one of an app's files is applied,
and so is its revert, whose bytes the memo has seen before (real API server, git, webhook).

The controller runs in-process (:mod:`tests.integration.test_controller`), so the memo it
uses is this process's :data:`~gitops_ray.render.memo.PARSES`.
"""

from __future__ import annotations

from collections.abc import Callable

from gitops_ray.render.memo import PARSES
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload, ray_version, with_version
from tests.samples import raycluster

NAMES = ("memo-0", "memo-1", "memo-2")


def test_a_commit_to_one_file_and_its_revert_are_applied_through_the_memo(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    PARSES.clear()
    clusters = {name: raycluster(name) for name in NAMES}
    git_repo.commit({f"manifests/{name}.yaml": rc for name, rc in clusters.items()})
    ctl = start_controller({"applications": [application("memo", git_repo.url, namespace)]},
                           interval="0")
    eventually(lambda: all(ray_version(ctl, name) == "2.52.0" for name in NAMES),
               message="first sync")

    changed = git_repo.commit({"manifests/memo-1.yaml": with_version(clusters["memo-1"],
                                                                     "2.53.0")})
    assert ctl.webhook(push_payload(git_repo, changed)).status_code == 202
    eventually(lambda: ray_version(ctl, "memo-1") == "2.53.0", message="change applied")
    assert PARSES.hits >= 2  # memo-0 and memo-2 were not parsed again

    reverted = git_repo.commit({"manifests/memo-1.yaml": clusters["memo-1"]})
    assert ctl.webhook(push_payload(git_repo, reverted)).status_code == 202
    eventually(lambda: ray_version(ctl, "memo-1") == "2.52.0", message="revert applied")
    eventually(lambda: ctl.status("memo").get("revision") == reverted, message="status")
    for name in NAMES:
        live = ctl.live(name)
        assert live is not None and live["spec"]["rayVersion"] == "2.52.0"
        assert live["metadata"]["labels"]["gitops-ray.io/app"] == "memo"
