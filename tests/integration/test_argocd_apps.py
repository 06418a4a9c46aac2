"""Argo CD Applications in the cluster, reconciled by gitops-ray: the source, status and controls.

The real API server with Argo CD's own Application CRD (v3.2.11, from its Go module), the
controller in-process (``argocd.enabled``, ``argocd.namespace`` = the test namespace), and
a real git repository. Argo CD itself is not needed for what is checked here: the
Application objects, their ``status`` as Argo CD's schema has it (validated by the API
server; ``tests/unit/test_argostatus.py`` checks it field by field), and the
``.operation`` / refresh annotation that Argo CD's server and CLI write. ``tests/argocd``
drives the same through the real argocd-server and CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.reconcile.argostatus import (
    MANAGED_ANNOTATION,
    REFRESH_ANNOTATION,
    SKIP_RECONCILE_ANNOTATION,
)
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller
from tests.integration.test_sync_waves import report
from tests.samples import raycluster

APP_API = "argoproj.io/v1alpha1"
RC_API = "ray.io/v1"
OURS = {MANAGED_ANNOTATION: "true", SKIP_RECONCILE_ANNOTATION: "true"}


def application(name: str, repo: GitRepo, namespace: str, *, annotations: dict[str, str],
                automated: bool = True, finalizer: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "project": "default",
        "source": {"repoURL": repo.url, "targetRevision": "HEAD", "path": "manifests"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": namespace}}
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": annotations}
    if finalizer:
        meta["finalizers"] = ["resources-finalizer.argocd.argoproj.io"]
    return {"apiVersion": APP_API, "kind": "Application", "metadata": meta, "spec": spec}


Start = Callable[..., Controller]


def start(start_controller: Start, kube: Kube, namespace: str, *,
          project: dict[str, Any] | None = None, **flags: Any) -> Controller:
    """The controller, with the test namespace as Argo CD's and its AppProject ``default``."""
    appproject(kube, namespace, "default", project or OPEN)
    return start_controller({}, **{"argocd.enabled": True, "argocd.namespace": namespace,
                                   **flags})


