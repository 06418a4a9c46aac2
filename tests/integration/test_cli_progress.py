"""``sync`` and ``status`` as a person sees them (issue 17): in a terminal and piped.

Real API server, real git, the CLI as a real process: in a pseudo-terminal (stdout and
stderr on one terminal of 120 columns, as a user has them), or with pipes. What a
terminal shows is worked out by :class:`Screen`, which plays the few control sequences
rich's live display writes (carriage return, cursor up, erase line), so the tests assert
on the lines a user would read, not on escape codes. No timing: the test that shows
results are streamed holds one app back on a real condition (its wave 0 is not healthy
until the test says so) and reads the other app's result before letting it go.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from gitops_ray.kube import Kube
from gitops_ray.types import ResourceAction, ResourceKey
from tests.harness import eventually
from tests.harness.cli import Cli, app_yaml
from tests.harness.git import GitRepo
from tests.harness.pipeline import Env
from tests.integration.test_sync_waves import config_map, in_wave, report
from tests.samples import raycluster

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 120
SPINNER = re.compile("[\u2800-\u28ff]")  # rich's "dots" spinner: braille patterns
CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


class Screen:
    """A terminal's lines after some output: enough of a VT100 for rich's live display."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.lines: list[str] = [""]
        self.row = self.col = 0

    def feed(self, text: str) -> Screen:
        pos = 0
        for match in CSI.finditer(text):
            self._text(text[pos:match.start()])
            self._control(match.group(1), match.group(2))
            pos = match.end()
        self._text(text[pos:])
        return self

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self._down()
            elif char == "\x1b" or char < " ":
                continue
            else:
                if self.col >= self.columns:  # the terminal wraps a long line
                    self._down()
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[:self.col] + char + line[self.col + 1:]
                self.col += 1

    def _down(self) -> None:
        self.row, self.col = self.row + 1, 0
        if self.row == len(self.lines):
            self.lines.append("")

    def _control(self, args: str, command: str) -> None:
        if command == "A":
            self.row = max(0, self.row - int(args or 1))
        elif command == "K" and args == "2":
            self.lines[self.row] = ""
        elif command == "G":
            self.col = int(args or 1) - 1

    def text(self) -> list[str]:
        return [line.rstrip() for line in self.lines if line.strip()]


def in_terminal(args: list[str], *, columns: int = COLUMNS) -> tuple[int, str]:
    """Run ``gitops-ray ARGS`` with stdout and stderr on one pseudo-terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR", "NO_COLOR"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "gitops_ray", *args], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(), b"".join(chunks).decode()


def piped(args: list[str]) -> subprocess.Popen[str]:
    """``gitops-ray ARGS`` with stdout and stderr on pipes (no terminal at all)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "gitops_ray", *args], text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


LONG_PATH = "clusters/production/us-east-1/ray-training-platform"


def two_apps(git_repo: GitRepo, namespace: str) -> None:
    """``training-us-east-1``: a RayCluster (Progressing: no operator here);
    ``gateway-eu-west-1``: a ConfigMap (Healthy). Both at a long path."""
    git_repo.commit({
        "apps/training.yaml": app_yaml(git_repo, "training-us-east-1", namespace, LONG_PATH),
        "apps/gateway.yaml": app_yaml(git_repo, "gateway-eu-west-1", namespace,
                                      LONG_PATH + "-cm"),
        f"{LONG_PATH}/rc.yaml": raycluster("training"),
        f"{LONG_PATH}-cm/cm.yaml": config_map("gateway")})


