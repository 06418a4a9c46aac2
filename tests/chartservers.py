"""Real chart servers for tests: a static Helm repository over HTTP(S), and docker-registry.

A Helm repository is nothing but ``index.yaml`` and archives over HTTP (what GitHub Pages
serves for ray-project's kuberay-helm): :func:`helm_repository` builds one with the real
``helm package`` + ``helm repo index``, and :func:`serve_directory` serves it on
127.0.0.1, plain, behind basic auth, or over TLS, logging each request (path and whether
it carried credentials) so tests can count fetches. :func:`serve_registry` runs Debian's
``docker-registry`` (the CNCF distribution registry) over TLS, anonymous or with an
htpasswd file, and :func:`push_chart` pushes an archive into it with ``helm push``.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bcrypt

from localcluster.pki import write_pki

REGISTRY_BIN = "docker-registry"


@dataclass
class Served:
    """A directory served on 127.0.0.1: its URL and every request it answered."""

    url: str
    root: Path
    requests: list[tuple[str, bool]] = field(default_factory=list)  # (path, had auth)
    ca_file: str = ""
    rewrite: dict[str, Callable[[bytes], bytes]] = field(default_factory=dict)

    def count(self, suffix: str) -> int:
        return sum(1 for path, _ in self.requests if path.endswith(suffix))


def tls_files(directory: Path) -> tuple[Path, Path, Path]:
    """``(ca.crt, serving.crt, serving.key)`` for 127.0.0.1 and localhost."""
    directory.mkdir(parents=True, exist_ok=True)
    write_pki(directory)
    return directory / "ca.crt", directory / "serving.crt", directory / "serving.key"


@contextmanager
def serve_directory(root: Path, *, username: str = "", password: str = "",
                    tls: tuple[Path, Path, Path] | None = None) -> Iterator[Served]:
    """Serve ``root`` read-only (GET), optionally behind basic auth and/or TLS."""
    served = Served("", root, ca_file=str(tls[0]) if tls else "")
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            served.requests.append((self.path, auth is not None))
            if username and auth != expected:
                self._answer(401, b"", {"WWW-Authenticate": 'Basic realm="charts"'})
                return
            path = (root / self.path.split("?")[0].lstrip("/")).resolve()
            if not path.is_relative_to(root.resolve()) or not path.is_file():
                self._answer(404, b"not found")
                return
            body = path.read_bytes()
            for suffix, change in served.rewrite.items():
                if self.path.endswith(suffix):
                    body = change(body)
            self._answer(200, body)

        def _answer(self, status: int, body: bytes,
                    headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(tls[1]), str(tls[2]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls else "http"
    served.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/charts"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def package_chart(helm_bin: Path, chart_dir: Path, out: Path, *, version: str = "",
                  values: str | None = None) -> Path:
    """``helm package`` a copy of ``chart_dir`` (with another version/values) into ``out``."""
    work = out / ".work" / f"{chart_dir.name}-{version or 'as-is'}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(chart_dir, work / chart_dir.name)
    copy = work / chart_dir.name
    if version:
        text = (copy / "Chart.yaml").read_text()
        lines = [f"version: {version}" if ln.startswith("version:") else ln
                 for ln in text.splitlines()]
        (copy / "Chart.yaml").write_text("\n".join(lines) + "\n")
    if values is not None:
        (copy / "values.yaml").write_text(values)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(helm_bin), "package", str(copy), "-d", str(out)], check=True,
                   capture_output=True, text=True)
    name = (copy / "Chart.yaml").read_text().split("name:", 1)[1].split()[0]
    meta = (copy / "Chart.yaml").read_text()
    chart_version = version or meta.split("\nversion:", 1)[1].split()[0]
    return out / f"{name}-{chart_version}.tgz"


def index_repository(helm_bin: Path, repo: Path, url: str = "") -> None:
    """``helm repo index`` (archive URLs relative unless ``url``)."""
    args = [str(helm_bin), "repo", "index", str(repo)] + (["--url", url] if url else [])
    subprocess.run(args, check=True, capture_output=True, text=True)


def helm_repository(helm_bin: Path, repo: Path, chart_dir: Path,
                    versions: tuple[str, ...] = ("1.5.1",)) -> Path:
    """A Helm repository directory holding ``chart_dir`` at each of ``versions``."""
    (repo / "charts").mkdir(parents=True, exist_ok=True)
    for version in versions:
        package_chart(helm_bin, chart_dir, repo / "charts", version=version)
    index_repository(helm_bin, repo / "charts")
    return repo / "charts"


@dataclass
class Registry:
    """A docker-registry on 127.0.0.1 over TLS."""

    host: str  # 127.0.0.1:PORT
    ca_file: str
    username: str = ""
    password: str = ""

    def oci(self, path: str = "charts") -> str:
        return f"oci://{self.host}/{path}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_registry(workdir: Path, *, username: str = "", password: str = "") -> Iterator[Registry]:
    """Run Debian's docker-registry (TLS; htpasswd auth when ``username`` is given)."""
    if shutil.which(REGISTRY_BIN) is None:
        import pytest

        pytest.skip("docker-registry is not installed (make tools installs it)")
    ca, cert, key = tls_files(workdir / "tls")
    port = _free_port()
    config = [
        "version: 0.1", "log:", "  level: error", "storage:", "  filesystem:",
        f"    rootdirectory: {workdir / 'data'}", "http:", f"  addr: 127.0.0.1:{port}",
        "  tls:", f"    certificate: {cert}", f"    key: {key}",
    ]
    if username:
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
        (workdir / "htpasswd").write_text(f"{username}:{hashed}\n")
        config += ["auth:", "  htpasswd:", "    realm: charts",
                   f"    path: {workdir / 'htpasswd'}"]
    (workdir / "config.yml").write_text("\n".join(config) + "\n")
    log = open(workdir / "registry.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([REGISTRY_BIN, "serve", str(workdir / "config.yml")],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_tls(port, ca, proc)
        yield Registry(f"127.0.0.1:{port}", str(ca), username, password)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
        log.close()


def _wait_for_tls(port: int, ca: Path, proc: subprocess.Popen[bytes]) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited with {proc.returncode}")
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
            conn.request("GET", "/v2/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)  # the registry is starting: poll its port
    raise RuntimeError("docker-registry did not start")


def push_chart(helm_bin: Path, archive: Path, registry: Registry, path: str = "charts") -> str:
    """``helm push`` an archive; the pushed manifest's digest (``sha256:...``)."""
    args = [str(helm_bin), "push", str(archive), registry.oci(path), "--ca-file",
            registry.ca_file]
    if registry.username:
        args += ["--username", registry.username, "--password", registry.password]
    home = archive.parent / ".helm-home"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}
    done = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
    text = done.stdout + done.stderr
    return next(w for w in text.split() if w.startswith("sha256:"))
