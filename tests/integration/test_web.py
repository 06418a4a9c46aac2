"""The web page over HTTP: the in-process controller on the real API server.

Pages are read with ``requests`` (the browser tests are in tests/e2e/test_web_browser.py);
actions are authorised by the real API server: ServiceAccount tokens from the TokenRequest
API, a Role granting the custom verbs on the app's record ConfigMap.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests

from gitops_ray.kube import Kube
from gitops_ray.runtime.web.auth import FAILURES_ALLOWED
from gitops_ray.sync.records import record_name
from localcluster import LocalControlPlane
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.samples import raycluster, role_binding, worker_group

AUTOSCALER = "python-requests"  # the Ray autoscaler sends no fieldManager: its User-Agent


def manual_app(name: str, repo_url: str, namespace: str) -> dict[str, Any]:
    app = application(name, repo_url, namespace)
    del app["spec"]["syncPolicy"]
    return app


def three_groups() -> dict[str, Any]:
    return raycluster("web", groups=[worker_group("cpu", replicas=1),
                                     worker_group("gpu", replicas=0),
                                     worker_group("highmem", replicas=2)])


def autoscale(kube: Kube, namespace: str, name: str, group: int, replicas: int) -> None:
    """What the Ray autoscaler's KubeRay provider does: a JSON patch of one group's replicas."""
    kube.patch("ray.io/v1", "RayCluster", name=name, namespace=namespace,
               patch=[{"op": "replace", "path": f"/spec/workerGroupSpecs/{group}/replicas",
                       "value": replicas}], field_manager=AUTOSCALER)


def group_row(page: str, group: str) -> dict[str, str]:
    """The worker-group table's cells of ``group`` by class (git, live, manager)."""
    row = re.search(rf'<tr class="[^"]*" data-group="{re.escape(group)}">(.*?)</tr>', page,
                    re.S)
    assert row is not None, f"no row for {group}"
    return {m[0]: m[1].strip() for m in
            re.findall(r'<td class="(?:num |mono )?(git|live|manager)">(.*?)</td>', row[1])}


def service_account_token(kube: Kube, namespace: str, name: str,
                          verbs: list[str] | None = None, app: str = "", *,
                          audience: str | None = "gitops-ray") -> str:
    """A token of a new ServiceAccount, granted ``verbs`` on ``app``'s record if given.

    Bound to ``audience`` (the page's, as ``kubectl create token --audience``); ``None``
    for the API server's own audience (a ServiceAccount's everyday API token).
    """
    if kube.get("v1", "ServiceAccount", name=name, namespace=namespace) is None:
        _grant(kube, namespace, name, verbs, app)
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if audience is not None:
        spec["audiences"] = [audience]
    token: str = kube.call(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": spec})["status"]["token"]
    return token


def _grant(kube: Kube, namespace: str, name: str, verbs: list[str] | None, app: str) -> None:
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": name, "namespace": namespace}}, field_manager="tests")
    if verbs:
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": name, "namespace": namespace},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                "resourceNames": [record_name(app)], "verbs": verbs}]},
                    field_manager="tests")
        kube.create(role_binding(name, namespace), field_manager="tests")


def test_list_and_app_pages_show_the_autoscalers_replicas_next_to_gits(
        start_controller: Callable[..., Controller], git_repo: GitRepo, namespace: str,
        kube: Kube) -> None:
    git_repo.commit({"apps/web.yaml": application("web", git_repo.url, namespace),
                     "manifests/rc.yaml": three_groups()})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: ctl.status("web").get("operation", {}).get("phase") == "Succeeded",
               message="first sync")
    autoscale(kube, namespace, "web", 0, 3)

    def page() -> str:
        text = requests.get(f"{ctl.url}/apps/web", timeout=10).text
        return text if group_row(text, "cpu").get("live") == "3" else ""

    shown = eventually(page, message="the autoscaler's replicas on the page")
    assert group_row(shown, "cpu") == {"git": "1", "live": "3",
                                       "manager": f"{AUTOSCALER} (autoscaler)"}
    assert group_row(shown, "highmem")["git"] == group_row(shown, "highmem")["live"] == "2"
    assert "Content-Security-Policy" in requests.get(f"{ctl.url}/apps/web", timeout=10).headers
    for section in ('id="summary"', 'id="tree"', 'id="history"', "Last diff", "Succeeded"):
        assert section in shown

    listing = requests.get(f"{ctl.url}/", timeout=10)
    assert listing.status_code == 200 and listing.headers["Content-Type"].startswith("text/html")
    assert '<a href="/apps/web">web</a>' in listing.text
    assert "Synced" in listing.text and "ago" in listing.text
    assert requests.get(f"{ctl.url}/?page=99&q=we", timeout=10).status_code == 200


def test_unknown_app_is_a_404_page_and_hostile_names_are_escaped(
        start_controller: Callable[..., Controller], git_repo: GitRepo,
        namespace: str) -> None:
    """Names reach the page from git: a worker group named like a script is only text."""
    hostile = "x<script>alert(1)</script>"
    git_repo.commit({"apps/ok.yaml": application("ok", git_repo.url, namespace),
                     "manifests/rc.yaml": raycluster("esc", groups=[worker_group(hostile)])})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: ctl.status("ok").get("sync") == "Synced", message="first sync")

    def page() -> str:
        text = requests.get(f"{ctl.url}/apps/ok", timeout=10).text
        return text if "alert(1)" in text else ""

    shown = eventually(page, message="the hostile group on the page")
    assert "<script>" not in shown and html.escape(hostile, quote=False) in shown

    for path in ("/apps/nope", "/apps/ok/extra", "/apps/%ff", "/apps/ok/sync", "/apps/",
                 "/apps/%3Cscript%3E"):
        missing = requests.get(f"{ctl.url}{path}", timeout=10)
        assert missing.status_code in (404, 405), path
        assert "<script>" not in missing.text and "Traceback" not in missing.text
    missing = requests.get(f"{ctl.url}/apps/nope", timeout=10)
    assert missing.status_code == 404 and "No such app" in missing.text