def test_status_fits_the_terminal_and_piped_is_one_line_per_app(
        cli: Cli, git_repo: GitRepo, namespace: str) -> None:
    two_apps(git_repo, namespace)
    synced = cli("sync", "--repo", git_repo.url, "--apps", "apps")
    assert synced.exit_code == 0, synced.output
    names = ["gateway-eu-west-1", "training-us-east-1"]

    piped_table = cli("status")
    assert piped_table.exit_code == 0, piped_table.output
    lines = piped_table.stdout.splitlines()
    assert len(lines) == 1 + len(names)  # a header and one whole line per app
    assert [line.split()[0] for line in lines[1:]] == names
    assert all(git_repo.url in line and LONG_PATH in line for line in lines[1:])
    assert max(len(line) for line in lines) > COLUMNS  # so the terminal has to fit it

    code, output = in_terminal(cli.argv("status"))
    assert code == 0, output
    shown = Screen(COLUMNS).feed(output).text()
    assert all(len(line) <= COLUMNS for line in output.replace("\r", "").split("\n")), output
    assert shown[0].split() == ["NAME", "NAMESPACE", "REPO", "PATH", "SYNC", "HEALTH",
                                "REVISION", "SYNCPOLICY", "CONDITIONS"]
    assert len(shown) == 1 + len(names), shown  # no row wrapped onto a second line
    for name, line in zip(names, shown[1:], strict=True):
        assert line.split()[0] == name
        assert "Synced" in line and "Manual" in line and "…" in line  # the REPO gave way
    assert "Progressing" in shown[2] and "Healthy" in shown[1]


def test_wide_says_why_an_app_is_progressing(cli: Cli, git_repo: GitRepo,
                                             namespace: str) -> None:
    two_apps(git_repo, namespace)
    assert cli("sync", "--repo", git_repo.url, "--apps", "apps").exit_code == 0
    recorded = {r["name"]: r for r in json.loads(cli("status", "-o", "json").stdout)}
    training = recorded["training-us-east-1"]
    assert training["health"] == "Progressing" and training["healthMessage"]

    wide = cli("status", "-o", "wide")
    assert wide.exit_code == 0, wide.output
    header, *rows = wide.stdout.splitlines()
    assert header.split()[-5:] == ["CONDITIONS", "TARGET", "LAST", "SYNC", "MESSAGE"]
    row = next(r for r in rows if r.startswith("training-us-east-1"))
    assert "Progressing" in row and training["healthMessage"] in row
    assert re.search(r"Succeeded \d+[smh] ago", row), row  # a time people read

    code, output = in_terminal(cli.argv("status", "-o", "wide"))
    assert code == 0, output
    shown = Screen(COLUMNS).feed(output).text()
    assert all(len(line) <= COLUMNS for line in shown), shown
    assert shown[0].split()[-1] == "CONDITIONS"  # the same table, then each app's details
    words = " ".join(" ".join(shown).split())
    assert f"MESSAGE: {' '.join(training['healthMessage'].split())}" in words, shown


def slow_and_fast(git_repo: GitRepo, namespace: str) -> None:
    """``a-slow`` waits for its wave 0 RayCluster to be healthy; ``b-fast`` does not wait."""
    git_repo.commit({"apps/a.yaml": app_yaml(git_repo, "a-slow", namespace, "slow"),
                     "apps/b.yaml": app_yaml(git_repo, "b-fast", namespace, "fast"),
                     "slow/a.yaml": [raycluster("slow"), in_wave(config_map("slow-cm"), 1)],
                     "fast/b.yaml": [config_map("fast-cm")]})


