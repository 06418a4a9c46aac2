"""Options and wiring shared by the commands: which cluster, which apps, which repo.

Apps are chosen the way Argo CD users think of them:

* ``--repo URL --apps DIR`` reads every ``Application`` in ``DIR`` of the config repo
  (app-of-apps); ``--app NAME`` picks some;
* ``--repo URL --path P --dest-namespace NS`` builds one app from flags;
* ``--local DIR`` renders a directory on disk instead of a git revision (local work, and
  Argo CD's Config Management Plugin, which runs in the app's directory).

Every option can also be set as ``GITOPS_RAY_<OPTION>`` in the environment.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from gitops_ray.errors import ConfigError
from gitops_ray.kube import Kube
from gitops_ray.reconcile.pipeline import Pipeline, RenderTools
from gitops_ray.render import application_from_flags, load_applications
from gitops_ray.render.apps import Application
from gitops_ray.source import GitSource
from gitops_ray.sync.records import RecordStore

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CACHE = Path.home() / ".cache" / "gitops-ray" / "repos"


def kube_options(func: F) -> F:
    """``--kubeconfig``, ``--context`` and ``--control-namespace``."""
    decorators = [
        click.option("--kubeconfig", envvar=["GITOPS_RAY_KUBECONFIG", "KUBECONFIG"],
                     help="Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config,"
                          " or in-cluster)."),
        click.option("--context", "kube_context", help="The kubeconfig context to use."),
        click.option("--control-namespace", default="gitops-ray", show_default=True,
                     help="Namespace holding gitops-ray's per-app records."),
    ]
    return functools.reduce(lambda f, d: d(f), reversed(decorators), func)


def app_options(func: F) -> F:
    """How apps are selected (see the module docstring)."""
    decorators = [
        click.option("--repo", help="Config repository URL."),
        click.option("--revision", help="Branch, tag, commit SHA or HEAD (overrides the "
                                        "apps' targetRevision)."),
        click.option("--apps", "apps_dir", help="Directory of Argo CD Applications in the "
                                                "repo (app-of-apps)."),
        click.option("--app", "app_names", multiple=True, help="Only this app (repeatable)."),
        click.option("--path", "app_path", default=".", show_default=True,
                     help="Manifest path in the repo, for an app built from flags."),
        click.option("--dest-namespace", default="default", show_default=True,
                     help="Destination namespace, for an app built from flags."),
        click.option("--name", "app_name", help="Name of an app built from flags."),
        click.option("--local", "local_dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Render this directory instead of a git revision."),
        click.option("--cache-dir", type=click.Path(path_type=Path), default=DEFAULT_CACHE,
                     show_default=True, help="Where git mirrors are kept."),
        click.option("--helm", "helm_bin", default="helm", show_default=True,
                     help="helm v3 binary."),
    ]
    return functools.reduce(lambda f, d: d(f), reversed(decorators), func)


@dataclass
class Selection:
    """The apps a command works on, plus where to render them from."""

    apps: list[Application]
    revision: str | None = None
    local: Path | None = None
    repo_root: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def select_apps(source: GitSource, opts: dict[str, Any]) -> Selection:
    """Resolve the app options into applications (see module docstring)."""
    local: Path | None = opts.get("local_dir")
    if local is not None:
        root = repo_root_of(local, opts.get("source_path"))
        app = application_from_flags(
            name=opts.get("app_name") or local.resolve().name, repo_url=str(root),
            revision="local", path=str(local.resolve().relative_to(root)) or ".",
            dest_namespace=opts["dest_namespace"])
        return Selection([app], local=root)
    repo = opts.get("repo")
    if not repo:
        raise ConfigError("say which repository to use: --repo URL (or --local DIR)")
    if opts.get("apps_dir"):
        checkout = source.checkout(repo, opts.get("revision") or "HEAD")
        apps = load_applications(checkout.root, opts["apps_dir"])
    else:
        apps = [application_from_flags(
            name=opts.get("app_name") or _name_from_path(opts["app_path"]), repo_url=repo,
            revision=opts.get("revision") or "HEAD", path=opts["app_path"],
            dest_namespace=opts["dest_namespace"])]
    wanted = set(opts.get("app_names") or ())
    missing = wanted - {a.name for a in apps}
    if missing:
        raise ConfigError(f"no such app: {', '.join(sorted(missing))}")
    chosen = [a for a in apps if not wanted or a.name in wanted]
    return Selection(chosen, revision=opts.get("revision"))


def repo_root_of(directory: Path, source_path: str | None = None) -> Path:
    """The repository root of ``directory``.

    ``source_path`` (Argo CD's ``ARGOCD_APP_SOURCE_PATH``, the app's path in the repo)
    decides when given; else the nearest ancestor holding ``.git``, else the outermost one
    holding ``.gitops-ray/`` (an app may override that config), else the directory itself.
    """
    if source_path and source_path.strip("/") not in ("", "."):
        depth = len(Path(source_path.strip("/")).parts)
        resolved = directory.resolve()
        if resolved.parts[-depth:] == Path(source_path.strip("/")).parts:
            return resolved.parents[depth - 1]
    start = directory.resolve()
    chain = (start, *start.parents)
    for candidate in chain:
        if (candidate / ".git").exists():
            return candidate
    configured = [c for c in chain if (c / ".gitops-ray").is_dir()]
    return configured[-1] if configured else start


def _name_from_path(path: str) -> str:
    name = Path(path).name.lower().replace("_", "-")
    return name if name not in ("", ".") else "app"


def build_pipeline(opts: dict[str, Any]) -> tuple[Pipeline, RecordStore]:
    """Connect to the cluster and build the pipeline for a command."""
    kube = Kube.connect(opts.get("kubeconfig"), opts.get("kube_context"))
    store = RecordStore(kube, opts["control_namespace"])
    source = GitSource(opts["cache_dir"])
    tools = RenderTools(helm_bin=opts.get("helm_bin") or "helm")
    pipeline = Pipeline(kube, source, store, tools=tools,
                        builtin_rules=not opts.get("no_builtin_rules", False),
                        jq_timeout=float(opts.get("jq_timeout", 1.0)))
    return pipeline, store
