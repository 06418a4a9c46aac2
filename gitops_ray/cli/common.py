"""Options and wiring shared by the commands: which cluster, which apps, which repo.

Apps are chosen the way Argo CD users think of them:

* ``--repo URL --apps DIR`` reads every ``Application`` in ``DIR`` of the config repo
  (app-of-apps); ``--app NAME`` picks some;
* ``--repo URL --path P --dest-namespace NS`` builds one app from flags;
* ``--local DIR`` renders a directory on disk instead of a git revision (local work, and
  Argo CD's Config Management Plugin, which runs in the app's directory); ``--repo-root``
  says where its repository starts when guessing is wrong.

The cluster-backed commands compare with the system-level settings the controller uses
(:func:`system_settings`): ``--argocd-cm FILE`` if given, else the cluster's
``argocd-cm`` when ``--argocd`` or ``--argocd-namespace`` is, else none.

The cluster-backed commands render as the controller does: ``--instance-types-configmap``
and ``--patches-configmap`` (the controller's ``podShapes.*`` settings, with the same
``GITOPS_RAY_*`` variables) name the in-cluster pod-shape ConfigMaps in
``--control-namespace``, read once per command. ``--argocd-namespace`` (or ``--argocd``)
enforces the apps' Argo CD AppProjects, read from that namespace
(:mod:`gitops_ray.reconcile.project`); without it no project rules apply, as in the
git-only mode.

Every cluster-backed command works on each app in the cluster its ``destination`` names
(:mod:`gitops_ray.cli.destinations`, built on :func:`pipeline_factory`).

The CLI must tell the truth, because it gates CI: an ``--apps`` directory without
Applications is an error (not a silent pass), and a name that matches no app is an error
that suggests the closest one. Every option can also be set as ``GITOPS_RAY_<OPTION>``
in the environment (see :func:`name_envvars`); ``--log-level``, ``--kubeconfig`` and
``--context`` are global, given before or after the subcommand (:class:`CliCommand`).
Options that ``gitops-ray run`` has too (``--repo``, ``--cache-dir``, ...) are built from
its settings table (:func:`setting_option`), so both spell and default them the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from gitops_ray import childproc, settings
from gitops_ray.diff.rules import JQ_TIMEOUT
from gitops_ray.errors import ConfigError, closest
from gitops_ray.kube import Kube, KubeError
from gitops_ray.reconcile.argocdcm import (
    ARGOCD_CM,
    NO_SETTINGS,
    SystemSettings,
    load_argocd_cm_file,
    parse_argocd_cm,
)
from gitops_ray.reconcile.pipeline import Pipeline, RenderTools, configmap_shapes
from gitops_ray.reconcile.project import KubeProjects, ResolveCluster
from gitops_ray.render import application_from_flags, load_applications
from gitops_ray.render.apps import Application
from gitops_ray.render.shapes.settings import CONFIG_DIR
from gitops_ray.source import GitSource, env_lookup
from gitops_ray.sync.records import RecordStore

F = TypeVar("F", bound=Callable[..., Any])
EXIT_DIFFERENCES = 1
EXIT_ERROR = 2
"""Exit codes, as ``kubectl diff``: 0 success or no differences."""
GLOBAL_SETTINGS = {"log_level": "log.level", "kubeconfig": "kubeconfig", "kube_context": "context"}
"""Parameters the group and every subcommand share (kubectl's global flags): their settings."""
GLOBAL_PARAMS = tuple(GLOBAL_SETTINGS)


def _apply(func: F, decorators: list[Callable[[F], F]]) -> F:
    return functools.reduce(lambda f, d: d(f), reversed(decorators), func)


def setting_option(key: str, *decls: str, **overrides: Any) -> Callable[[F], F]:
    """The option of ``run``'s setting ``key``: its flag, default and help, unless overridden.

    An empty default (``""``) becomes "not given" (``None``), as click expects.
    """
    setting = settings.option(key)
    assert setting.flag_name is not None, f"{key} has no flag"
    default = setting.default if setting.default != "" else None
    kwargs: dict[str, Any] = {"default": default, "show_default": default is not None,
                              "help": setting.help, **overrides}
    return click.option(setting.flag_name, *decls, **kwargs)


def log_level_option(func: F) -> F:
    return setting_option("log.level", type=click.Choice(settings.LOG_LEVELS),
                          default="warning",
                          help="Log level of one-shot commands (logs go to stderr).")(func)


def global_options(func: F) -> F:
    """``--log-level``, ``--kubeconfig`` and ``--context``: accepted on the group too."""
    return _apply(func, [
        log_level_option,
        setting_option("kubeconfig", envvar=[settings.option("kubeconfig").env, "KUBECONFIG"]),
        setting_option("context", "kube_context"),
    ])


def kube_options(func: F) -> F:
    """The global options and ``--control-namespace``."""
    return _apply(func, [global_options, setting_option("controlNamespace")])


def app_options(func: F) -> F:
    """How apps are selected (see the module docstring)."""
    return _apply(func, [
        setting_option("repo"),
        setting_option("revision", default=None,
                       help="Branch, tag, commit SHA or HEAD (overrides the apps' "
                            "targetRevision)."),
        setting_option("apps", "apps_dir"),
        click.option("--app", "app_names", multiple=True, help="Only this app (repeatable)."),
        click.option("--path", "app_path", default=".", show_default=True,
                     help="Manifest path in the repo, for an app built from flags."),
        click.option("--dest-namespace", default="default", show_default=True,
                     help="Destination namespace, for an app built from flags."),
        click.option("--name", "app_name", help="Name of an app built from flags."),
        click.option("--local", "local_dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Render this directory instead of a git revision."),
        click.option("--repo-root", type=click.Path(file_okay=False, path_type=Path),
                     help="Repository root of --local (default: the outermost directory "
                          "holding .gitops-ray/ inside the git work tree, else its root)."),
        setting_option("cacheDir", type=click.Path(path_type=Path)),
        setting_option("helm", "helm_bin"),
        setting_option("render.valueFileHosts", "value_file_hosts"),
        setting_option("childMemoryLimit", "child_memory_limit"),
    ])


def render_settings(opts: dict[str, Any]) -> tuple[str, ...]:
    """Apply ``--child-memory-limit`` (to every child from now on); the valueFiles hosts.

    Converted by the settings' own converters, so a bad value is the error ``run`` gives.
    """
    values = {}
    for key, name in (("childMemoryLimit", "child_memory_limit"),
                      ("render.valueFileHosts", "value_file_hosts")):
        option = settings.option(key)
        try:
            values[key] = option.convert(opts.get(name) or option.default)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint=option.flag_name) from None
    childproc.configure(values["childMemoryLimit"])
    hosts: tuple[str, ...] = values["render.valueFileHosts"]
    return hosts


