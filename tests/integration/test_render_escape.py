"""A config repo reads only itself: attacks on helm and kustomize with the real binaries.

Each test is what an author with commit access to one repo would try to read the
controller's files (a service-account token, another repository's mirror) or reach the
network from the controller's pod. The render must fail naming what it refused, and the
secret must appear nowhere in what comes back. Kustomize refusals are checked with a
kubectl that does not exist: the refusal comes before kustomize runs.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gitops_ray.errors import RenderError
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.apps import HelmSource
from gitops_ray.render.kustomize import NO_NETWORK
from gitops_ray.render.tools import RenderTools, run_tool

SECRET = "TOP-SECRET-TOKEN-VALUE"
NO_KUBECTL = "/nonexistent/kubectl"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the repository, standing for the pod's token."""
    path = tmp_path / "outside" / "token"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def refused(app_path: str, root: Path, *needles: str, helm: HelmSource | None = None,
            helm_bin: Path | str = "helm") -> str:
    """The error of rendering ``app_path``; it names ``needles`` and not the secret."""
    app = application_from_flags(name="evil", repo_url="file:///repo", path=app_path,
                                 dest_namespace="team", helm=helm)
    with pytest.raises(RenderError) as caught:
        render_app(app, root, tools=RenderTools(kubectl_bin=NO_KUBECTL, helm_bin=helm_bin))
    message = str(caught.value)
    assert SECRET not in message
    for needle in needles:
        assert needle in message, message
    return message


CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"


# -- kustomize -----------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "needle"), [
    ("file:///var/cache/gitops-ray/repos/0123/trees/abc", "file:// URLs are not allowed"),
    ("https://example.com/base.yaml", "remote bases and resources are not fetched"),
    ("git@github.com:org/repo.git//base", "remote bases and resources are not fetched"),
    ("github.com/org/repo//base?ref=main", "does not exist in the repository"),
    ("../../outside", "resolves outside the repository"),
    ("/etc", "absolute paths are not allowed"),
])
def test_kustomize_resources_outside_the_checkout_are_refused_by_name(
        repo: Path, entry: str, needle: str) -> None:
    write(repo, {"app/kustomization.yaml": yaml.safe_dump({"resources": [entry]})})
    message = refused("app", repo, needle, "app/kustomization.yaml", "resources")
    assert "not found" not in message  # kustomize never ran


@pytest.mark.parametrize("field", ["bases", "components"])
def test_kustomize_bases_and_components_are_checked_as_resources(repo: Path,
                                                                 field: str) -> None:
    write(repo, {"app/kustomization.yaml": yaml.safe_dump({field: ["https://x.test/b"]})})
    refused("app", repo, f"{field} 'https://x.test/b'", "not fetched")


@pytest.mark.parametrize("body", [
    {"patches": [{"path": "https://169.254.169.254/latest/meta-data"}]},
    {"configMapGenerator": [{"name": "c", "files": ["key=https://internal.svc/x"]}]},
    {"openapi": {"path": "file:///etc/passwd"}},
    {"transformers": ["https://example.com/t.yaml"]},
])
def test_kustomize_file_fields_may_not_be_urls(repo: Path, body: dict[str, object]) -> None:
    write(repo, {"app/kustomization.yaml": yaml.safe_dump(body)})
    refused("app", repo, "app/kustomization.yaml")


def test_kustomize_refuses_a_remote_base_of_a_base(repo: Path) -> None:
    write(repo, {"app/kustomization.yaml": "resources: [../base]\n",
                 "base/kustomization.yaml": "resources: [https://example.com/x.yaml]\n"})
    refused("app", repo, "base/kustomization.yaml: resources 'https://example.com/x.yaml'")


def test_kustomize_refuses_a_link_out_inside_a_linked_base(repo: Path, outside: Path) -> None:
    """The base is reached through a link; a link in it leads to the token."""
    write(repo, {"app/kustomization.yaml": "resources: [base]\n",
                 "shared/kustomization.yaml":
                     "configMapGenerator: [{name: c, files: [token]}]\n"})
    (repo / "shared" / "token").symlink_to(outside)
    (repo / "app" / "base").symlink_to("../shared")
    refused("app", repo, "symlink 'shared/token'", "points outside the repository")


def test_kustomize_refuses_a_generator_file_linked_outside(repo: Path, outside: Path) -> None:
    write(repo, {"app/kustomization.yaml":
                     "configMapGenerator: [{name: c, files: [token]}]\n"})
    (repo / "app" / "token").symlink_to(outside)
    refused("app", repo, "symlink 'app/token' points outside the repository")


