"""Real Argo CD (v3.6.1) next to the real control plane: the ``argocd`` fixtures.

What a test (an e2e test of the product included) gets:

* ``argocd`` (package-scoped: stopped when a worker moves on to other tiers): a
  :class:`localcluster.argocd.ArgoCD` running argocd-server and Redis on the session's
  ``control_plane``, with Argo CD's CRDs, namespace ``argocd``
  (``argocd.namespace``), its settings ConfigMaps/Secret and the AppProject ``default``.
  No repo-server and no application controller run unless a test asks for them (below):
  Applications there are only read and written by the test, the product, argocd-server
  and its CLI.

  - server address: ``argocd.server`` (``127.0.0.1:PORT``; plaintext gRPC/HTTP, auth off);
  - CLI: ``argocd.cli("app", "get", NAME, "-o", "json")`` returns a
    ``CompletedProcess[str]`` (``check=False`` to look at a failure's ``stderr``);
    ``argocd.cli_process(...)`` starts one that blocks (``argocd app sync NAME``) and
    ``argocd.cli_argv(...)`` / ``argocd.cli_env()`` build the command line yourself;
  - logs: one file per component in ``argocd.workdir`` (``argocd-server.log``,
    ``redis.log``, ``argocd-application-controller.log``) under pytest's basetemp
    (``argocd0/``); ``argocd.log(name)`` is a log's tail. A failing test here shows the
    tails of all of them.

* ``argocd_controller`` (per test): Argo CD's own application controller, out of cluster
  (``ARGOCD_FAKE_IN_CLUSTER``), debug logging, stopped after the test. Only for tests
  about what Argo CD itself does; it reconciles every Application without the
  skip-reconcile annotation in ``argocd``.
* ``argocd_repo_server`` (per test): ``argocd-repo-server`` on the address argocd-server
  already dials, stopped after the test: argocd-server then resolves ``targetRevision``
  (``HEAD``, a branch) to a commit, as ``argocd app sync NAME`` needs.
* ``argocd_applicationset_controller`` (per test): ``argocd-applicationset-controller``
  out of cluster, stopped after the test; ``list`` generators need no repo-server.
* ``make_app`` (per test): ``make_app(manifest)`` creates an Application (see
  ``tests/argocd/applications.py``) and deletes it after the test.
* ``gitops_ray`` (per test): the product, an in-process controller (the ``Runtime`` of
  ``tests/integration/test_controller.py``'s ``start_controller``) with ``argocd.enabled``,
  ``argocd.namespace`` = Argo CD's, leader election off, and the test namespace as its
  control namespace; started when the fixture is requested, shut down after the test.

The Argo CD binary is built once from the Go module proxy into ``~/.cache/gitops-ray``
(``make tools``); a build failure fails these tests with Go's output, it never skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

import pytest

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster import LocalControlPlane
from localcluster.argocd import ArgoCD
from tests.argocd.applications import APPLICATION
from tests.harness.runtime import Controller


@pytest.fixture(scope="package")
def argocd(control_plane: LocalControlPlane,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoCD]:
    with ArgoCD(control_plane, workdir=tmp_path_factory.mktemp("argocd")) as server:
        yield server


@pytest.fixture
def argocd_controller(argocd: ArgoCD) -> Iterator[ArgoCD]:
    argocd.application_controller(log_level="debug")
    yield argocd
    argocd.stop_component("argocd-application-controller")


@pytest.fixture
def argocd_repo_server(argocd: ArgoCD) -> Iterator[ArgoCD]:
    argocd.start_repo_server()
    yield argocd
    argocd.stop_component("argocd-repo-server")


@pytest.fixture
def argocd_applicationset_controller(argocd: ArgoCD) -> Iterator[ArgoCD]:
    argocd.start_applicationset_controller()
    yield argocd
    argocd.stop_component("argocd-applicationset-controller")


@pytest.fixture
def gitops_ray(argocd: ArgoCD, start_controller: Callable[..., Controller]
               ) -> Controller:
    return start_controller({}, **{"argocd.enabled": True, "argocd.namespace": argocd.namespace,
                                   "argocd.redis": argocd.redis,
                                   "argocd.server": f"http://{argocd.server}"})


@pytest.fixture
def make_app(kube: Kube, argocd: ArgoCD) -> Iterator[Callable[[Manifest], Manifest]]:
    made: list[str] = []

    def make(manifest: Manifest) -> Manifest:
        created = kube.create(manifest, field_manager="tests")
        made.append(str(created["metadata"]["name"]))
        return created

    yield make
    for name in made:
        kube.delete(*APPLICATION, name=name, namespace=argocd.namespace)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, None]:
    """On a failure, add the tail of every Argo CD component's log to the report."""
    outcome = yield
    report = outcome.get_result()
    server = getattr(item, "funcargs", {}).get("argocd")
    if report.failed and isinstance(server, ArgoCD):
        for path in server.log_paths():
            report.sections.append((f"Argo CD log {path}",
                                    server.log(path.stem, lines=60)))
