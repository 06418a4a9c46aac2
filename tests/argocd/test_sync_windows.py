"""Sync windows with the real Argo CD (v3.6.1): its own verdicts next to gitops-ray's.

* ``argocd proj windows list`` prints each window's state as Argo CD computes it
  (``SyncWindow.Active``); gitops-ray's :func:`~gitops_ray.reconcile.windows.is_active`
  must say the same for windows built around the current time (time zones, Sunday as
  day 0, either-day schedules), far enough from their edges that the minute the two
  look does not matter.
* During a deny window without ``manualSync`` argocd-server refuses ``argocd app sync``
  itself ("blocked by sync window", ``Server.Sync``), while gitops-ray holds the
  automated sync back with a ``SyncWindowClosed`` condition that ``argocd app get``
  shows; once ``argocd proj windows enable-manual-sync`` allows it, the sync the CLI asks
  for is run by gitops-ray.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gitops_ray.kube import Kube
from gitops_ray.reconcile.windows import SyncWindow, is_active
from gitops_ray.types import Manifest
from localcluster.argocd import ArgoCD
from tests.argocd.applications import app_name
from tests.argocd.test_gitops_ray_e2e import (
    application,
    cli_ok,
    manifests,
    ray_version,
    status_when,
)
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller

APP_API = "argoproj.io/v1alpha1"
ALWAYS = {"kind": "deny", "schedule": "* * * * *", "duration": "24h", "applications": ["*"]}


@pytest.fixture
def project(kube: Kube, argocd: ArgoCD) -> Iterator[Callable[[list[dict[str, Any]]], str]]:
    made: list[str] = []

    def make(windows: list[dict[str, Any]]) -> str:
        name = app_name("windows")
        kube.create({"apiVersion": APP_API, "kind": "AppProject",
                     "metadata": {"name": name, "namespace": argocd.namespace},
                     "spec": {"sourceRepos": ["*"],
                              "destinations": [{"server": "*", "namespace": "*"}],
                              "syncWindows": windows}}, field_manager="tests")
        made.append(name)
        return name

    yield make
    for name in made:
        kube.delete(APP_API, "AppProject", name=name, namespace=argocd.namespace)


def around_now() -> list[dict[str, Any]]:
    """Windows whose state is certain for the next ten minutes (see the module doc)."""
    now = datetime.now(UTC)
    berlin = now.astimezone(ZoneInfo("Europe/Berlin"))
    past, later = now - timedelta(minutes=30), now + timedelta(hours=3)
    dow = (now.isoweekday() % 7)  # robfig: Sunday is 0
    other_dom = 1 if now.day != 1 else 2

    def at(t: datetime, day: str = "*", weekday: str = "*") -> str:
        return f"{t.minute} {t.hour} {day} * {weekday}"
    bpast = berlin - timedelta(minutes=30)
    return [
        {"schedule": at(past), "duration": "1h"},  # active
        {"schedule": at(later), "duration": "1h"},  # inactive
        {"schedule": at(past, weekday=str(dow)), "duration": "1h"},  # today, Sunday = 0
        {"schedule": at(past, weekday=str((dow + 1) % 7)), "duration": "1h"},  # tomorrow
        {"schedule": at(past, day=str(other_dom), weekday=str(dow)), "duration": "1h"},
        {"schedule": f"{bpast.minute} {bpast.hour} * * *", "duration": "1h",
         "timeZone": "Europe/Berlin"},  # active in Berlin's wall clock
        {"schedule": at(past), "duration": "1h", "timeZone": "Europe/Berlin"},  # shifted
        {"schedule": "0 0 30 2 *", "duration": "1m"},  # never fires: Go's zero time
    ]


def test_argo_cd_and_gitops_ray_agree_on_which_windows_are_active(
        argocd: ArgoCD, project: Callable[[list[dict[str, Any]]], str]) -> None:
    windows = [{"kind": "allow", "applications": ["*"], **w} for w in around_now()]
    name = project(windows)
    listed = cli_ok(argocd, "proj", "windows", "list", name)
    # v3.2.11 prints 11 values under 10 headers: Go's "%!(EXTRA string=...)" starts the
    # next line, in front of the next window's ID
    argo = {int(i): state for i, state in re.findall(
        r"^(?:%!\(EXTRA [^)]*\))?(\d+)\s+(Active|Inactive)\s", listed, re.M)}
    now = time.time()
    ours = {i: "Active" if is_active(SyncWindow(i, "allow", w["schedule"], w["duration"],
                                                time_zone=w.get("timeZone", "")), now)
            else "Inactive" for i, w in enumerate(windows)}
    assert ours == argo
    assert list(argo.values()).count("Active") >= 3  # both states are exercised


def test_a_deny_window_refuses_argocd_app_sync_and_holds_gitops_ray_back(
        kube: Kube, argocd: ArgoCD, gitops_ray: Controller, argocd_repo_server: None,
        project: Callable[[list[dict[str, Any]]], str], make_app: Callable[[Manifest], Manifest],
        git_repo: GitRepo, namespace: str) -> None:
    git_repo.commit(manifests(namespace, demo="2.9.0"))
    proj = project([ALWAYS])
    name = app_name()
    make_app(application(name, git_repo, namespace, project=proj, automated=True))
    status = status_when(argocd, name, lambda s: any(
        c["type"] == "SyncWindowClosed" for c in s.get("conditions") or []),
        "argocd app get shows gitops-ray holding the auto-sync back")
    [condition] = [c for c in status["conditions"] if c["type"] == "SyncWindowClosed"]
    assert condition["message"].startswith(
        "sync blocked by active deny window 0 (schedule '* * * * *', duration 24h)")
    assert ray_version(kube, namespace) is None

    listed = cli_ok(argocd, "proj", "windows", "list", proj)
    assert "Active" in listed and "deny" in listed and "Disabled" in listed  # manual sync

    refused = argocd.cli("app", "sync", name, "--async", check=False)
    assert refused.returncode != 0
    assert "cannot sync: blocked by sync window" in refused.stderr
    assert "operation" not in (kube.get(APP_API, "Application", name=name,
                                        namespace=argocd.namespace) or {})

    cli_ok(argocd, "proj", "windows", "enable-manual-sync", proj, "0")
    cli_ok(argocd, "app", "sync", name, "--timeout", "150")
    assert ray_version(kube, namespace) == "2.9.0"
