"""Helm charts stored in the config repo, rendered with ``helm template`` as Argo CD does.

The command line mirrors Argo CD's (``util/helm/cmd.go``), so a chart renders the same
objects under both tools:

    helm template <chart dir> --name-template <release> --namespace <ns>
        --kube-version <v> [--set k=v]... [--set-string k=v]... [--values f]...
        [--values <values/valuesObject>] [--api-versions v]... [--include-crds]
        [--skip-schema-validation] [--skip-tests]

* release = ``helm.releaseName`` or the app name; namespace = ``helm.namespace`` or
  ``destination.namespace`` (Helm only uses it for ``.Release.Namespace``; the render
  stage sets the default namespace on objects afterwards, like Argo CD's controller);
* ``valueFiles`` are relative to the chart directory (absolute ones to the repo root;
  ``$ref/path`` ones to the multi-source app's source with that ``ref``),
  may not leave the repo, and must exist unless ``ignoreMissingValueFiles``; an http(s)
  URL is refused unless the setting ``render.valueFileHosts`` names its host (helm would
  fetch it from the controller's pod: a cloud metadata endpoint, an internal service),
  and so is one with credentials (``user:token@``): helm would get the token on its
  command line, readable by anyone in ``ps``;
* ``valuesObject`` wins over ``values``; either is written to a private temp file;
* parameter values get unescaped commas escaped (``a,b`` stays one value) unless they
  look like a Helm list ``{a,b}``, exactly as Argo CD's ``cleanSetParameters``;
* CRDs from ``crds/`` are included unless ``skipCrds``;
* a "missing in charts/ directory" failure triggers ``helm dependency build`` in a scratch
  copy of the checkout and one more try, as Argo CD does for ``file://`` dependencies;
  such a dependency must be a directory inside the repository, and its symlinks (like
  the chart's own, see :func:`gitops_ray.safepath.check_no_escaping_symlinks`) must stay
  inside it, checked before helm runs: helm follows links when it loads a chart, and
  ``.Files.Get`` (or ``fail``) would put what they point to in a manifest or an error.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml

from gitops_ray import limits
from gitops_ray.errors import RenderError
from gitops_ray.redact import redact
from gitops_ray.render.apps import Application, HelmSource
from gitops_ray.render.documents import Doc, parse_yaml, read_text
from gitops_ray.render.tools import ToolResult, inside, run_tool, scratch_copy, tool_error
from gitops_ray.safepath import check_no_escaping_symlinks

MISSING_DEPENDENCY = ("found in Chart.yaml, but missing in charts/ directory",
                      "found in requirements.yaml, but missing in charts")
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")
HINT = "install helm v3 or pass --helm PATH"


@dataclass(frozen=True)
class HelmRun:
    """Everything ``helm template`` needs besides the chart directory."""

    release: str
    namespace: str
    kube_version: str
    api_versions: tuple[str, ...]
    value_files: tuple[str, ...]  # absolute paths or URLs, in order
    extra_values: str  # path of the values/valuesObject file, or ""
    helm: HelmSource


def template_args(chart_dir: str, run: HelmRun) -> list[str]:
    """The ``helm template`` arguments, in Argo CD's order (pure, for unit tests)."""
    args = ["template", chart_dir, "--name-template", run.release]
    if run.namespace:
        args += ["--namespace", run.namespace]
    if run.kube_version:
        args += ["--kube-version", run.kube_version]
    for flag, force in (("--set", False), ("--set-string", True)):
        for name, value in _parameters(run.helm, force_string=force):
            args += [flag, f"{name}={escape_set_value(value)}"]
    for path in (*run.value_files, *([run.extra_values] if run.extra_values else [])):
        args += ["--values", path]
    for version in run.api_versions:
        args += ["--api-versions", version]
    args += [] if run.helm.skip_crds else ["--include-crds"]
    args += ["--skip-schema-validation"] if run.helm.skip_schema_validation else []
    return args + (["--skip-tests"] if run.helm.skip_tests else [])


def _parameters(helm: HelmSource, *, force_string: bool) -> list[tuple[str, str]]:
    """Parameters of one kind; a repeated name keeps its last value (Argo CD uses a map)."""
    chosen = {name: value for name, value, force in helm.parameters if force == force_string}
    return list(chosen.items())