def test_kustomize_helm_charts_are_refused(repo: Path) -> None:
    write(repo, {"app/kustomization.yaml": yaml.safe_dump(
        {"helmCharts": [{"name": "x", "repo": "https://charts.example.com"}]})})
    refused("app", repo, "helmCharts is not supported")


def test_kustomize_inside_the_checkout_still_builds(repo: Path) -> None:
    write(repo, {"app/kustomization.yaml": "resources: [../base]\n",
                 "base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": CONFIGMAP,
                 "base/data/x.txt": "x"})
    (repo / "app" / "linked").symlink_to("../base/data")  # a link that stays inside
    app = application_from_flags(name="ok", repo_url="file:///repo", path="app",
                                 dest_namespace="team")
    assert [o["metadata"]["name"] for o in render_app(app, repo)] == ["c"]


def test_kustomize_runs_with_no_git_protocol(repo: Path, tmp_path: Path) -> None:
    """Were a remote base to get past the checks, git would refuse every protocol.

    The same ``file://`` base of another repository (a mirror of the controller's) is
    fetched by a kustomize run without :data:`NO_NETWORK`: that is the attack.
    """
    src = tmp_path / "src"
    write(src, {"base/kustomization.yaml": "resources: [cm.yaml]\n",
                "base/cm.yaml": CONFIGMAP.replace("name: c", f"name: {SECRET.lower()}")})
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    for args in (["init", "-q", "-b", "main", str(src)], ["-C", str(src), "add", "-A"],
                 ["-C", str(src), "commit", "-qm", "x"],
                 ["clone", "-q", "--bare", str(src), str(tmp_path / "other.git")]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    write(repo, {"app/kustomization.yaml": yaml.safe_dump(
        {"resources": [f"file://{tmp_path / 'other.git'}//base?ref=main"]})})
    argv = ["kubectl", "kustomize", str(repo / "app")]
    assert SECRET.lower() in run_tool(argv, what="kustomize").stdout  # unguarded: read
    guarded = run_tool(argv, what="kustomize", env=NO_NETWORK)
    assert guarded.returncode != 0 and SECRET.lower() not in guarded.stdout
    assert "transport 'file' not allowed" in guarded.stderr
    refused("app", repo, "file:// URLs are not allowed")  # and the render refuses it first


# -- helm ----------------------------------------------------------------------------

CHART = "apiVersion: v2\nname: evil\nversion: 0.1.0\n"


def test_files_get_through_a_link_in_a_linked_directory_is_refused(
        repo: Path, outside: Path, helm_bin: Path) -> None:
    """chart/shared -> ../shared, shared/token -> the token: helm would follow both."""
    write(repo, {"chart/Chart.yaml": CHART, "chart/templates/cm.yaml":
                 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n'
                 'data: {t: {{ .Files.Get "shared/token" | quote }}}\n'})
    (repo / "shared").mkdir()
    (repo / "shared" / "token").symlink_to(outside)
    (repo / "chart" / "shared").symlink_to("../shared")
    refused("chart", repo, "symlink 'shared/token' (reached through 'chart/shared')",
            "points outside the repository", helm_bin=helm_bin)


def test_fail_with_files_get_cannot_carry_a_file_from_outside(
        repo: Path, outside: Path, helm_bin: Path) -> None:
    write(repo, {"chart/Chart.yaml": CHART,
                 "chart/templates/x.yaml": '{{ fail (.Files.Get "deep/dir/token") }}\n'})
    (repo / "dir").mkdir()
    (repo / "dir" / "token").symlink_to(outside)
    (repo / "chart" / "deep").symlink_to("..")  # the whole repo, through a link
    refused("chart", repo, "symlink 'dir/token' (reached through 'chart/deep')",
            helm_bin=helm_bin)


@pytest.mark.parametrize(("repository", "needle"), [
    ("file://../../outside", "resolves outside the repository"),
    ("file:///var/cache/gitops-ray/repos/0123/trees/abc/chart", "must be a path relative"),
])
def test_file_dependencies_outside_the_repository_are_refused(
        repo: Path, helm_bin: Path, repository: str, needle: str) -> None:
    write(repo, {"chart/Chart.yaml": CHART + yaml.safe_dump({"dependencies": [
        {"name": "dep", "version": "0.1.0", "repository": repository}]}),
        "chart/templates/cm.yaml": CONFIGMAP})
    refused("chart", repo, "chart dependency 'dep'", needle, helm_bin=helm_bin)


def test_a_file_dependency_linking_outside_is_refused(
        repo: Path, outside: Path, helm_bin: Path) -> None:
    write(repo, {"chart/Chart.yaml": CHART + yaml.safe_dump({"dependencies": [
        {"name": "dep", "version": "0.1.0", "repository": "file://../dep"}]}),
        "chart/templates/cm.yaml": CONFIGMAP, "dep/Chart.yaml": CHART.replace("evil", "dep")})
    (repo / "dep" / "token").symlink_to(outside)
    refused("chart", repo, "symlink 'dep/token' points outside", helm_bin=helm_bin)


@pytest.fixture
def values_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering every GET with a values file."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"greeting: from-the-network\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/values.yaml"
    server.shutdown()


def values_chart(repo: Path) -> None:
    write(repo, {"chart/Chart.yaml": CHART, "chart/templates/cm.yaml":
                 CONFIGMAP + "data: {g: {{ .Values.greeting | default \"none\" | quote }}}\n"})


def test_value_file_urls_are_refused_without_an_allowed_host(
        repo: Path, helm_bin: Path, values_server: str) -> None:
    values_chart(repo)
    refused("chart", repo, "its host is not in the setting render.valueFileHosts",
            helm=HelmSource(value_files=(values_server,)), helm_bin=helm_bin)


def test_value_file_urls_of_an_allowed_host_are_fetched(
        repo: Path, helm_bin: Path, values_server: str) -> None:
    values_chart(repo)
    app = application_from_flags(name="ok", repo_url="file:///repo", path="chart",
                                 dest_namespace="team",
                                 helm=HelmSource(value_files=(values_server,)))
    objs = render_app(app, repo,
                      tools=RenderTools(helm_bin=helm_bin, value_file_hosts=("127.0.0.1",)))
    assert objs[0]["data"] == {"g": "from-the-network"}
    with pytest.raises(RenderError, match=r"render\.valueFileHosts"):  # another port only
        render_app(app, repo,
                   tools=RenderTools(helm_bin=helm_bin, value_file_hosts=("127.0.0.1:1",)))


# -- memory --------------------------------------------------------------------------

BALLOON = """{{- $s := "xxxxxxxxxxxxxxxx" }}{{- range until 28 }}{{- $s = print $s $s }}{{- end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: balloon}
data: {n: {{ len $s | quote }}}
"""
"""About 100 bytes of chart, 4 GiB of strings: helm peaked at 1.2 GB and more without a
limit (the issue's report)."""
MEASURE = """
import json, resource, sys
from pathlib import Path
from gitops_ray import childproc
from gitops_ray.errors import ChildMemoryExceeded
from gitops_ray.render import application_from_flags, render_app
from gitops_ray.render.tools import RenderTools
childproc.configure(int(sys.argv[3]))
app = application_from_flags(name="balloon", repo_url="file:///repo", path="chart")
try:
    render_app(app, Path(sys.argv[1]), tools=RenderTools(helm_bin=sys.argv[2]))
    error = ""
except ChildMemoryExceeded as e:
    error = str(e)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"error": error, "peak": peak}))
"""


def test_a_chart_that_balloons_helm_fails_under_the_limit(repo: Path, helm_bin: Path) -> None:
    """Measured in a fresh process, whose only child is that helm: its peak is its own."""
    write(repo, {"chart/Chart.yaml": CHART, "chart/templates/cm.yaml": BALLOON})
    limit = 256 * 1024 * 1024
    done = subprocess.run([sys.executable, "-c", MEASURE, str(repo), str(helm_bin),
                           str(limit)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]  # once seen failing under 5 workers
    result = json.loads(done.stdout)
    print(f"\nhelm's peak RSS under a {limit >> 20} MiB limit: {result['peak'] >> 20} MiB; "
          f"{result['error']}")
    assert "MemoryLimitExceeded" in result["error"]
    assert "app balloon: helm template chart: MemoryLimitExceeded" in result["error"]
    assert "goroutine" not in result["error"]  # not Go's crash dump
    assert 0 < result["peak"] < limit


def test_a_kustomization_file_linked_outside_is_refused_before_it_is_read(
        repo: Path, tmp_path: Path) -> None:
    base = tmp_path / "outside" / "kustomization.yaml"
    base.parent.mkdir(exist_ok=True)
    base.write_text(f"resources: [{SECRET}]\n")  # would be named in a "does not exist"
    write(repo, {"app/kustomization.yaml": "resources: [../base]\n"})
    (repo / "base").mkdir()
    (repo / "base" / "kustomization.yaml").symlink_to(base)
    refused("app", repo, "symlink 'base/kustomization.yaml' points outside the repository")


def test_a_kustomize_url_with_credentials_is_refused_redacted(repo: Path) -> None:
    write(repo, {"app/kustomization.yaml":
                 "resources: ['https://bot:s3cr3t-t0ken@git.example.com/base']\n"})
    message = refused("app", repo, "not fetched", "git.example.com")
    assert "s3cr3t-t0ken" not in message
