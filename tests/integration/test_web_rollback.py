"""The web page's Rollback and Resume buttons on an automated app: the in-process controller
on the real API server, ServiceAccount tokens authorised by a Role for the custom verbs.

As the CLI's rollback (tests/integration/test_controller_rollback.py): the old revision
is synced and recorded as a rollback, automation stays paused through a new commit, and
Resume brings git's revision back. No sleeps: every wait is on a recorded fact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import requests

from gitops_ray.kube import Kube
from gitops_ray.reconcile.pause import PAUSE_KEY
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application, push_payload, ray_version, with_version
from tests.integration.test_web import service_account_token
from tests.samples import raycluster

APP = "rb"


def test_rollback_button_pauses_and_syncs_the_old_revision_until_resumed(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str, kube: Kube) -> None:
    rc = raycluster(APP)
    git_repo.commit({f"apps/{APP}.yaml": application(APP, git_repo.url, namespace),
                     "manifests/rc.yaml": rc}, "ray 2.52")
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           **{"ui.actions": True})
    eventually(lambda: ray_version(ctl, APP) == "2.52.0", message="first sync")
    second = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.53.0")}, "ray 2.53")
    assert ctl.webhook(push_payload(git_repo, second)).status_code == 202
    eventually(lambda: _newest(ctl).get("revision") == second, message="second sync")
    first = ctl.status(APP)["history"][1]["revision"]

    page = requests.get(f"{ctl.url}/apps/{APP}", timeout=10).text
    assert 'id="rollback-0"' in page and 'id="rollback-1"' not in page
    assert 'id="action-resume"' not in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    url, same_site = f"{ctl.url}/apps/{APP}/rollback", {"Sec-Fetch-Site": "same-origin"}

    syncer = service_account_token(kube, namespace, "syncer", ["sync", "refresh"], APP)
    denied = requests.post(url, data={"csrf": csrf[1], "token": syncer, "id": "0"},
                           headers=same_site, timeout=10, allow_redirects=False)
    assert denied.status_code == 403 and "may not rollback" in denied.text
    forged = requests.post(url, data={"csrf": "1.00", "token": syncer, "id": "0"},
                           headers=same_site, timeout=10, allow_redirects=False)
    assert forged.status_code == 403 and "expired" in forged.text

    operator = service_account_token(kube, namespace, "operator", ["rollback"], APP)
    unknown = requests.post(f"{url}?id=7", headers={"Authorization": f"Bearer {operator}"},
                            timeout=10)
    assert unknown.status_code == 400 and "known ids: 0-1" in unknown.text
    assert PAUSE_KEY not in ctl.status(APP)  # a refused rollback pauses nothing
    done = requests.post(url, data={"csrf": csrf[1], "token": operator, "id": "0"},
                         headers=same_site, timeout=10, allow_redirects=False)
    assert done.status_code == 303 and done.headers["Location"] == f"/apps/{APP}?done=rollback"

    eventually(lambda: ray_version(ctl, APP) == "2.52.0", message="the rollback applied")
    rolled = eventually(lambda: _newest(ctl) if _newest(ctl).get("rollbackOf") == 0 else None,
                        message="the rollback recorded")
    user = f"system:serviceaccount:{namespace}:operator"
    assert (rolled["id"], rolled["trigger"], rolled["revision"], rolled["initiatedBy"]) == \
        (2, "rollback", first, user)
    status = ctl.status(APP)
    assert status[PAUSE_KEY]["rollbackId"] == 0 and status[PAUSE_KEY]["until"] is None
    assert operator not in str(status)

    # A new commit and its webhook: the controller compares it and stays paused.
    third = git_repo.commit({"manifests/rc.yaml": with_version(rc, "2.54.0")}, "ray 2.54")
    assert ctl.webhook(push_payload(git_repo, third)).status_code == 202
    paused = eventually(lambda: _paused_at(ctl, third), message="a paused pass")
    assert {"type": "AutoSyncPaused",
            "message": "automated sync paused until resumed (rollback to #0)"} \
        in paused["conditions"]
    assert ray_version(ctl, APP) == "2.52.0"
    page = requests.get(f"{ctl.url}/apps/{APP}", timeout=10).text
    assert 'id="paused"' in page and "(rollback to #0)" in page and 'id="action-resume"' in page

    resume = f"{ctl.url}/apps/{APP}/resume"
    refused = requests.post(resume, headers={"Authorization": f"Bearer {operator}"},
                            timeout=10)
    assert refused.status_code == 403 and "may not resume" in refused.text
    owner = service_account_token(kube, namespace, "owner", ["resume"], APP)
    resumed = requests.post(resume, data={"csrf": csrf[1], "token": owner},
                            headers=same_site, timeout=10, allow_redirects=False)
    assert resumed.status_code == 303
    eventually(lambda: ray_version(ctl, APP) == "2.54.0", message="git's revision again")
    newest = eventually(lambda: _newest(ctl) if _newest(ctl).get("revision") == third
                        and "trigger" in _newest(ctl) else None,
                        message="recorded (pushed, then marked: two writes)")
    assert (newest["id"], newest["trigger"]) == (3, "auto-sync")
    assert PAUSE_KEY not in ctl.status(APP)


def test_a_follower_refuses_a_rollback_and_pauses_nothing(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str, kube: Kube) -> None:
    git_repo.commit({f"apps/{APP}.yaml": application(APP, git_repo.url, namespace),
                     "manifests/rc.yaml": raycluster(APP)})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           **{"ui.actions": True})
    eventually(lambda: _newest(ctl).get("id") == 0, message="first sync")
    assert ctl.runtime.controller.stop_leading(10)
    operator = service_account_token(kube, namespace, "operator", ["rollback"], APP)
    answer = requests.post(f"{ctl.url}/apps/{APP}/rollback?id=0", timeout=10,
                           headers={"Authorization": f"Bearer {operator}"})
    assert answer.status_code == 503 and "Traceback" not in answer.text
    assert PAUSE_KEY not in ctl.status(APP)


def _newest(ctl: Controller) -> dict[str, Any]:
    entries = ctl.status(APP).get("history") or [{}]
    return entries[0]  # type: ignore[no-any-return]


def _paused_at(ctl: Controller, revision: str) -> dict[str, Any] | None:
    """The status once a pass compared ``revision`` and decided to stay paused."""
    status = ctl.status(APP)
    paused = (status.get("autoSync") or {}).get("action") == "paused"
    return status if paused and status.get("revision") == revision else None