def escape_set_value(value: str) -> str:
    """Escape commas helm would split on, unless the value is a ``{a,b}`` list."""
    if value.startswith("{") and value.endswith("}"):
        return value
    return _UNESCAPED_COMMA.sub(r"\\,", value)


def resolve_value_file(repo_root: Path, app_path: str, value_file: str, *,
                       ignore_missing: bool, hosts: Sequence[str] = (),
                       refs: Mapping[str, Path] | None = None) -> str | None:
    """Absolute path (or URL) of a value file; ``None`` if missing and ignored.

    A URL must name one of ``hosts`` (``host`` for any port, ``host:port`` for one).
    ``$name/path`` is ``path`` in the multi-source app's source with ``ref: name``
    (``refs``: each ref's checkout), kept inside that checkout.
    """
    if value_file.startswith("$"):
        return _ref_value_file(value_file, refs or {}, ignore_missing=ignore_missing)
    url = urlparse(value_file)
    if url.scheme in ("http", "https"):
        if "@" in url.netloc:
            raise RenderError(f"helm value file {redact(value_file)!r}: credentials in a URL "
                              "are not passed to helm (they would show in its command line)")
        if not url_allowed(value_file, hosts):
            raise RenderError(f"helm value file {redact(value_file)!r}: its host is not in "
                              "the setting render.valueFileHosts (remote value files are "
                              "off unless that setting names their host)")
        return value_file
    joined = value_file.lstrip("/") if value_file.startswith("/") else \
        posixpath.join(app_path, value_file)
    relative = posixpath.normpath(joined)
    return _value_file_in(repo_root, relative, value_file, ignore_missing=ignore_missing,
                          outside="the repository", missing=f"({relative}) does not exist")


def _value_file_in(root: Path, relative: str, value_file: str, *, ignore_missing: bool,
                   outside: str, missing: str) -> str | None:
    """``relative`` (normalised) as a file inside ``root``; ``None`` if missing and ignored."""
    path = inside(root, relative, f"helm value file {value_file!r}", outside=outside)
    if path.is_file():
        return str(path)
    if ignore_missing:
        return None
    raise RenderError(f"helm value file {value_file!r} {missing}")


def url_allowed(value_file: str, hosts: Sequence[str]) -> bool:
    """Whether the http(s) URL ``value_file`` names one of ``hosts`` (lower-case names)."""
    url = urlparse(value_file)
    try:
        host, port = (url.hostname or "").lower(), url.port
    except ValueError:  # a port that is not a number
        return False
    default = 443 if url.scheme == "https" else 80
    return bool(host) and (host in hosts or f"{host}:{port or default}" in hosts)


def check_dependencies(repo_root: Path, chart_dir: Path) -> None:
    """Refuse ``file://`` dependencies that leave the repository or link outside it.

    Read from ``Chart.yaml`` and ``requirements.yaml``, and followed into each one.
    """
    seen: set[Path] = set()
    pending = [chart_dir]
    while pending:
        directory = pending.pop()
        if directory in seen:
            continue
        seen.add(directory)
        for name, repository in _dependencies(repo_root, directory):
            target = _local_dependency(repo_root, directory, name, repository)
            check_no_escaping_symlinks(repo_root, target)
            pending.append(target)


def _dependencies(repo_root: Path, directory: Path) -> list[tuple[str, str]]:
    """(name, repository) of each dependency the chart at ``directory`` declares."""
    found = []
    for file in ("Chart.yaml", "requirements.yaml"):
        path = directory / file
        if not path.is_file():
            continue
        origin = path.relative_to(repo_root).as_posix() if path.is_relative_to(repo_root) \
            else file
        docs = parse_yaml(read_text(path, origin=origin), origin=origin)
        body = docs[0].body if docs else None
        deps = body.get("dependencies") if isinstance(body, dict) else None
        for dep in deps if isinstance(deps, list) else []:
            if isinstance(dep, dict) and isinstance(dep.get("repository"), str):
                found.append((str(dep.get("name", "")), dep["repository"]))
    return found


