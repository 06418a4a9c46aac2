"""Two apps, one object: SharedResourceWarning, FailOnSharedResource, and prune stays out.

Real git (two Applications in one app-of-apps directory), real API server, the CLI a
user runs. App ``a`` owns ConfigMap ``shared``; a committer of app ``b``'s path puts an
object of the same name there. With ``FailOnSharedResource=true`` b's sync is refused
(Argo CD's message, reason ``SharedResource``) and nothing of b's is written; ``diff``
warns and the recorded conditions say ``SharedResourceWarning``. Without the option b
takes the object, as Argo CD does, and says so; then ``a``, which still lists it in its
inventory, drops it from git and prunes: the object, now b's by its tracking id, stays.
And when another app takes an object between prune's read and its delete, the delete's
``resourceVersion`` precondition refuses it, prune reads again, and leaves it.
"""

from __future__ import annotations

import json
from typing import Any

from gitops_ray.kube import Kube
from gitops_ray.sync.engine import Syncer
from gitops_ray.sync.request import SyncRequest
from gitops_ray.sync.tracking import TRACKING_ANNOTATION, claimed_by, with_tracking
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env

A_SAYS = "ConfigMap/shared is part of applications a and b"
B_SAYS = "ConfigMap/shared is part of applications b and a"


def configmap(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"value": value}}


def apps(git_repo: GitRepo, namespace: str, *b_options: str) -> dict[str, object]:
    b_policy = {"syncPolicy": {"syncOptions": list(b_options)}} if b_options else {}
    return {"apps/a.yaml": app_yaml(git_repo, "a", namespace, "a"),
            "apps/b.yaml": app_yaml(git_repo, "b", namespace, "b", **b_policy)}


def live(kube: Kube, namespace: str, name: str = "shared") -> dict[str, Any]:
    obj = kube.get("v1", "ConfigMap", name=name, namespace=namespace)
    assert obj is not None
    return obj


def conditions(cli: Cli, app: str) -> list[dict[str, Any]]:
    doc = json.loads(cli("get", app, "-o", "json").stdout)
    found = doc.get("conditions") or doc.get("summary", {}).get("conditions") or []
    return list(found)


def test_shared_object_is_refused_or_taken_with_a_warning_and_never_pruned_by_the_other(
        cli: Cli, git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    git_repo.commit({**apps(git_repo, namespace, "FailOnSharedResource=true"),
                     "a/cm.yaml": configmap("shared", "a"), "a/own.yaml": configmap("own", "a"),
                     "b/cm.yaml": configmap("shared", "b"), "b/own.yaml": configmap("b-own", "b")})
    args = ["--repo", git_repo.url, "--apps", "apps"]
    assert cli("sync", *args, "--app", "a").exit_code == 0
    assert claimed_by(live(kube, namespace)) == "a"

    diff = cli("diff", *args, "--app", "b")
    assert f"warning: app b: {B_SAYS}" in diff.stderr, diff.output
    refused = cli("sync", *args, "--app", "b")
    assert refused.exit_code != 0, refused.output
    assert "Failed (SharedResource)" in refused.output
    assert f"Shared resource found: {B_SAYS}" in refused.output
    assert live(kube, namespace)["data"] == {"value": "a"}  # nothing of b's written
    assert kube.get("v1", "ConfigMap", name="b-own", namespace=namespace) is None
    assert {"type": "SharedResourceWarning", "message": B_SAYS} in [
        {k: c.get(k) for k in ("type", "message")} for c in conditions(cli, "b")]

    git_repo.commit(apps(git_repo, namespace))  # b without the option: Argo CD's default
    took = cli("sync", *args, "--app", "b")
    assert took.exit_code == 0, took.output
    assert f"SharedResourceWarning: {B_SAYS}" in took.output
    assert claimed_by(live(kube, namespace)) == "b"
    assert live(kube, namespace)["data"] == {"value": "b"}
    seen_by_a = cli("diff", *args, "--app", "a")
    assert f"warning: app a: {A_SAYS}" in seen_by_a.stderr, seen_by_a.output

    git_repo.commit({"a/cm.yaml": None})  # a lets go of it, and prunes
    pruned = cli("sync", *args, "--app", "a", "--prune")
    assert pruned.exit_code == 0, pruned.output
    assert "not pruned: its tracking id does not name this app" in pruned.output
    kept = live(kube, namespace)
    assert kept["metadata"]["annotations"][TRACKING_ANNOTATION].startswith("b:")
    assert live(kube, namespace, "own")["data"] == {"value": "a"}


class TakenBeforeDelete:
    """The real client, but another app applies the object right before our first DELETE
    (the moment between prune's read and its delete)."""

    def __init__(self, kube: Kube, taken: dict[str, Any]) -> None:
        self._kube, self._taken, self.deletes = kube, taken, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def delete(self, *args: Any, **kwargs: Any) -> bool:
        self.deletes += 1
        if self.deletes == 1:
            self._kube.apply(self._taken, field_manager="app-b", force=True)
        result: bool = self._kube.delete(*args, **kwargs)
        return result


def test_prune_never_deletes_an_object_another_app_took_after_prune_read_it(
        env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/cm.yaml": [configmap("contested", "a")]})
    app = env.app(git_repo, name="a")
    assert env.reconciler.sync(app).result.ok
    git_repo.commit({"manifests/cm.yaml": [configmap("other", "a")]}, "a lets go")
    before = env.pipeline.compare(app)
    taken = with_tracking("b", {**configmap("contested", "b"),
                                "metadata": {"name": "contested", "namespace": env.namespace}})
    racing = TakenBeforeDelete(env.kube, taken)
    syncer = Syncer(racing, env.store)  # type: ignore[arg-type]
    result = syncer.sync(SyncRequest(app, before.manifests(), before.revision, prune=True),
                         env.pipeline.rules(app))
    assert result.ok, result.message
    actions = {str(r.key): r.action for r in result.resources}
    assert actions[f"ConfigMap:{env.namespace}/contested"] == "not-ours"
    kept = env.live("contested", "ConfigMap", "v1")
    assert kept is not None and claimed_by(kept) == "b" and kept["data"] == {"value": "b"}