OPEN = {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
        "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}


def appproject(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": APP_API, "kind": "AppProject",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec},
               field_manager="tests", force=True)


def deploy(kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start,
           name: str, *, annotations: dict[str, str] = OURS,
           project: dict[str, Any] | None = None, flags: dict[str, Any] | None = None,
           **app: Any) -> tuple[str, Controller]:
    """Commit a RayCluster, create Application ``name`` for it, start the controller."""
    sha = git_repo.commit(rayclusters("2.9.0", namespace))
    kube.create(application(name, git_repo, namespace, annotations=annotations, **app),
                field_manager="tests")
    return sha, start(start_controller, kube, namespace, project=project, **(flags or {}))


def sync_is(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda o: (o.get("status") or {}).get("sync", {}).get("status") == status


def app_object(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.get(APP_API, "Application", name=name, namespace=namespace)
    assert obj is not None
    return obj


def status_when(kube: Kube, namespace: str, name: str,
                check: Callable[[dict[str, Any]], bool], message: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        obj = app_object(kube, namespace, name)
        return obj if check(obj) else None
    found: dict[str, Any] = eventually(ready, message=message)
    return found


def rayclusters(version: str, namespace: str) -> dict[str, object]:
    rc = raycluster("demo", namespace)
    rc["spec"]["rayVersion"] = version
    return {"manifests/rc.yaml": rc}


@pytest.mark.usefixtures("argocd_crds")
def test_annotated_application_is_synced_and_shows_argo_cd_status(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    sha, _ = deploy(kube, namespace, git_repo, start_controller, "ray")
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace),
               message="RayCluster applied")
    obj = status_when(kube, namespace, "ray",
                      lambda o: sync_is("Synced")(o) and bool(o["status"].get("history")),
                      "Synced status with history")
    status = obj["status"]
    assert status["sync"]["revision"] == sha
    assert status["sync"]["comparedTo"]["source"]["repoURL"] == git_repo.url
    assert status["sync"]["comparedTo"]["destination"]["namespace"] == namespace
    assert status["health"]["status"] in ("Progressing", "Healthy", "Missing")
    [row] = status["resources"]
    assert {k: row[k] for k in ("group", "version", "kind", "namespace", "name", "status")} == {
        "group": "ray.io", "version": "v1", "kind": "RayCluster", "namespace": namespace,
        "name": "demo", "status": "Synced"}
    state = status["operationState"]
    assert state["phase"] == "Succeeded" and state["finishedAt"] and state["startedAt"]
    assert state["operation"]["initiatedBy"] == {"automated": True}
    assert state["syncResult"]["revision"] == sha
    [result] = state["syncResult"]["resources"]
    assert (result["kind"], result["name"], result["status"]) == ("RayCluster", "demo", "Synced")
    [entry] = status["history"]
    assert (entry["id"], entry["revision"]) == (0, sha)
    assert status["sourceType"] == "Directory" and status["reconciledAt"]
    assert status["summary"]["images"]


@pytest.mark.usefixtures("argocd_crds")
def test_half_opt_in_is_left_alone_with_a_warning_event(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    deploy(kube, namespace, git_repo, start_controller, "half",
           annotations={MANAGED_ANNOTATION: "true"})

    def warned() -> bool:
        events, _ = kube.list("v1", "Event", namespace)
        return any(e.get("reason") == "GitOpsRayNotManaging"
                   and e["involvedObject"]["name"] == "half" for e in events)

    eventually(warned, message="a warning Event on the half-annotated Application")
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None
    assert "status" not in app_object(kube, namespace, "half")


@pytest.mark.usefixtures("argocd_crds")
def test_operation_sync_rollback_and_refresh(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    first, _ = deploy(kube, namespace, git_repo, start_controller, "manual", automated=False)
    status_when(kube, namespace, "manual", sync_is("OutOfSync"), "OutOfSync before any sync")
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None

    request(kube, namespace, "manual", {"sync": {"revision": "HEAD", "prune": True},
                                        "initiatedBy": {"username": "alice"}})
    obj = status_when(kube, namespace, "manual", _done(first), "the requested sync finished")
    assert obj["status"]["sync"]["status"] == "Synced"
    assert obj["status"]["history"][-1]["initiatedBy"] == {"username": "alice"}
    assert obj["status"]["operationState"]["operation"]["initiatedBy"] == {"username": "alice"}

    second = git_repo.commit(rayclusters("2.10.0", namespace))
    annotate(kube, namespace, "manual", {REFRESH_ANNOTATION: "hard"})
    obj = status_when(kube, namespace, "manual",
                      lambda o: REFRESH_ANNOTATION not in o["metadata"].get("annotations", {})
                      and o["status"]["sync"].get("revision") == second,
                      "refresh done and its annotation removed")
    assert obj["status"]["sync"]["status"] == "OutOfSync"

    request(kube, namespace, "manual", {"sync": {"revision": second},
                                        "initiatedBy": {"username": "bob"}})
    obj = status_when(kube, namespace, "manual", _done(second), "sync to the second commit")
    assert [e["id"] for e in obj["status"]["history"]] == [0, 1]
    assert live_version(kube, namespace) == "2.10.0"

    history = obj["status"]["history"][0]  # argocd app rollback manual 0
    request(kube, namespace, "manual", {"sync": {"revision": history["revision"],
                                                 "source": history["source"]},
                                        "initiatedBy": {"username": "carol"}})
    obj = status_when(kube, namespace, "manual", _done(first), "rolled back")
    assert live_version(kube, namespace) == "2.9.0"
    assert [e["revision"] for e in obj["status"]["history"]] == [first, second, first]


@pytest.mark.usefixtures("argocd_crds")
def test_dry_run_and_malformed_operations_change_nothing(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    sha, _ = deploy(kube, namespace, git_repo, start_controller, "dry", automated=False)
    request(kube, namespace, "dry", {"sync": {"dryRun": True}})
    obj = status_when(kube, namespace, "dry", _done(sha), "the dry run finished")
    assert obj["status"]["operationState"]["phase"] == "Succeeded"
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None
    assert not obj["status"].get("history")

    # The CRD's schema catches most mistakes; an empty selector passes it, not us.
    request(kube, namespace, "dry", {"sync": {"resources": [{"kind": "", "name": ""}]}})
    obj = status_when(kube, namespace, "dry",
                      lambda o: "operation" not in o
                      and o["status"]["operationState"]["phase"] == "Failed",
                      "the malformed operation refused")
    assert "operation.sync.resources[0]" in obj["status"]["operationState"]["message"]
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None


@pytest.mark.usefixtures("argocd_crds")
def test_a_failed_operation_is_retried_up_to_its_limit(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    """``retry.limit``: a failed attempt leaves the operation running (Argo CD's "Retrying
    attempt #n"); the next attempt resolves the revision again and succeeds."""
    broken = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "c", "namespace": f"{namespace}-missing"}}
    git_repo.commit({**rayclusters("2.9.0", namespace), "manifests/cm.yaml": broken})
    kube.create(application("retry", git_repo, namespace, annotations=OURS, automated=False),
                field_manager="tests")
    start(start_controller, kube, namespace, **{"retry.backoff.initial": "200ms",
                                                "retry.backoff.cap": "1s"})
    request(kube, namespace, "retry", {"sync": {}, "retry": {"limit": 100}})
    obj = status_when(kube, namespace, "retry",
                      lambda o: "Retrying attempt #" in ((o.get("status") or {}).get(
                          "operationState") or {}).get("message", ""), "a retry pending")
    assert obj.get("operation") and obj["status"]["operationState"]["phase"] == "Running"
    fixed = git_repo.commit({"manifests/cm.yaml": None})
    obj = status_when(kube, namespace, "retry", _done(fixed), "a later attempt succeeded")
    assert obj["status"]["operationState"]["phase"] == "Succeeded"
    assert obj["status"]["operationState"]["retryCount"] >= 1


@pytest.mark.usefixtures("argocd_crds")
def test_deleting_an_application_with_the_resources_finalizer_deletes_its_objects(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    deploy(kube, namespace, git_repo, start_controller, "doomed", finalizer=True)
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace),
               message="RayCluster applied")
    kube.delete(APP_API, "Application", name="doomed", namespace=namespace)
    eventually(lambda: kube.get(APP_API, "Application", name="doomed",
                                namespace=namespace) is None,
               message="the Application is gone (its finalizer removed)")
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None,
               message="its RayCluster deleted")


def _done(revision: str) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        state = (obj.get("status") or {}).get("operationState") or {}
        return ("operation" not in obj and state.get("phase") in ("Succeeded", "Failed")
                and state.get("syncResult", {}).get("revision") == revision)
    return check


def request(kube: Kube, namespace: str, name: str, operation: dict[str, Any]) -> None:
    """Set ``.operation`` as argocd-server does (a merge patch)."""
    kube.patch(APP_API, "Application", name=name, namespace=namespace,
               patch={"operation": operation}, content_type="application/merge-patch+json")


def annotate(kube: Kube, namespace: str, name: str, annotations: dict[str, str]) -> None:
    kube.patch(APP_API, "Application", name=name, namespace=namespace,
               patch={"metadata": {"annotations": annotations}},
               content_type="application/merge-patch+json")


def live_version(kube: Kube, namespace: str) -> str:
    live = kube.get(RC_API, "RayCluster", name="demo", namespace=namespace)
    assert live is not None
    return str(live["spec"]["rayVersion"])


@pytest.mark.usefixtures("argocd_crds")
def test_a_project_that_forbids_the_destination_blocks_the_app_with_argo_cds_message(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    deploy(kube, namespace, git_repo, start_controller, "blocked", project={
        "sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "elsewhere"}]})
    obj = status_when(kube, namespace, "blocked",
                      lambda o: bool((o.get("status") or {}).get("conditions")),
                      "a condition on the blocked Application")
    [condition] = obj["status"]["conditions"]
    assert condition["type"] == "InvalidSpecError"
    assert condition["message"] == (
        f"application destination server 'https://kubernetes.default.svc' and namespace "
        f"'{namespace}' do not match any of the allowed destinations in project 'default'")
    assert obj["status"]["sync"]["status"] == "Unknown"
    assert kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None

    appproject(kube, namespace, "default", OPEN)  # the project allows it now: synced
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace),
               message="synced once the project allows it")
    status_when(kube, namespace, "blocked",
                lambda o: not o["status"].get("conditions")
                and o["status"]["sync"]["status"] == "Synced", "condition cleared")


@pytest.mark.usefixtures("argocd_crds")
def test_removing_the_annotations_hands_the_app_back_without_deleting_anything(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    """Even with the resources finalizer: handing back is not deleting."""
    _, ctl = deploy(kube, namespace, git_repo, start_controller, "back", finalizer=True)
    status_when(kube, namespace, "back", sync_is("Synced"), "synced by gitops-ray")
    kube.patch(APP_API, "Application", name="back", namespace=namespace,
               patch={"metadata": {"annotations": {MANAGED_ANNOTATION: None}}},
               content_type="application/merge-patch+json")
    eventually(lambda: not ctl.status("back"), message="gitops-ray's record dropped")
    live = kube.get(RC_API, "RayCluster", name="demo", namespace=namespace)
    assert live is not None and "deletionTimestamp" not in live["metadata"]
    obj = app_object(kube, namespace, "back")
    assert obj["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]


@pytest.mark.usefixtures("argocd_crds")
def test_applications_in_any_namespace_need_the_projects_source_namespaces(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start,
        extra_namespace: Callable[[str], str]) -> None:
    """``argocd.applicationNamespaces``: Argo CD's "applications in any namespace"; the app
    is named ``<namespace>_<name>`` (Argo CD's instance name) and its project must list the
    namespace in ``sourceNamespaces``."""
    team = extra_namespace("apps")
    git_repo.commit(rayclusters("2.9.0", namespace))
    app = application("ray", git_repo, namespace, annotations=OURS)
    app["metadata"]["namespace"] = team
    kube.create(app, field_manager="tests")
    ctl = start(start_controller, kube, namespace, project={**OPEN, "sourceNamespaces": [team]},
                **{"argocd.applicationNamespaces": team})
    obj = status_when(kube, team, "ray", sync_is("Synced"), "synced from the other namespace")
    assert obj["status"]["resources"][0]["name"] == "demo"
    assert ctl.status(f"{team}_ray")["sync"] == "Synced"

    appproject(kube, namespace, "default", OPEN)  # the namespace is no longer allowed
    obj = status_when(kube, team, "ray", lambda o: bool(o["status"].get("conditions")),
                      "the project's condition")
    assert obj["status"]["conditions"][0]["type"] == "UnknownError"
    assert "is not permitted to use project 'default'" in \
        obj["status"]["conditions"][0]["message"]


def waiting_for_wave_0(kube: Kube, namespace: str, git_repo: GitRepo,
                       start_controller: Start, name: str,
                       operation: dict[str, Any]) -> str:
    """App ``name``: a RayCluster in wave 0 (no operator makes it ready) and a ConfigMap in
    wave 1; ``operation`` requested and waiting for wave 0. The commit's SHA."""
    rc = raycluster("demo", namespace)
    rc["metadata"]["annotations"] = {"argocd.argoproj.io/sync-wave": "0"}
    later = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "later", "namespace": namespace,
                          "annotations": {"argocd.argoproj.io/sync-wave": "1"}}}
    sha = git_repo.commit({"manifests/rc.yaml": rc, "manifests/cm.yaml": later})
    kube.create(application(name, git_repo, namespace, annotations=OURS, automated=False),
                field_manager="tests")
    start(start_controller, kube, namespace)
    request(kube, namespace, name, operation)
    status_when(kube, namespace, name,
                lambda o: ((o.get("status") or {}).get("operationState") or {}).get("phase")
                == "Running", "the sync waiting for wave 0")
    return sha


@pytest.mark.usefixtures("argocd_crds")
def test_terminate_op_ends_a_sync_waiting_for_a_wave(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    """``argocd app terminate-op`` sets ``operationState.phase: Terminating``: the sync that
    waits for wave 0 (a RayCluster no operator makes ready) ends, wave 1 is never applied."""
    sha = waiting_for_wave_0(kube, namespace, git_repo, start_controller, "waves",
                             {"sync": {}, "initiatedBy": {"username": "amy"}})
    kube.patch(APP_API, "Application", name="waves", namespace=namespace,
               patch={"status": {"operationState": {"phase": "Terminating"}}},
               content_type="application/merge-patch+json")
    obj = status_when(kube, namespace, "waves", _done(sha), "the operation ended")
    state = obj["status"]["operationState"]
    assert (state["phase"], state["message"]) == ("Failed", "Operation terminated")
    assert kube.get("v1", "ConfigMap", name="later", namespace=namespace) is None


@pytest.mark.usefixtures("argocd_crds")
def test_a_requested_operations_sync_options_hold_for_every_wave(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    """``argocd app sync --sync-option Replace=true``: wave 1, applied by the step after the
    wait for wave 0, is written with Replace too (a PUT/POST, not a server-side apply)."""
    sha = waiting_for_wave_0(kube, namespace, git_repo, start_controller, "opts",
                             {"sync": {"syncOptions": ["Replace=true"]}})
    report(kube, namespace, "demo", "ready")
    status_when(kube, namespace, "opts", _done(sha), "the operation finished")
    cm = kube.get("v1", "ConfigMap", name="later", namespace=namespace)
    assert cm is not None
    assert [(m["manager"], m["operation"]) for m in cm["metadata"]["managedFields"]] == [
        ("gitops-ray", "Update")]


@pytest.mark.usefixtures("argocd_crds")
def test_deleting_an_application_leaves_what_its_project_forbids(
        kube: Kube, namespace: str, git_repo: GitRepo, start_controller: Start) -> None:
    """As Argo CD's resources finalizer: only objects the AppProject permits are deleted."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "settings", "namespace": namespace}}
    git_repo.commit({**rayclusters("2.9.0", namespace), "manifests/cm.yaml": cm})
    kube.create(application("mixed", git_repo, namespace, annotations=OURS, finalizer=True),
                field_manager="tests")
    start(start_controller, kube, namespace)
    eventually(lambda: kube.get("v1", "ConfigMap", name="settings", namespace=namespace),
               message="ConfigMap applied")
    appproject(kube, namespace, "default", {
        **OPEN, "namespaceResourceBlacklist": [{"group": "", "kind": "ConfigMap"}]})
    kube.delete(APP_API, "Application", name="mixed", namespace=namespace)
    eventually(lambda: kube.get(APP_API, "Application", name="mixed",
                                namespace=namespace) is None, message="the Application gone")
    eventually(lambda: kube.get(RC_API, "RayCluster", name="demo", namespace=namespace) is None,
               message="its RayCluster deleted")
    kept = kube.get("v1", "ConfigMap", name="settings", namespace=namespace)
    assert kept is not None and "deletionTimestamp" not in kept["metadata"]