def argocd_options(func: F) -> F:
    """``--argocd`` and ``--argocd-namespace``: where Argo CD's settings live.

    That is ``argocd-cm``, the AppProjects and the destination clusters' Secrets.
    """
    return _apply(func, [
        setting_option("argocd.enabled", "argocd", is_flag=True,
                       envvar=settings.option("argocd.enabled").env,
                       help="Read argocd-cm, AppProjects and cluster Secrets from "
                            "--argocd-namespace, as the controller does with --argocd."),
        setting_option("argocd.namespace", "argocd_namespace", default=None,
                       envvar=settings.option("argocd.namespace").env,
                       show_default=False,
                       help="Argo CD's namespace: read its argocd-cm, the apps' AppProjects "
                            "and the destination clusters' Secrets from there (implies "
                            "--argocd)."),
    ])


def shapes_options(func: F) -> F:
    """The in-cluster pod-shape ConfigMaps (``podShapes.*``) and Argo CD's ``argocd-cm``."""
    return _apply(func, [
        click.option("--argocd-cm", "argocd_cm",
                     type=click.Path(dir_okay=False, exists=True, path_type=Path),
                     help="A ConfigMap YAML file read as Argo CD's argocd-cm (system-level "
                          "ignoreDifferences, knownTypeFields, Lua health checks, compare "
                          "options); wins over the cluster's."),
        argocd_options,
        click.option("--instance-types-configmap", default="",
                     help="ConfigMap in --control-namespace holding instance types "
                          "(instance_types.yaml); the repo's .gitops-ray/ files override it."),
        click.option("--patches-configmap", default="",
                     help="ConfigMap in --control-namespace holding pod-shape patches "
                          "(patches.yaml), applied before the repo's."),
    ])


