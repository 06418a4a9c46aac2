"""``gitops-ray`` in the test: click's runner against the test cluster, records in the test
namespace as the control namespace.

Each command is given the connection options it takes (read from the command itself):
``--kubeconfig``/``--control-namespace`` (not ``render``, which needs no cluster),
``--cache-dir`` and, when the test has one, ``--helm``.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from gitops_ray.cli import main
from localcluster import LocalControlPlane
from tests.harness.git import GitRepo

OFFLINE = frozenset({"render"})


class Cli:
    """The CLI against the test cluster: ``cli("diff", ...)`` adds the options ``diff`` takes;
    ``cli.raw(...)`` runs exactly the arguments given; ``cli.argv(...)`` is what a
    subprocess would run."""

    def __init__(self, cp: LocalControlPlane, namespace: str, cache: Path,
                 helm: Path | None = None) -> None:
        self.kube_args = ["--kubeconfig", str(cp.kubeconfig), "--control-namespace", namespace]
        self.namespace, self.cache, self.helm = namespace, cache, helm

    def options(self, command: str) -> list[str]:
        """The connection options ``command`` takes, for this test."""
        cmd = main.commands.get(command)
        takes = {opt for param in cmd.params for opt in param.opts} if cmd else set()
        out = self.kube_args if "--kubeconfig" in takes and command not in OFFLINE else []
        if "--cache-dir" in takes:
            out = [*out, "--cache-dir", str(self.cache)]
        if "--helm" in takes and self.helm is not None:
            out = [*out, "--helm", str(self.helm)]
        return out

    def argv(self, command: str, *args: str) -> list[str]:
        return [command, *self.options(command), *args]

    def __call__(self, command: str, *args: str, env: dict[str, str] | None = None) -> Result:
        return CliRunner().invoke(main, self.argv(command, *args), env=env,
                                  catch_exceptions=False)

    def raw(self, *argv: str) -> Result:
        """Exactly ``argv`` (a test that names the options itself)."""
        return CliRunner().invoke(main, list(argv))

    def sync(self, *args: str) -> Result:
        return self.raw("sync", *self.kube_args, "--cache-dir", str(self.cache), *args)


def app_yaml(repo: GitRepo, name: str, namespace: str, path: str, **spec: object) -> dict:
    """An Application of ``repo``'s ``path`` at ``main`` into ``namespace`` (``spec`` added)."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "default", "destination": {"namespace": namespace},
                     "source": {"repoURL": repo.url, "path": path, "targetRevision": "main"},
                     **spec}}
