"""The source stage against real chart servers: what is fetched, how often, and refused.

No API server here: a :class:`GitSource` (with its :class:`ChartSource`) reads a Helm
repository made by ``helm package`` + ``helm repo index`` and a real docker-registry into
which ``helm push`` pushed the chart, and the render stage renders what it unpacked with
the real helm. The controller's view of the same is in ``test_chart_sources.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gitops_ray.render import render_app
from gitops_ray.render.applications import parse_application
from gitops_ray.render.tools import RenderTools
from gitops_ray.source import Credentials, GitSource
from gitops_ray.source.charts import ChartSource
from gitops_ray.source.chartstore import ChartLimits
from gitops_ray.source.http import Http, ReasonedSourceError
from gitops_ray.types import SourceReason
from tests.chartservers import (
    helm_repository,
    package_chart,
    push_chart,
    serve_directory,
    serve_registry,
)

CHART = Path(__file__).resolve().parents[1] / "testdata" / "charts" / "ray-cluster"


def source(cache: Path, credentials: Credentials | None = None, **budget: int) -> GitSource:
    def lookup(_url: str) -> Credentials | None:
        return credentials

    charts = ChartSource(cache, credentials=lookup, http=Http(timeout=10),
                         budget=ChartLimits(**budget))
    return GitSource(cache, credentials=lookup, charts=charts)


def reason(error: pytest.ExceptionInfo[ReasonedSourceError]) -> SourceReason:
    return error.value.reason


def test_a_chart_from_a_helm_repository_renders_like_one_from_git(
        helm_bin: Path, tmp_path: Path) -> None:
    repo = helm_repository(helm_bin, tmp_path / "repo", CHART, versions=("1.5.0", "1.5.1"))
    with serve_directory(repo.parent) as served:
        git = source(tmp_path / "cache")
        assert git.resolve(served.url, "1.5.*", chart="ray-cluster") == "1.5.1"
        checkout = git.checkout(served.url, "1.5.*", chart="ray-cluster")
        assert checkout.sha == "1.5.1" and (checkout.root / "Chart.yaml").is_file()
        again = git.checkout(served.url, "1.5.1", chart="ray-cluster")
        assert again.root == checkout.root
        assert served.count("ray-cluster-1.5.1.tgz") == 1  # never fetched twice
        assert served.count("index.yaml") == 2  # the checkout of a known version read none
        app = parse_application({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "rc"},
            "spec": {"destination": {"namespace": "ray"},
                     "source": {"repoURL": served.url, "chart": "ray-cluster",
                                "targetRevision": "1.5.1",
                                "helm": {"releaseName": "raycluster",
                                         "valueFiles": ["values.yaml"],
                                         "parameters": [{"name": "worker.replicas",
                                                         "value": "2"}],
                                         "valuesObject": {"image": {"tag": "2.53.0"}}}}}})
        objects = render_app(app, checkout.root, tools=RenderTools(helm_bin=helm_bin))
    [rc] = objects
    assert rc["metadata"]["name"] == "raycluster-ray-cluster"
    assert rc["metadata"]["namespace"] == "ray"
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] \
        == "rayproject/ray:2.53.0"


def test_bad_repositories_are_refused_with_a_reason(helm_bin: Path, tmp_path: Path) -> None:
    repo = helm_repository(helm_bin, tmp_path / "repo", CHART)
    with serve_directory(repo.parent) as served, \
            serve_directory(repo.parent, username="u", password="s3cret-pw") as locked:
        git = source(tmp_path / "cache", index_bytes=100_000, chart_bytes=100_000)
        cases = {
            SourceReason.REVISION_NOT_FOUND: (served.url, "ray-cluster", "2.x"),
            SourceReason.CHART_NOT_FOUND: (served.url, "nope", "1.5.1"),
            SourceReason.AUTH_FAILED: (locked.url, "ray-cluster", "1.5.1"),
            SourceReason.UNREACHABLE: ("http://127.0.0.1:9/charts", "ray-cluster", "1.5.1"),
        }
        for expected, (url, chart, revision) in cases.items():
            with pytest.raises(ReasonedSourceError) as caught:
                git.checkout(url, revision, chart=chart)
            assert reason(caught) == expected, caught.value
        served.rewrite["ray-cluster-1.5.1.tgz"] = lambda body: body + b"\0"
        with pytest.raises(ReasonedSourceError) as caught:
            git.checkout(served.url, "1.5.1", chart="ray-cluster")
        assert reason(caught) == SourceReason.DIGEST_MISMATCH
        served.rewrite["index.yaml"] = lambda body: body + b"#" * 200_000
        with pytest.raises(ReasonedSourceError) as caught:
            git.resolve(served.url, "1.5.1", chart="ray-cluster")
        assert reason(caught) == SourceReason.TOO_LARGE
        good = source(tmp_path / "cache2", Credentials(username="u", token="s3cret-pw"))
        assert good.checkout(locked.url, "1.5.1", chart="ray-cluster").sha == "1.5.1"
        assert all(auth for _, auth in locked.requests[-2:])


def test_a_chart_from_a_real_oci_registry_by_tag_range_and_digest(
        helm_bin: Path, tmp_path: Path) -> None:
    archives = tmp_path / "archives"
    old = package_chart(helm_bin, CHART, archives, version="1.5.0")
    new = package_chart(helm_bin, CHART, archives, version="1.5.1")
    with serve_registry(tmp_path / "registry", username="puller",
                        password="reg-pa55") as registry:
        push_chart(helm_bin, old, registry)
        digest = push_chart(helm_bin, new, registry)
        creds = Credentials(username="puller", token="reg-pa55", ca_file=registry.ca_file)
        git = source(tmp_path / "cache", creds)
        assert git.resolve(registry.oci(), ">=1.5.0 <2", chart="ray-cluster") == "1.5.1"
        tagged = git.checkout(f"{registry.host}/charts", "1.5.0", chart="ray-cluster")
        assert tagged.sha == "1.5.0" and "version: 1.5.0" in (tagged.root / "Chart.yaml"
                                                             ).read_text()
        pinned = git.checkout(registry.oci(), digest, chart="ray-cluster")
        assert pinned.sha == digest
        assert "version: 1.5.1" in (pinned.root / "Chart.yaml").read_text()
        blobs = sum(n for url, n in git.charts.fetches.items() if "/blobs/" in url)
        git.checkout(registry.oci(), "1.5.0", chart="ray-cluster")
        assert sum(n for url, n in git.charts.fetches.items() if "/blobs/" in url) == blobs
        anonymous = source(tmp_path / "cache2", Credentials(ca_file=registry.ca_file))
        with pytest.raises(ReasonedSourceError) as caught:
            anonymous.checkout(registry.oci(), "1.5.1", chart="ray-cluster")
        assert reason(caught) == SourceReason.AUTH_FAILED
        assert "reg-pa55" not in str(caught.value)


@contextmanager
def redirector(target: str) -> Iterator[tuple[str, list[str | None]]]:
    """A server on 127.0.0.1 that redirects every GET to ``target`` + path."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_credentials_stay_on_their_host_and_redirects_obey_the_allowed_hosts(
        tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "data").write_bytes(b"x" * 5000)
    creds = Credentials(username="u", token="s3cret")
    with serve_directory(tmp_path) as target, \
            redirector(target.url.replace("/charts", "")) as (local, seen):
        # localhost and 127.0.0.1 are two hosts: the redirect crosses from one to the other
        hop = local.replace("127.0.0.1", "localhost")
        body = Http().get(f"{hop}/files/data", limit=10_000, credentials=creds).body
        assert body == b"x" * 5000
        assert seen[-1] is not None  # sent to the host asked ...
        assert target.requests[-1] == ("/files/data", False)  # ... not to the redirect's
        with pytest.raises(ReasonedSourceError) as caught:
            Http(allowed_hosts=("localhost",)).get(f"{hop}/files/data", limit=10_000)
        assert reason(caught) == SourceReason.HOST_NOT_ALLOWED
        assert target.count("/files/data") == 1  # the disallowed host was not contacted
        with pytest.raises(ReasonedSourceError) as caught:
            Http().get(f"{hop}/files/data", limit=1000)
        assert reason(caught) == SourceReason.TOO_LARGE