class CliCommand(click.Command):
    """A subcommand whose global options may also be given before it, on the group.

    A value typed after the subcommand wins, then one typed before it, then the
    environment and defaults (which both levels read the same way).
    """

    def invoke(self, ctx: click.Context) -> Any:
        parent = ctx.parent
        for name in GLOBAL_PARAMS:
            if name in ctx.params and parent is not None and name in parent.params \
                    and ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE \
                    and parent.get_parameter_source(name) is ParameterSource.COMMANDLINE:
                ctx.params[name] = parent.params[name]
        if "log_level" in ctx.params:
            from gitops_ray.logs import configure_logging

            configure_logging("auto", ctx.params["log_level"])  # stderr: stdout is data
        return super().invoke(ctx)


def name_envvars(command: click.Command) -> None:
    """Give every option its ``GITOPS_RAY_<OPTION>`` variable (``--repo``: ``_REPO``).

    ``GITOPS_RAY_<COMMAND>_<OPTION>`` is read first, so one command can differ.
    """
    for param in command.params:
        if not isinstance(param, click.Option) or param.envvar or not param.allow_from_autoenv:
            continue
        longest = max((o for o in param.opts if o.startswith("--")), key=len, default="")
        option = longest[2:].split("/")[0].replace("-", "_").upper()
        if option:
            cmd = (command.name or "").replace("-", "_").upper()
            prefix = settings.ENV_PREFIX
            param.envvar = [f"{prefix}{cmd}_{option}", f"{prefix}{option}"]


@dataclass
class Selection:
    """The apps a command works on, plus where to render them from."""

    apps: list[Application]
    revision: str | None = None
    local: Path | None = None
    repo_root: Path | None = None


def select_apps(source: GitSource, opts: dict[str, Any]) -> Selection:
    """Resolve the app options into applications (see module docstring)."""
    local: Path | None = opts.get("local_dir")
    if local is not None:
        root = _local_root(local, opts)
        app = application_from_flags(
            name=opts.get("app_name") or local.resolve().name, repo_url=str(root),
            revision="local", path=local.resolve().relative_to(root).as_posix() or ".",
            dest_namespace=opts["dest_namespace"])
        return Selection([app], local=root)
    repo = opts.get("repo")
    if not repo:
        raise ConfigError("say which repository to use: --repo URL (or --local DIR)")
    if opts.get("apps_dir"):
        apps = _app_of_apps(source, repo, opts["apps_dir"], opts.get("revision"))
    else:
        apps = [application_from_flags(
            name=opts.get("app_name") or _name_from_path(opts["app_path"]), repo_url=repo,
            revision=opts.get("revision") or "HEAD", path=opts["app_path"],
            dest_namespace=opts["dest_namespace"])]
    wanted = tuple(opts.get("app_names") or ())
    check_known(wanted, [a.name for a in apps])
    chosen = [a for a in apps if not wanted or a.name in wanted]
    return Selection(chosen, revision=opts.get("revision"))


def _app_of_apps(source: GitSource, repo: str, apps_dir: str,
                 revision: str | None) -> list[Application]:
    checkout = source.checkout(repo, revision or "HEAD")
    apps = load_applications(checkout.root, apps_dir)
    if not apps:
        raise ConfigError(f"no Argo CD Applications in {apps_dir!r} of {repo} at "
                          f"{checkout.sha[:12]}: nothing to do (wrong --apps directory?)")
    return apps


def _local_root(local: Path, opts: dict[str, Any]) -> Path:
    given: Path | None = opts.get("repo_root")
    if given is None:
        return repo_root_of(local, opts.get("source_path"))
    root = given.resolve()
    if not local.resolve().is_relative_to(root):
        raise ConfigError(f"--local {local} is not inside --repo-root {given}")
    return root


def check_known(wanted: Iterable[str], known: Iterable[str]) -> None:
    """Fail on names that match no app, suggesting the closest known one."""
    names = sorted(set(known))
    missing = sorted(set(wanted) - set(names))
    if not missing:
        return
    raise ConfigError("; ".join(unknown_app(name, names) for name in missing))


def unknown_app(name: str, known: Iterable[str]) -> str:
    """``no such app: X`` plus the closest match, if there is one."""
    return f"no such app: {name}{closest(name, known)}"