def _local_dependency(repo_root: Path, chart_dir: Path, name: str, repository: str) -> Path:
    """The directory of a ``file://`` dependency (the chart itself for any other kind)."""
    if not repository.startswith("file://"):
        return chart_dir
    shown = f"chart dependency {name!r} ({repository})"
    location = repository[len("file://"):]
    if not location or posixpath.isabs(location):
        raise RenderError(f"{shown}: a file:// dependency must be a path relative to the "
                          "chart, inside the repository")
    relative = posixpath.normpath(posixpath.join(
        chart_dir.relative_to(repo_root).as_posix(), location))
    target = inside(repo_root, relative, shown)
    if not target.is_dir():
        raise RenderError(f"{shown}: {relative} is not a directory of the repository")
    return target


def _ref_value_file(value_file: str, refs: Mapping[str, Path], *,
                    ignore_missing: bool) -> str | None:
    name, _, rest = value_file[1:].partition("/")
    if name not in refs:
        raise RenderError(f"helm value file {value_file!r}: no source has ref {name!r}")
    return _value_file_in(refs[name], posixpath.normpath(rest or "."), value_file,
                          ignore_missing=ignore_missing, outside=f"source ${name}",
                          missing=f"does not exist in source ${name}")


def render_helm(app: Application, *, repo_root: Path, app_dir: Path, helm_bin: str | Path,
                kube_version: str, api_versions: Sequence[str],
                value_file_hosts: Sequence[str] = (),
                refs: Mapping[str, Path] | None = None) -> list[Doc]:
    """Run ``helm template`` for ``app``'s chart at ``app_dir`` and decode its output."""
    helm = app.source.helm or HelmSource()
    chart = app_dir.relative_to(repo_root).as_posix()
    what = f"helm template {chart}"
    check_dependencies(repo_root, app_dir)
    with tempfile.TemporaryDirectory(prefix="gitops-ray-values-") as tmp:
        run = HelmRun(
            release=helm.release_name or app.name,
            namespace=helm.namespace or app.destination.namespace,
            kube_version=helm.kube_version or kube_version,
            api_versions=helm.api_versions or tuple(api_versions),
            value_files=_value_files(repo_root, chart, helm, value_file_hosts, refs or {}),
            extra_values=_write_extra_values(helm, Path(tmp)), helm=helm)
        replace = {run.extra_values: "spec.source.helm.values"} if run.extra_values else {}
        out = _template(str(helm_bin), repo_root, chart, run, what=what, replace=replace)
    return parse_yaml(out, origin=what, helm_sources=True, limit=limits.MAX_RENDER_BYTES)


def _value_files(repo_root: Path, chart: str, helm: HelmSource,
                 hosts: Sequence[str], refs: Mapping[str, Path]) -> tuple[str, ...]:
    resolved = (resolve_value_file(repo_root, chart, f, hosts=hosts,
                                   ignore_missing=helm.ignore_missing_value_files, refs=refs)
                for f in helm.value_files)
    return tuple(f for f in resolved if f is not None)


def _write_extra_values(helm: HelmSource, directory: Path) -> str:
    """Write ``valuesObject`` (preferred, as in Argo CD) or ``values``; return the path."""
    if helm.values_object is not None:
        text = yaml.safe_dump(helm.values_object, sort_keys=False)
    elif helm.values.strip():
        text = helm.values
    else:
        return ""
    path = directory / "values.yaml"
    path.write_text(text)
    return str(path)


def _template(helm_bin: str, repo_root: Path, chart: str, run: HelmRun, *, what: str,
              replace: dict[str, str]) -> str:
    local = chart if chart == "." else f"./{chart}"  # never mistaken for repo/chart
    result = _helm(helm_bin, template_args(local, run), repo_root, what)
    if result.returncode != 0 and any(m in result.stderr for m in MISSING_DEPENDENCY):
        with scratch_copy(repo_root) as copy:
            built = _helm(helm_bin, ["dependency", "build", local], copy, what)
            if built.returncode != 0:
                raise tool_error(f"helm dependency build {chart}", built)
            result = _helm(helm_bin, template_args(local, run), copy, what)
    if result.returncode != 0:
        raise tool_error(what, result, replace=replace)
    return result.stdout


def _helm(helm_bin: str, args: list[str], cwd: Path, what: str) -> ToolResult:
    return run_tool([helm_bin, *args], what=what, hint=HINT, cwd=cwd)