@pytest.fixture
def actions_app(start_controller: Callable[..., Controller], git_repo: GitRepo,
                namespace: str) -> Controller:
    git_repo.commit({"apps/act.yaml": manual_app("act", git_repo.url, namespace),
                     "manifests/rc.yaml": raycluster("act")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]},
                           **{"ui.actions": True})
    eventually(lambda: ctl.status("act").get("sync") == "OutOfSync", message="compared")
    return ctl


def test_actions_need_a_token_kubernetes_authorises_for_the_verb(
        actions_app: Controller, kube: Kube, namespace: str) -> None:
    ctl = actions_app
    url = f"{ctl.url}/apps/act/sync"
    page = requests.get(f"{ctl.url}/apps/act", timeout=10).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None and 'action="/apps/act/sync"' in page
    same_site = {"Origin": ctl.url, "Sec-Fetch-Site": "same-origin"}

    refused = requests.post(url, data={"csrf": csrf[1], "token": ""}, headers=same_site,
                            timeout=10, allow_redirects=False)
    assert refused.status_code == 401
    forged = requests.post(url, data={"csrf": "1.00", "token": "x"}, headers=same_site,
                           timeout=10, allow_redirects=False)
    assert forged.status_code == 403
    cross = requests.post(url, data={"csrf": csrf[1], "token": "x"}, timeout=10,
                          headers={"Sec-Fetch-Site": "cross-site"}, allow_redirects=False)
    assert cross.status_code == 403
    garbage = requests.post(url, headers={"Authorization": "Bearer not-a-token"}, timeout=10)
    assert garbage.status_code == 401

    viewer = service_account_token(kube, namespace, "viewer", ["refresh"], "act")
    denied = requests.post(url, headers={"Authorization": f"Bearer {viewer}"}, timeout=10)
    assert denied.status_code == 403 and "may not sync" in denied.text
    assert viewer not in denied.text
    assert requests.post(f"{ctl.url}/apps/act/refresh", timeout=10,
                         headers={"Authorization": f"Bearer {viewer}"}).status_code == 202

    operator = service_account_token(kube, namespace, "operator", ["sync", "refresh"], "act")
    done = requests.post(url, data={"csrf": csrf[1], "token": operator}, headers=same_site,
                         timeout=10, allow_redirects=False)
    assert done.status_code == 303 and done.headers["Location"] == "/apps/act?done=sync"
    user = f"system:serviceaccount:{namespace}:operator"
    synced = eventually(lambda: ctl.status("act").get("operation"), message="the sync")
    assert synced["phase"] == "Succeeded" and synced["initiatedBy"] == user
    assert operator not in str(ctl.status("act"))
    assert requests.get(f"{ctl.url}/apps/act", timeout=10).text.count(user) >= 1


def test_actions_take_only_tokens_bound_to_the_page_and_failures_are_limited(
        actions_app: Controller, kube: Kube, namespace: str,
        control_plane: LocalControlPlane) -> None:
    """Issue 36, item 10: a TokenReview for the audience ``gitops-ray``, on the real API
    server (its service-account issuer signs the TokenRequest's audience into the token)."""
    url = f"{actions_app.url}/apps/act/refresh"

    def post(token: str) -> requests.Response:
        return requests.post(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    api_token = service_account_token(kube, namespace, "op", ["refresh"], "act", audience=None)
    other = service_account_token(kube, namespace, "op", audience="another-service")
    for token in (api_token, other, control_plane.token):  # full-power or someone else's
        refused = post(token)
        assert refused.status_code == 401, refused.text
        assert "audience 'gitops-ray'" in html.unescape(refused.text)
        assert token not in refused.text
    bound = service_account_token(kube, namespace, "op")
    assert post(bound).status_code == 202

    failures = [post("guess-" + str(i)).status_code for i in range(FAILURES_ALLOWED - 3)]
    assert failures == [401] * (FAILURES_ALLOWED - 3)  # 3 refused above, 10 in all
    limited = post(bound)  # even a good token: this address used up its failures
    assert limited.status_code == 429 and "retry in" in limited.text


def test_actions_are_off_by_default(start_controller: Callable[..., Controller],
                                    git_repo: GitRepo, namespace: str) -> None:
    git_repo.commit({"apps/off.yaml": manual_app("off", git_repo.url, namespace),
                     "manifests/rc.yaml": raycluster("off")})
    ctl = start_controller({"appSources": [{"repo": git_repo.url, "path": "apps"}]})
    eventually(lambda: ctl.status("off").get("sync"), message="compared")
    assert 'name="csrf"' not in requests.get(f"{ctl.url}/apps/off", timeout=10).text
    assert requests.post(f"{ctl.url}/apps/off/sync", headers={"Authorization": "Bearer x"},
                         timeout=10).status_code in (404, 405)
