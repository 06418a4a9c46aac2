"""The command blocks of docs/install.md and docs/argocd.md, run for real by the tests.

Why: a page that tells people which commands to type goes stale silently when a chart
value, a flag or a default changes. Each ```sh block of those pages follows a marker
``<!-- doc-test: NAME -->``; :data:`RUN_BY` says which test runs each block, and
``tests/unit/test_docs_links.py`` fails when a block has no marker or no test. A test
takes the block from the page (so the page is what runs), replaces what only exists on
the reader's side (their repository URL, namespaces, file names: :class:`Shell`'s
substitutions) and runs every line with the real tool: kubectl, helm (the chart from this
checkout), ``gitops-ray`` (this checkout), the argocd CLI against the real argocd-server.

What has no real counterpart here is said where it is replaced: there is no Docker daemon
or registry, so ``docker`` is a recording stand-in (``make image`` itself runs, with its
pin check); ``pip install .`` runs offline (``--no-deps --no-build-isolation --target``);
and the chart's pod is played by the controller as a local process with the pod's
ServiceAccount token and its rendered ``config.yaml`` (there is no kubelet), as in
tests/faults/test_chart_rbac.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = re.compile(r"<!--\s*doc-test:\s*([\w-]+)\s*-->")
RUN_BY: dict[str, dict[str, str]] = {
    "install.md": {
        "image": "tests/integration/test_docs_commands.py",
        "cli": "tests/integration/test_docs_commands.py",
        "secrets": "tests/e2e/test_docs_install.py",
        "install-git-mode": "tests/e2e/test_docs_install.py",
        "rbac": "tests/e2e/test_docs_install.py",
        "verify": "tests/e2e/test_docs_install.py",
        "upgrade": "tests/e2e/test_docs_install.py",
        "uninstall": "tests/e2e/test_docs_install.py",
        "install-argocd-mode": "tests/argocd/test_docs_argocd.py",
        "hand-back": "tests/argocd/test_docs_argocd.py",
    },
    "argocd.md": {
        "preview": "tests/argocd/test_docs_argocd.py",
        "hand-over": "tests/argocd/test_docs_argocd.py",
        "verify": "tests/argocd/test_docs_argocd.py",
        "hand-back": "tests/argocd/test_docs_argocd.py",
    },
}
"""Each page's command blocks, by marker name, and the test that runs them."""
NAMESPACE_FLAGS = {"-n", "--namespace", "--control-namespace", "namespace"}


@dataclass(frozen=True)
class Block:
    """One ```sh block: its commands (continuation lines joined, comments kept out)."""

    page: str
    name: str
    commands: tuple[str, ...]


def _fences(page: str) -> list[tuple[str | None, str, str]]:
    """``(marker name or None, info, content)`` of every fenced block of ``page``."""
    tokens = MarkdownIt("commonmark").parse((DOCS / page).read_text())
    out: list[tuple[str | None, str, str]] = []
    for i, token in enumerate(tokens):
        if token.type != "fence":
            continue
        before = tokens[i - 1] if i else None
        found = MARKER.search(before.content) if before and before.type == "html_block" else None
        out.append((found.group(1) if found else None, token.info.strip(), token.content))
    return out


def shell_blocks(page: str) -> list[tuple[str | None, Block]]:
    """Every ``sh`` block of ``page`` with its marker name (None: unmarked)."""
    blocks = []
    for name, info, content in _fences(page):
        if info == "sh":
            joined = content.replace("\\\n", " ")
            commands = tuple(line.strip() for line in joined.splitlines()
                             if line.strip() and not line.strip().startswith("#"))
            blocks.append((name, Block(page, name or "", commands)))
    return blocks


def block(page: str, name: str) -> Block:
    return next(b for n, b in shell_blocks(page) if n == name)


def yaml_file(page: str, filename: str) -> str:
    """The ```yaml block of ``page`` whose first line is ``# <filename>``."""
    return next(content for _, info, content in _fences(page)
                if info == "yaml" and content.startswith(f"# {filename}\n"))


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


@dataclass
class Shell:
    """Runs a page's commands with the reader's names replaced by the test's.

    ``replace``: text substitutions, in order (``https://github.com/acme/...`` -> the
    test's repository); ``namespaces``: a namespace name after ``-n`` (or
    ``--control-namespace``, ``create namespace``) -> the test's; ``runners``: how each
    program runs (``kubectl``: the real one, with the test cluster's kubeconfig, ...).
    """

    cwd: Path
    runners: dict[str, Runner]
    replace: list[tuple[str, str]] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)
    ran: list[tuple[str, subprocess.CompletedProcess[str]]] = field(default_factory=list)

    def argv(self, command: str) -> list[str]:
        for old, new in self.replace:
            command = command.replace(old, new)
        words = shlex.split(command)
        return [self.namespaces.get(w, w) if i and words[i - 1] in NAMESPACE_FLAGS else w
                for i, w in enumerate(words)]

    def run(self, block: Block, *, codes: Mapping[str, Sequence[int]] | None = None
            ) -> list[subprocess.CompletedProcess[str]]:
        """Run every command of ``block``; each must exit 0 (or a code ``codes`` allows
        for a command starting with that text)."""
        results = []
        for command in block.commands:
            argv = self.argv(command)
            done = self.runners[argv[0]](argv)
            allowed = next((list(c) for start, c in (codes or {}).items()
                            if command.startswith(start)), [0])
            assert done.returncode in allowed, (
                f"{block.page} [{block.name}] `{command}` exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            self.ran.append((command, done))
            results.append(done)
        return results


def installed_config(kube: Any, namespace: str, release: str = "gitops-ray") -> str:
    """The ``config.yaml`` the chart's Deployment mounts (its ConfigMap is named by digest)."""
    deployment = kube.get("apps/v1", "Deployment", name=release, namespace=namespace)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "config")
    configmap = kube.get("v1", "ConfigMap", name=volume["configMap"]["name"],
                         namespace=namespace)
    return str(configmap["data"]["config.yaml"])


def run_program(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True,
                          check=False, timeout=timeout, stdin=subprocess.DEVNULL)


def tool_env(kubeconfig: Path, home: Path) -> dict[str, str]:
    """kubectl's and helm's environment: the test cluster, a private HOME for helm."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return {**env, "KUBECONFIG": str(kubeconfig), "HOME": str(home),
            "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"), "PYTHONPATH": str(ROOT)}


def cluster_runners(*, cwd: Path, env: Mapping[str, str], helm_bin: Path) -> dict[str, Runner]:
    """kubectl, helm and this checkout's gitops-ray, on the test cluster."""
    def kubectl(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_program(argv, cwd=cwd, env=env)

    def helm(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_program([str(helm_bin), *argv[1:]], cwd=cwd, env=env)

    def gitops_ray(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_program([sys.executable, "-m", "gitops_ray", *argv[1:]], cwd=cwd, env=env)

    return {"kubectl": kubectl, "helm": helm, "gitops-ray": gitops_ray}
