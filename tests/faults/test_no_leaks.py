"""Nothing secret leaves the controller: not a repoURL token, not a document's values.

The real controller process syncs three apps from a real git HTTP server behind Basic
auth, each with ``user:TOKEN@`` in its ``repoURL``:

* ``plain``: a ConfigMap; its git traffic is held by the server until the test has read
  the argv (``/proc/<pid>/cmdline``) of every descendant of the controller (and a sampler
  reads them all along, for the many git runs that are not held);
* ``marked``: a ConfigMap whose data holds a marker, with a jq ignore rule that fails on
  it (libjq quotes the value: ``while parsing '<marker>...'``);
* ``invalid``: a Service whose ``spec.type`` is the marker, which the API server rejects
  with a message that echoes the value (``Unsupported value: "<marker>"``).

Then the token and the marker are searched for in everything the controller writes: the
ConfigMaps, Events and Leases of the control and destination namespaces (except, for the
marker, the object that legitimately holds it), the metrics, the whole log; and the token
in every file under the cache directory (the marker is legitimately in the checked-out
tree there).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube import Kube
from gitops_ray.kube.leader import LEASE_API
from gitops_ray.sync.records import RecordStore
from localcluster import LocalControlPlane
from tests.gitserver import serve_git
from tests.harness import eventually
from tests.harness.git import GitRepo
from tests.harness.process import ControllerProcess, StartController
from tests.harness.runtime import application
from tests.harness.settings import controller_settings

TOKEN = "tok-" + secrets.token_hex(12)
MARKER = "leakmarker" + secrets.token_hex(6)
HOLD_LIMIT = 60.0  # the longest the git server holds a request (the test releases it)


class Gate:
    """Holds the first authenticated git request until :meth:`release` (bounded)."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._used = False

    def __call__(self) -> None:
        with self._lock:
            first, self._used = not self._used, True
        if first:
            self.held.set()
            self._released.wait(HOLD_LIMIT)

    def release(self) -> None:
        self._released.set()


@pytest.fixture
def destination(extra_namespace: Callable[[str], str]) -> str:
    return extra_namespace("dst")


def _repo(git_repo: GitRepo) -> None:
    config = f"auth: {MARKER}\nport: 1\n"
    git_repo.commit({
        "plain/cm.yaml": {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "plain"}, "data": {"a": "1"}},
        "marked/cm.yaml": {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "marked"}, "data": {"config": config}},
        "invalid/svc.yaml": {"apiVersion": "v1", "kind": "Service",
                             "metadata": {"name": "invalid"},
                             "spec": {"type": MARKER, "ports": [{"port": 80}]}},
    })


def _settings(control_plane: LocalControlPlane, control: str, url: str,
              destination: str) -> dict[str, Any]:
    marked = application("marked", url, destination, "marked")
    marked["spec"]["ignoreDifferences"] = [
        {"kind": "ConfigMap", "jqPathExpressions": [".data.config | fromjson | .x"]}]
    return controller_settings(
        control_plane.kubeconfig, control, interval="2s",
        applications=[application("plain", url, destination, "plain"), marked,
                      application("invalid", url, destination, "invalid")])


def _operation(store: RecordStore, app: str) -> dict[str, Any]:
    return dict(store.load(app).status.get("operation") or {})


def _events(kube: Kube, namespace: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.list("v1", "Event", namespace)[0] if e.get("reason") == reason]


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def argv_of(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


class ArgvWatch:
    """Samples the argv of every descendant of a process until stopped (a backstop to the
    held request: git runs many times during the test, not only while held)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[tuple[str, ...]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.seen.update(tuple(argv_of(p)) for p in descendants(self.pid))

    def stop(self) -> set[tuple[str, ...]]:
        self._stop.set()
        self._thread.join(10)
        return self.seen


def cluster_text(kube: Kube, namespaces: list[str], *, skip: set[tuple[str, str]]) -> str:
    """ConfigMaps, Events and Leases of ``namespaces`` as JSON (minus ``skip``)."""
    docs = []
    for ns in namespaces:
        for api, kind in (("v1", "ConfigMap"), ("v1", "Event"), (LEASE_API, "Lease")):
            items, _ = kube.list(api, kind, ns)
            docs += [i for i in items if (kind, i["metadata"]["name"]) not in skip]
    return json.dumps(docs)


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Files under ``root`` containing ``needle`` (the controller may still be writing)."""
    found = []
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):  # removed meanwhile (an evicted tree)
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path))
    return found