def test_piped_sync_streams_each_app_as_it_finishes_with_no_control_codes(
        cli: Cli, git_repo: GitRepo, kube: Kube, namespace: str) -> None:
    slow_and_fast(git_repo, namespace)
    proc = piped(cli.argv("sync", "--repo", git_repo.url, "--apps", "apps", "--parallel", "2"))
    assert proc.stdout is not None and proc.stderr is not None
    before: list[str] = []
    while not any(line.startswith("app b-fast:") for line in before):
        line = proc.stdout.readline()
        assert line, f"stdout ended early: {before}"
        before.append(line)
    # b-fast's result came while a-slow (first in app order) still waits for its wave 0
    assert not any("a-slow" in line for line in before), before
    assert f"b-fast\tConfigMap:{namespace}/fast-cm\tcreated\n" in before
    eventually(lambda: kube.get("ray.io/v1", "RayCluster", name="slow", namespace=namespace),
               message="a-slow applied its wave 0")
    report(kube, namespace, "slow", "ready")
    rest, errors = proc.communicate(timeout=120)
    assert proc.returncode == 0, rest + errors
    assert rest.splitlines()[-1].startswith("app a-slow: Succeeded")
    assert f"a-slow\tConfigMap:{namespace}/slow-cm\tcreated" in rest
    assert f"a-slow\tray.io/RayCluster:{namespace}/slow\tcreated" in rest  # the earlier wave
    assert "\x1b" not in errors and "\r" not in errors  # no live display, no colour
    assert errors.strip().splitlines()[-1].startswith(
        "2 app(s): 2 synced, 0 failed, 0 unchanged in "), errors


def test_sync_in_a_terminal_shows_progress_apart_from_the_results(
        cli: Cli, git_repo: GitRepo, namespace: str) -> None:
    names = [f"app-{n}" for n in range(4)]
    git_repo.commit({**{f"apps/{n}.yaml": app_yaml(git_repo, n, namespace, n) for n in names},
                     **{f"{n}/cm.yaml": [config_map(f"{n}-a"), config_map(f"{n}-b")]
                        for n in names}})
    code, output = in_terminal(cli.argv("sync", "--repo", git_repo.url, "--apps", "apps",
                                        "--parallel", "2"))
    assert code == 0, output
    assert SPINNER.search(output) and "\x1b[2K" in output  # there was a live display
    shown = Screen(COLUMNS).feed(output).text()
    results = [line for line in shown if line.startswith(("app-", "app app-"))]
    assert len(results) == 3 * len(names), shown  # 2 objects and the app's line, each app
    assert all(not SPINNER.search(line) and "━" not in line for line in results), shown
    assert shown[-1].startswith("4 app(s): 4 synced, 0 failed, 0 unchanged in "), shown
    assert not any(SPINNER.search(line) for line in shown), shown  # the display went away



class Heard:
    """A :class:`~gitops_ray.sync.request.SyncProgress` that writes down what it is told."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.objects: list[tuple[str, str]] = []

    def planned(self, count: int) -> None:
        self.counts.append(count)

    def done(self, key: ResourceKey, action: ResourceAction) -> None:
        self.objects.append((key.name, action.value))


def test_the_engine_tells_its_progress_object_by_object(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [config_map("one"), config_map("two")]})
    app = env.app(git_repo, name="heard")
    first = Heard()
    assert env.reconciler.sync(app, progress=first).result.ok
    assert first.counts == [2]
    assert sorted(first.objects) == [("one", "created"), ("two", "created")]

    git_repo.commit({"manifests/a.yaml": [config_map("one")]}, "two leaves git")
    second = Heard()
    assert env.reconciler.sync(app, prune=True, progress=second).result.ok
    assert second.counts == [2]  # one to apply, one to examine for pruning
    # "deleting" when the garbage collector has not removed it yet (foreground deletion)
    assert second.objects[0] == ("one", "unchanged")
    assert second.objects[1] in (("two", "pruned"), ("two", "deleting"))


def test_a_resumed_step_plans_only_the_waves_left(env: Env, git_repo: GitRepo) -> None:
    git_repo.commit({"manifests/a.yaml": [raycluster("head"), in_wave(config_map("after"), 1)]})
    app = env.app(git_repo, name="waves")
    heard = Heard()
    first = env.reconciler.sync(app, progress=heard)
    assert first.result.running and heard.counts == [2]
    assert heard.objects == [("head", "created")]
    report(env.kube, env.namespace, "head", "ready")
    done = env.reconciler.sync(app, resume=first.result.continuation(), progress=heard)
    assert done.result.ok, done.result.message
    assert heard.counts == [2, 1] and heard.objects[-1] == ("after", "created")
