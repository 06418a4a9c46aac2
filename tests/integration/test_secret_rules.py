"""An ignore rule cannot unmask a live Secret; Secrets still sync (real git, API server).

The attack, as a committer of the app's repository writes it: git has the app's Secret
(a placeholder token) and an ``ignoreDifferences`` jq rule that closes Argo CD's
``del(`` and copies the live Secret's token into an annotation; the live Secret holds
the real token (another writer's: an operator, a person). Neither ``gitops-ray diff``,
its ``-o json``, ``sync``'s output, the record ``get`` reads, nor an Event shows the
token or its base64 form. And the sync still works: git's values land, and a key the
app ignores keeps live's real value (not a mask).
"""

from __future__ import annotations

import base64
import json

from gitops_ray.kube import Kube
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo

TOKEN = "live-only-t0ken-9f3a"
LIVE_B64 = base64.b64encode(TOKEN.encode()).decode()
KEPT = base64.b64encode(b"rotated-by-operator").decode()
LEAK = ".x) | .metadata.annotations.leak = (.data.token | @base64d) | (."


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(namespace: str, **data: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": namespace}, "data": data}


def test_a_rule_cannot_show_a_live_secret_and_secrets_still_sync(
        cli: Cli, git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    kube.create(secret(namespace, token=LIVE_B64, session=KEPT), field_manager="operator")
    rules = [{"kind": "Secret", "jqPathExpressions": [LEAK]},
             {"kind": "Secret", "name": "creds", "jsonPointers": ["/data/session"]}]
    git_repo.commit({
        "apps/a.yaml": app_yaml(git_repo, "a", namespace, "a", ignoreDifferences=rules),
        "a/secret.yaml": secret(namespace, token=b64("from-git"), session=b64("git-session"))})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    shown = []
    diff = cli("diff", *args)
    assert diff.exit_code == 1, diff.output  # the token differs, and the diff says so
    assert "token: ++++" in diff.stdout
    shown.append(diff.output)
    as_json = cli("diff", *args, "-o", "json")
    shown.append(as_json.output)
    assert json.loads(as_json.stdout)[0]["status"] == "OutOfSync"
    synced = cli("sync", *args)
    assert synced.exit_code == 0, synced.output
    shown += [synced.output, cli("get", "a", "-o", "json").output, cli("get", "a").output,
              json.dumps(kube.list("v1", "Event", namespace)[0]),
              json.dumps(kube.list("v1", "ConfigMap", namespace)[0])]
    for text in shown:
        assert TOKEN not in text and LIVE_B64 not in text
    live = kube.get("v1", "Secret", name="creds", namespace=namespace)
    assert live is not None
    assert live["data"] == {"token": b64("from-git"), "session": KEPT}  # real values
    assert "leak" not in (live["metadata"].get("annotations") or {})
    after = cli("diff", *args)
    assert after.exit_code == 0, after.output