def test_no_token_or_document_value_leaves_the_controller(
        control_plane: LocalControlPlane, kube: Kube, namespace: str, destination: str,
        git_repo: GitRepo, tmp_path: Path, controller_process: StartController) -> None:
    _repo(git_repo)
    gate = Gate()
    with serve_git(git_repo.bare.parent, username="ci", token=TOKEN, hold=gate) as base:
        url = f"{base.replace('://', f'://ci:{TOKEN}@')}/{git_repo.bare.name}"
        proc = controller_process("leaks", _settings(control_plane, namespace, url,
                                                     destination))
        watch = ArgvWatch(proc.pid)
        try:
            held = _check_argv_while_git_runs(proc, gate)
        finally:
            gate.release()
        store = RecordStore(kube, namespace)
        eventually(lambda: kube.get("v1", "ConfigMap", name="plain", namespace=destination), 120,
                   "plain synced")
        eventually(lambda: kube.get("v1", "ConfigMap", name="marked", namespace=destination), 60,
                   "marked synced")
        eventually(lambda: store.load("marked").status.get("warnings"), 60,
                   "the skipped jq rule in the status")
        eventually(lambda: _operation(store, "invalid").get("phase") == "Failed", 60,
                   "the invalid app's failed sync in the status")
        eventually(lambda: _events(kube, namespace, "SyncFailed"), 60, "a SyncFailed Event")
        metrics = proc.metrics()
    sampled = watch.stop() | held  # the sampler may miss a short git on a busy machine
    assert any(a and Path(a[0]).name.startswith("git") for a in sampled), sampled
    assert [a for a in sampled if TOKEN in " ".join(a)] == []
    _check_sinks(kube, proc, [namespace, destination], metrics, store)
    cache = tmp_path / "leaks"
    assert list(cache.rglob("mirror.git/config")), "the mirror was not where expected"
    assert files_holding(cache, TOKEN.encode()) == []


def _check_argv_while_git_runs(proc: ControllerProcess, gate: Gate) -> set[tuple[str, ...]]:
    """The argv of everything below the controller while git's request is held."""
    eventually(gate.held.is_set, 120, "git's first authenticated request")
    argvs = [argv_of(pid) for pid in descendants(proc.pid)]
    gits = [a for a in argvs if any("git" in Path(w).name for w in a[:2])]
    assert gits, f"no git process below the controller: {argvs}"
    assert any(any(w.startswith("http://127.0.0.1") for w in a) for a in gits), gits
    for argv in argvs:
        assert TOKEN not in " ".join(argv), argv
    return {tuple(a) for a in argvs}


def _check_sinks(kube: Kube, proc: ControllerProcess, namespaces: list[str], metrics: str,
                 store: RecordStore) -> None:
    status = store.load("marked").status
    assert any("jqPathExpressions[0]" in w and "skipped" in w for w in status["warnings"])
    assert status["repoURL"].startswith("http://***@127.0.0.1:")
    assert "Unsupported value (withheld)" in _operation(store, "invalid")["message"]
    assert any("Unsupported value (withheld)" in e["message"]
               for e in _events(kube, namespaces[0], "SyncFailed"))
    everything = cluster_text(kube, namespaces, skip=set())
    assert TOKEN not in everything
    owned = {("ConfigMap", "marked")}  # holds the marker: it is the app's own object
    assert MARKER not in cluster_text(kube, namespaces, skip=owned)
    log = proc.text()
    for text in (metrics, log):
        assert TOKEN not in text
        assert MARKER not in text
