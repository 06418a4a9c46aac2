"""The web page in a real browser: Debian's headless Chromium, driven from pytest by Selenium.

A realistic app on the real Ray stack (the KubeRay operator makes the Pods and Services,
kwok runs them): a RayCluster with three worker groups, one of which the Ray autoscaler's
own KubeRay provider scales up (so its live ``replicas`` are written by
``python-requests``, not by git). The browser opens the list, follows the app's link,
reads the worker-group table, and submits the Sync form without a token, which must be
refused. The browser runs with no JavaScript at all, which the page must not need.

``GITOPS_RAY_SCREENSHOT=docs/app-page.png`` also saves the app page as docs/operations.md's
screenshot. Chromium and chromedriver are installed by ``make tools`` (``make chromium``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from gitops_ray.kube import Kube
from localcluster import LocalControlPlane
from localcluster.autoscaler import Autoscaler
from tests.e2e.raycluster import operator_ready, pods
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.runtime import Controller, application
from tests.samples import raycluster, worker_group

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
APP, CLUSTER = "analytics", "analytics"
TIMEOUT = 120.0
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,2000")


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile and JavaScript off (the page needs none)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()


def cells(driver: WebDriver, group: str) -> dict[str, str]:
    row = driver.find_element(By.CSS_SELECTOR, f'table.worker-groups tr[data-group="{group}"]')
    return {name: row.find_element(By.CSS_SELECTOR, f"td.{name}").text
            for name in ("git", "live", "manager")}


def workers(kube: Kube, namespace: str, group: str) -> int:
    return sum(1 for p in pods(kube, namespace, CLUSTER)
               if p["metadata"]["labels"].get("ray.io/group") == group
               and p.get("status", {}).get("phase") == "Running")


def test_the_app_page_in_chromium(start_controller: Callable[..., Controller],
                                  git_repo: GitRepo, kube: Kube, namespace: str,
                                  control_plane: LocalControlPlane, tmp_path: Path,
                                  browser: WebDriver) -> None:
    rc = raycluster(CLUSTER, groups=[worker_group("cpu", replicas=1, max_replicas=5),
                                     worker_group("gpu", replicas=0, max_replicas=2),
                                     worker_group("highmem", replicas=1, max_replicas=3)])
    git_repo.commit({"manifests/rc.yaml": rc}, "analytics: three worker groups")
    ctl = start_controller({"applications": [application(APP, git_repo.url, namespace)]},
                           **{"ui.actions": True})
    eventually(lambda: ctl.status(APP).get("health") == "Healthy", TIMEOUT, "Healthy")
    Autoscaler(control_plane, kube, namespace, CLUSTER, tmp_path).run("scale", "cpu", "3")
    eventually(lambda: workers(kube, namespace, "cpu") == 3
               and operator_ready(kube, namespace, CLUSTER), TIMEOUT, "3 cpu workers running")

    browser.get(f"{ctl.url}/")
    browser.find_element(By.LINK_TEXT, APP).click()
    assert browser.title.startswith(APP)

    def shown() -> bool:  # the page reads the watch cache: reload until it caught up
        browser.refresh()
        row = cells(browser, "cpu")
        ready = browser.find_element(By.CSS_SELECTOR, 'tr[data-group="cpu"] td:nth-child(7)')
        return row["live"] == "3" and ready.text == "3 / 3"

    eventually(shown, TIMEOUT, "the autoscaler's replicas and ready Pods on the page")
    assert cells(browser, "cpu") == {"git": "1", "live": "3",
                                     "manager": "python-requests (autoscaler)"}
    assert cells(browser, "highmem")["git"] == cells(browser, "highmem")["live"] == "1"
    tree = browser.find_element(By.ID, "tree").text
    assert "Pod" in tree and "Service" in tree and "RayCluster" in tree
    if target := os.environ.get("GITOPS_RAY_SCREENSHOT"):
        browser.save_screenshot(target)

    browser.find_element(By.ID, "action-sync").click()  # no token in the form
    WebDriverWait(browser, 30).until(lambda d: "401" in d.title)
    assert "a bearer token is required" in browser.find_element(By.TAG_NAME, "main").text
    assert not (ctl.status(APP).get("operation") or {}).get("initiatedBy")