def repo_root_of(directory: Path, source_path: str | None = None) -> Path:
    """The repository root of ``directory``.

    ``source_path`` (Argo CD's ``ARGOCD_APP_SOURCE_PATH``, the app's path in the repo)
    decides when given. Else the outermost ancestor holding ``.gitops-ray/`` inside the
    git work tree (a config repo kept in a subdirectory of another project, such as
    ``examples/shapes`` here; an app may hold its own ``.gitops-ray/`` override), else the
    git work tree's root, else the directory itself.
    """
    if source_path and source_path.strip("/") not in ("", "."):
        depth = len(Path(source_path.strip("/")).parts)
        resolved = directory.resolve()
        if resolved.parts[-depth:] == Path(source_path.strip("/")).parts:
            return resolved.parents[depth - 1]
    start = directory.resolve()
    chain = [start, *start.parents]
    git_root = next((c for c in chain if (c / ".git").exists()), None)
    if git_root is not None:
        chain = chain[:chain.index(git_root) + 1]
    configured = [c for c in chain if (c / CONFIG_DIR).is_dir()]
    return configured[-1] if configured else git_root or start


def _name_from_path(path: str) -> str:
    name = Path(path).name.lower().replace("_", "-")
    return name if name not in ("", ".") else "app"


def cli_source(opts: dict[str, Any]) -> GitSource:
    """The command's git, with the ``GITOPS_RAY_GIT_*`` credentials for ``--repo``'s host.

    Or for ``GITOPS_RAY_GIT_URL``'s prefix; never for a repository an app names elsewhere.
    """
    return GitSource(opts["cache_dir"], credentials=env_lookup([str(opts.get("repo") or "")]))


def connect(opts: dict[str, Any]) -> Kube:
    return Kube.connect(opts.get("kubeconfig"), opts.get("kube_context"))


PipelineFor = Callable[[Kube, ResolveCluster], Pipeline]
"""A pipeline comparing with one cluster's client (records, settings and git: ours)."""


def pipeline_factory(opts: dict[str, Any], kube: Kube, store: RecordStore) -> PipelineFor:
    """What every cluster's pipeline shares, read once from our cluster ``kube``."""
    source = cli_source(opts)
    tools = RenderTools(helm_bin=opts["helm_bin"], value_file_hosts=render_settings(opts))
    shapes = configmap_shapes(
        lambda namespace, name: kube.get("v1", "ConfigMap", name=name, namespace=namespace),
        namespace=opts["control_namespace"],
        instance_types=opts.get("instance_types_configmap") or "",
        patches=opts.get("patches_configmap") or "")
    argocd = argocd_namespace(opts)
    system = system_settings(kube, opts)
    projects = KubeProjects(kube, argocd) if argocd else None
    cached_shapes = functools.cache(shapes)  # one read per command

    def pipeline(target: Kube, clusters: ResolveCluster) -> Pipeline:
        return Pipeline(target, source, store, tools=tools,
                        builtin_rules=not opts.get("no_builtin_rules", False),
                        jq_timeout=float(opts.get("jq_timeout", JQ_TIMEOUT)),
                        shapes=cached_shapes, projects=projects, system=lambda: system,
                        clusters=clusters)
    return pipeline


def argocd_namespace(opts: dict[str, Any]) -> str:
    """Argo CD's namespace if the command was asked to read from it (else "").

    ``--argocd-namespace NS``, or ``--argocd`` alone (Argo CD's default namespace): its
    ``argocd-cm`` and AppProjects then apply, as in the controller with ``--argocd``.
    """
    namespace = str(opts.get("argocd_namespace") or "")
    if not namespace and opts.get("argocd"):
        namespace = str(settings.option("argocd.namespace").default)
    return namespace


def system_settings(kube: Kube, opts: dict[str, Any]) -> SystemSettings:
    """``--argocd-cm FILE``, else the cluster's argocd-cm if asked for, else none.

    A file wins: it is how a change to ``argocd-cm`` is tried before it is applied. An
    ``argocd-cm`` that does not exist means no settings, as for Argo CD.
    """
    path: Path | None = opts.get("argocd_cm")
    if path is not None:
        return load_argocd_cm_file(path)
    namespace = argocd_namespace(opts)
    if not namespace:
        return NO_SETTINGS
    try:
        found = kube.get("v1", "ConfigMap", name=ARGOCD_CM, namespace=namespace)
    except KubeError as e:
        raise ConfigError(f"cannot read ConfigMap {namespace}/{ARGOCD_CM}: {e}") from e
    return parse_argocd_cm(found, origin=f"ConfigMap {namespace}/{ARGOCD_CM}")
