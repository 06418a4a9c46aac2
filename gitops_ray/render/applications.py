"""Reading Argo CD ``Application`` manifests (app-of-apps) and building apps from flags.

The parser is strict about what it honours and loud about what it does not:

* a field we act on with the wrong type, a missing ``repoURL``, or two source types at
  once is a :class:`ConfigError` naming the file and the field path, because Argo CD (or
  the API server's schema) would reject the same Application;
* a field we do not act on (multi-source ``spec.sources``, ``source.plugin``,
  ``helm.fileParameters``, most ``kustomize`` options,
  ``syncPolicy.retry``, a remote ``destination``, unknown keys) becomes a warning in
  ``Application.warnings``, never silence;
* fields that only matter to Argo CD's UI or bookkeeping (``status``, ``spec.info``,
  ``spec.revisionHistoryLimit``, ``metadata.labels``, ``source.ref``/``name``) are
  accepted quietly; ``metadata.finalizers`` is kept, because Argo CD's resources
  finalizer decides whether deleting the Application deletes its objects.

Empty ``helm``/``kustomize``/``directory`` sections are dropped, as Argo CD's API server
does, so ``helm: {}`` does not force the Helm renderer onto a Kustomize directory.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitops_ray.errors import ConfigError, LimitExceeded, RenderError, SourceError
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.render.apps import (
    Application,
    AppSource,
    Destination,
    DirectorySource,
    HelmSource,
    KustomizeSource,
    SyncPolicy,
)
from gitops_ray.render.bounds import check_yaml
from gitops_ray.render.documents import Doc, parse_yaml, read_text
from gitops_ray.render.manifests import MANIFEST_SUFFIXES, file_documents, walk_files
from gitops_ray.safepath import check_no_escaping_symlinks, safe_path
from gitops_ray.types import IgnoreRule, RuleError

log = logging.getLogger(__name__)  # stdlib: see render.manifests

API_VERSION = "argoproj.io/v1alpha1"
IN_CLUSTER_SERVER = "https://kubernetes.default.svc"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_QUIET_TOP = {"apiVersion", "kind", "metadata", "spec", "status"}
_SPEC = {"source", "sources", "destination", "project", "syncPolicy", "ignoreDifferences",
         "info", "revisionHistoryLimit"}
_SOURCE = {"repoURL", "path", "targetRevision", "chart", "helm", "kustomize", "directory",
           "plugin", "ref", "name"}
_HELM = {"valueFiles", "values", "valuesObject", "parameters", "releaseName", "skipCrds",
         "namespace", "ignoreMissingValueFiles", "skipSchemaValidation", "skipTests",
         "kubeVersion", "apiVersions", "passCredentials", "version"}
_DIRECTORY = {"recurse", "include", "exclude", "disableExtensionFilter"}
_KUSTOMIZE = {"namePrefix", "nameSuffix", "namespace"}
_DESTINATION = {"server", "namespace", "name"}
_SYNC = {"automated", "syncOptions"}
_AUTOMATED = {"prune", "selfHeal", "allowEmpty", "enabled"}
_PARAMETER = {"name", "value", "forceString"}
_HINTS = {  # why a known Argo CD field is not honoured, by field name
    "sourceHydrator": "source hydration is not supported",
    "retry": "gitops-ray retries failed auto-syncs with its own backoff (settings: retry)",
    "managedNamespaceMetadata": "namespace metadata is not managed; put the Namespace in git",
    "operation": "gitops-ray starts syncs from syncPolicy or the CLI",
    "fileParameters": "--set-file is not supported; use valueFiles",
    "jsonnet": "Jsonnet is not supported",
    "images": "kustomize image overrides are not supported; set images in kustomization.yaml",
    "tagPrefix": "git tags are not resolved as semver constraints, with or without a "
                 "prefix; name the whole tag in targetRevision",
}
_EMPTY: tuple[object, ...] = (None, "", [], {}, False)
FIELDS_READ: dict[str, frozenset[str]] = {
    "": frozenset(_QUIET_TOP), "spec": frozenset(_SPEC), "spec.source": frozenset(_SOURCE),
    "spec.source.helm": frozenset(_HELM), "spec.source.directory": frozenset(_DIRECTORY),
    "spec.source.kustomize": frozenset(_KUSTOMIZE),
    "spec.destination": frozenset(_DESTINATION), "spec.syncPolicy": frozenset(_SYNC),
    "spec.syncPolicy.automated": frozenset(_AUTOMATED),
}
"""The fields read at each path of an Application (``""``: the top level); any other field
there is ignored with a warning, whose reason is ``IGNORED_BECAUSE`` (by field name) or
"unknown or unsupported field". docs/argocd.md's preflight table is generated from these
two tables and Argo CD's own CRD (gitops_ray/cli/reference.py)."""
IGNORED_BECAUSE = _HINTS


@dataclass
class _Context:
    """Where the Application came from, and the warnings collected while reading it."""

    where: str
    warnings: list[str] = field(default_factory=list)

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.where}: {message}")

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.where}: {message}")


# -- typed field access -------------------------------------------------------------------

def _mapping(value: object, path: str, ctx: _Context) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ctx.error(f"{path} must be a mapping")
    return value


def _string(data: Mapping[str, Any], key: str, path: str, ctx: _Context,
            default: str = "") -> str:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ctx.error(f"{path}.{key} must be a string (quote it in YAML)")
    return value


def _bool(data: Mapping[str, Any], key: str, path: str, ctx: _Context,
          default: bool = False) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ctx.error(f"{path}.{key} must be true or false")
    return value


def _strings(data: Mapping[str, Any], key: str, path: str, ctx: _Context) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.error(f"{path}.{key} must be a list of strings")
    return tuple(value)


def _list(data: Mapping[str, Any], key: str, path: str, ctx: _Context) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ctx.error(f"{path}.{key} must be a list")
    return value


def _warn_unknown(data: Mapping[str, Any], known: set[str], path: str, ctx: _Context, *,
                  quiet_if_empty: bool = False) -> None:
    """Warn about each key not in ``known`` (optionally only if it holds a value)."""
    for key in sorted(set(data) - known, key=str):
        if quiet_if_empty and data[key] in _EMPTY:
            continue
        full = f"{path}.{key}" if path else str(key)
        ctx.warn(f"{full} is ignored ({_HINTS.get(str(key), 'unknown or unsupported field')})")


# -- the Application ----------------------------------------------------------------------

def parse_application(doc: Mapping[str, Any], *, origin: str = "") -> Application:
    """Validate an ``argoproj.io/v1alpha1`` Application (see module docstring)."""
    ctx = _Context(origin or "Application")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Application":
        raise ctx.error(f"expected apiVersion {API_VERSION} and kind Application, got "
                        f"{doc.get('apiVersion')!r} {doc.get('kind')!r}")
    meta = _mapping(doc.get("metadata"), "metadata", ctx)
    name = _name(meta, ctx)
    if not origin:
        ctx.where = f"Application {name}"
    if "spec" not in doc:
        raise ctx.error("spec is required")
    spec = _mapping(doc.get("spec"), "spec", ctx)
    _warn_unknown(doc, _QUIET_TOP, "", ctx)
    _warn_unknown(spec, _SPEC, "spec", ctx)
    sources = _pick_sources(spec, ctx)
    return Application(
        name=name, source=sources[0], sources=sources if len(sources) > 1 else (),
        destination=_destination(spec.get("destination"), ctx),
        namespace=_string(meta, "namespace", "metadata", ctx),
        project=_string(spec, "project", "spec", ctx, default="default") or "default",
        ignore_differences=_ignore_differences(spec, ctx),
        sync_policy=_sync_policy(spec.get("syncPolicy"), ctx),
        annotations=_annotations(meta, ctx),
        finalizers=_strings(meta, "finalizers", "metadata", ctx), warnings=tuple(ctx.warnings))


def _name(meta: Mapping[str, Any], ctx: _Context) -> str:
    name = _string(meta, "name", "metadata", ctx)
    if not name:
        raise ctx.error("metadata.name is required")
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise ctx.error(f"metadata.name {name!r} is not a valid name (lowercase letters, "
                        "digits, '-' and '.', at most 253 characters)")
    return name


def _annotations(meta: Mapping[str, Any], ctx: _Context) -> dict[str, str]:
    annotations = _mapping(meta.get("annotations"), "metadata.annotations", ctx)
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise ctx.error(f"metadata.annotations[{key!r}] must be a string")
    return dict(annotations)


def _pick_sources(spec: Mapping[str, Any], ctx: _Context) -> tuple[AppSource, ...]:
    """``spec.source``, or every entry of ``spec.sources`` (which wins, as in Argo CD)."""
    sources = _list(spec, "sources", "spec", ctx)
    if sources:
        if spec.get("source") is not None:
            ctx.warn("spec.source is ignored because spec.sources is set (as in Argo CD)")
        parsed = tuple(_source(raw, f"spec.sources[{i}]", ctx, multi=len(sources) > 1)
                       for i, raw in enumerate(sources))
        _check_refs(parsed, ctx)
        return parsed
    if spec.get("source") is None:
        raise ctx.error("spec.source is required")
    return (_source(spec["source"], "spec.source", ctx),)


def _check_refs(sources: tuple[AppSource, ...], ctx: _Context) -> None:
    names = [s.ref for s in sources if s.ref]
    if len(names) != len(set(names)):
        raise ctx.error("spec.sources: two sources have the same ref")
    if all(s.ref_only for s in sources):
        raise ctx.error("spec.sources: every source is a ref: source, none is rendered")


def _source(raw: object, path: str, ctx: _Context, *, multi: bool = False) -> AppSource:
    data = _mapping(raw, path, ctx)
    ref = _string(data, "ref", path, ctx)
    if ref and not re.match(r"^[A-Za-z0-9_-]+$", ref):
        raise ctx.error(f"{path}.ref {ref!r} must be letters, digits, '-' or '_'")
    _warn_unknown(data, _SOURCE, path, ctx)
    repo_url = _string(data, "repoURL", path, ctx)
    if not repo_url:
        raise ctx.error(f"{path}.repoURL is required")
    chart = _string(data, "chart", path, ctx)
    if chart and (".." in chart.split("/") or chart.startswith("/") or "\\" in chart):
        raise ctx.error(f"{path}.chart {chart!r} must be a chart name")
    if chart and (data.get("kustomize") is not None or data.get("directory") is not None):
        raise ctx.error(f"{path}.chart is a Helm chart: {path}.kustomize and "
                        f"{path}.directory do not apply")
    _plugin(data.get("plugin"), path, ctx)
    ref_only = multi and bool(ref) and not data.get("path") and not chart
    source = AppSource(
        repo_url=repo_url, path="" if ref_only else _source_path(data, path, ctx),
        ref=ref if multi else "",
        target_revision=_string(data, "targetRevision", path, ctx) or "HEAD", chart=chart,
        helm=_helm(data.get("helm"), f"{path}.helm", ctx),
        directory=_directory(data.get("directory"), f"{path}.directory", ctx),
        kustomize=_kustomize(data.get("kustomize"), f"{path}.kustomize", ctx))
    _single_type(source, path, ctx)
    return source


def _source_path(data: Mapping[str, Any], path: str, ctx: _Context) -> str:
    value = _string(data, "path", path, ctx) or "."
    if value.startswith("/"):
        raise ctx.error(f"{path}.path {value!r} must be relative to the repository root")
    normal = posixpath.normpath(value)
    if normal == ".." or normal.startswith("../"):
        raise ctx.error(f"{path}.path {value!r} points outside the repository")
    return value


def _plugin(raw: object, path: str, ctx: _Context) -> None:
    if raw is None:
        return
    name = _string(_mapping(raw, f"{path}.plugin", ctx), "name", f"{path}.plugin", ctx)
    if name != "gitops-ray":
        ctx.warn(f"{path}.plugin ({name or 'discovered'}) is ignored: gitops-ray renders "
                 "the path itself as Helm, Kustomize or plain manifests")


def _single_type(source: AppSource, path: str, ctx: _Context) -> None:
    kinds = [k for k, v in (("Kustomize", source.kustomize), ("Helm", source.helm),
                            ("Directory", source.directory)) if v is not None]
    if len(kinds) > 1:
        raise ctx.error(f"multiple application sources defined: {','.join(kinds)} (set only "
                        f"one of {path}.helm, {path}.kustomize, {path}.directory)")


# -- source types -------------------------------------------------------------------------

def _helm(raw: object, path: str, ctx: _Context) -> HelmSource | None:
    if raw is None:
        return None
    data = _mapping(raw, path, ctx)
    _warn_unknown(data, _HELM, path, ctx, quiet_if_empty=True)
    if _string(data, "version", path, ctx) not in ("", "v3"):
        ctx.warn(f"{path}.version is ignored (charts are rendered with helm v3)")
    helm = HelmSource(
        value_files=_strings(data, "valueFiles", path, ctx),
        values=_values_text(data, path, ctx), values_object=_values_object(data, path, ctx),
        parameters=_parameters(data, path, ctx),
        release_name=_string(data, "releaseName", path, ctx),
        skip_crds=_bool(data, "skipCrds", path, ctx),
        namespace=_string(data, "namespace", path, ctx),
        ignore_missing_value_files=_bool(data, "ignoreMissingValueFiles", path, ctx),
        skip_schema_validation=_bool(data, "skipSchemaValidation", path, ctx),
        skip_tests=_bool(data, "skipTests", path, ctx),
        kube_version=_string(data, "kubeVersion", path, ctx),
        api_versions=_strings(data, "apiVersions", path, ctx))
    if helm.values and helm.values_object is not None:
        ctx.warn(f"{path}.values is ignored because {path}.valuesObject is set (as in Argo CD)")
    return None if helm == HelmSource() else helm


def _values_text(data: Mapping[str, Any], path: str, ctx: _Context) -> str:
    """``helm.values``: a string holding a YAML mapping, checked now for a precise error."""
    text = _string(data, "values", path, ctx)
    try:
        check_yaml(text, origin=f"{path}.values")
    except LimitExceeded as e:
        raise ctx.error(str(e)) from e
    try:
        parsed = yaml.safe_load(text) if text.strip() else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        line = f" line {mark.line + 1}" if mark else ""
        raise ctx.error(f"{path}.values is not valid YAML ({e.problem}{line})") from e
    if parsed is not None and not isinstance(parsed, dict):
        raise ctx.error(f"{path}.values must hold a YAML mapping of values")
    return text


def _values_object(data: Mapping[str, Any], path: str, ctx: _Context) -> dict[str, Any] | None:
    value = data.get("valuesObject")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ctx.error(f"{path}.valuesObject must be a mapping")
    return value


def _parameters(data: Mapping[str, Any], path: str,
                ctx: _Context) -> tuple[tuple[str, str, bool], ...]:
    out = []
    for i, raw in enumerate(_list(data, "parameters", path, ctx)):
        where = f"{path}.parameters[{i}]"
        item = _mapping(raw, where, ctx)
        _warn_unknown(item, _PARAMETER, where, ctx)
        name = _string(item, "name", where, ctx)
        if not name:
            raise ctx.error(f"{where}.name is required")
        out.append((name, _string(item, "value", where, ctx),
                    _bool(item, "forceString", where, ctx)))
    return tuple(out)


def _directory(raw: object, path: str, ctx: _Context) -> DirectorySource | None:
    if raw is None:
        return None
    data = _mapping(raw, path, ctx)
    _warn_unknown(data, _DIRECTORY, path, ctx, quiet_if_empty=True)
    directory = DirectorySource(
        recurse=_bool(data, "recurse", path, ctx), include=_glob(data, "include", path, ctx),
        exclude=_glob(data, "exclude", path, ctx),
        disable_extension_filter=_bool(data, "disableExtensionFilter", path, ctx))
    return None if directory == DirectorySource() else directory


def _glob(data: Mapping[str, Any], key: str, path: str, ctx: _Context) -> str:
    pattern = _string(data, key, path, ctx)
    try:
        compile_glob(pattern)
    except GlobError as e:
        raise ctx.error(f"{path}.{key}: {e}") from e
    return pattern


def _kustomize(raw: object, path: str, ctx: _Context) -> KustomizeSource | None:
    if raw is None:
        return None
    data = _mapping(raw, path, ctx)
    _warn_unknown(data, _KUSTOMIZE, path, ctx, quiet_if_empty=True)
    kustomize = KustomizeSource(name_prefix=_string(data, "namePrefix", path, ctx),
                                name_suffix=_string(data, "nameSuffix", path, ctx),
                                namespace=_string(data, "namespace", path, ctx))
    return None if kustomize == KustomizeSource() else kustomize


# -- destination, sync policy, ignore rules -----------------------------------------------

def _destination(raw: object, ctx: _Context) -> Destination:
    data = _mapping(raw, "spec.destination", ctx)
    _warn_unknown(data, _DESTINATION, "spec.destination", ctx)
    dest = Destination(namespace=_string(data, "namespace", "spec.destination", ctx),
                       server=_string(data, "server", "spec.destination", ctx),
                       name=_string(data, "name", "spec.destination", ctx))
    if dest.server and dest.name:
        raise ctx.error("spec.destination can't have both name and server defined")
    return dest  # another cluster resolves by its Secret, or is refused (reconcile.project)


def _sync_policy(raw: object, ctx: _Context) -> SyncPolicy:
    path = "spec.syncPolicy"
    data = _mapping(raw, path, ctx)
    _warn_unknown(data, _SYNC, path, ctx)
    options = _strings(data, "syncOptions", path, ctx)
    if data.get("automated") is None:
        return SyncPolicy(sync_options=options)
    auto = _mapping(data["automated"], f"{path}.automated", ctx)
    _warn_unknown(auto, _AUTOMATED, f"{path}.automated", ctx)
    where = f"{path}.automated"
    return SyncPolicy(automated=_bool(auto, "enabled", where, ctx, default=True),
                      prune=_bool(auto, "prune", where, ctx),
                      self_heal=_bool(auto, "selfHeal", where, ctx),
                      allow_empty=_bool(auto, "allowEmpty", where, ctx),
                      sync_options=options)


def _ignore_differences(spec: Mapping[str, Any], ctx: _Context) -> tuple[IgnoreRule, ...]:
    """``spec.ignoreDifferences``, each entry parsed into its type here, once."""
    rules = _list(spec, "ignoreDifferences", "spec", ctx)
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            raise ctx.error(f"spec.ignoreDifferences[{i}] must be a mapping")
    try:
        return tuple(IgnoreRule.parse(rule, f"spec.ignoreDifferences[{i}]")
                     for i, rule in enumerate(rules))
    except RuleError as e:
        raise ctx.error(str(e)) from None


# -- app-of-apps and flags ----------------------------------------------------------------

@dataclass(frozen=True)
class AppScan:
    """Everything found in an app-of-apps path, good and bad, each with its file.

    ``apps`` and ``invalid`` map app names to (file, Application) and (file, error): an
    Application we can name but not use (a bad field, a ``path`` outside the repo, a
    duplicate name) is an error *of that app*. ``broken_files`` maps files that could not
    be read at all (invalid YAML, over a bound) to their error: no app name to blame.
    """

    apps: dict[str, tuple[str, Application]] = field(default_factory=dict)
    invalid: dict[str, tuple[str, str]] = field(default_factory=dict)
    broken_files: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # every error, in file order


def load_applications(root: Path, path: str) -> list[Application]:
    """Every Application in ``path`` (a directory, walked recursively, or one file).

    Other documents are ignored; the first problem (see :func:`scan_applications`) is
    raised as a :class:`ConfigError`, which is what a one-shot command wants.
    """
    scan = scan_applications(root, path)
    if scan.problems:
        raise ConfigError(scan.problems[0])
    return [app for _, app in scan.apps.values()]


def scan_applications(root: Path, path: str) -> AppScan:
    """Every Application in ``path``, with the problems kept apart per app and per file.

    What the controller uses: one bad Application must not hide the others. Only a
    missing or escaping ``path`` itself raises.
    """
    root = root.resolve()
    target = _apps_path(root, path)
    files = [target] if target.is_file() else [
        f for f in walk_files(target, recurse=True) if f.name.endswith(MANIFEST_SUFFIXES)]
    scan = AppScan()
    for file in files:
        _scan_file(file, root, scan)
    return scan


def _apps_path(root: Path, path: str) -> Path:
    try:
        target = safe_path(root, path)
        if target.is_dir():
            check_no_escaping_symlinks(root, target)
    except SourceError as e:
        raise ConfigError(f"applications path {path!r}: {e}") from e
    if not target.exists():
        raise ConfigError(f"applications path {path!r} does not exist in the repository")
    return target


def _scan_file(file: Path, root: Path, scan: AppScan) -> None:
    """The Applications of one file of an app-of-apps directory, into ``scan``.

    Stricter than a plain directory, because a file we skip here takes its Applications
    out of the catalog, and the controller then deletes them: YAML that does not decode
    and an ``argoproj.io`` Application of another version make the file broken (its
    apps stay managed, marked invalid), never skipped.
    """
    relative = file.relative_to(root).as_posix() if file.is_relative_to(root) else str(file)
    try:
        docs = file_documents(file, origin=relative)
        if not docs and not file.name.endswith(".json"):
            parse_yaml(read_text(file, origin=relative), origin=relative)  # must decode
    except RenderError as e:
        scan.broken_files[relative] = str(e)
        scan.problems.append(str(e))
        return
    for doc in docs:
        body = doc.body
        if isinstance(body, dict) and body.get("kind") == "ApplicationSet":
            log.warning("%s: ApplicationSets are not supported; ignoring it", doc.where)
        if isinstance(body, dict) and body.get("kind") == "Application" and \
                str(body.get("apiVersion", "")).startswith("argoproj.io/"):
            _scan_application(body, relative, _app_origin(doc, len(docs)), scan)


def _scan_application(body: Mapping[str, Any], file: str, origin: str, scan: AppScan) -> None:
    name = _raw_name(body)
    try:
        app = parse_application(body, origin=origin)
    except ConfigError as e:
        scan.problems.append(str(e))
        if name:  # a good definition elsewhere is ambiguous now: neither is used
            scan.apps.pop(name, None)
            scan.invalid.setdefault(name, (file, str(e)))
        else:
            scan.broken_files.setdefault(file, str(e))
        return
    first = scan.apps.get(app.name)
    if first is not None or app.name in scan.invalid:
        message = f"duplicate Application name {app.name!r}: " \
                  f"{first[0] if first else scan.invalid[app.name][0]} and {origin}"
        scan.problems.append(message)
        scan.apps.pop(app.name, None)
        scan.invalid[app.name] = (file, message)
        return
    scan.apps[app.name] = (file, app)


def _raw_name(body: Mapping[str, Any]) -> str:
    """``metadata.name`` if it is a usable app name, else ``""`` (nothing to blame)."""
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    ok = isinstance(name, str) and len(name) <= 253 and _DNS_SUBDOMAIN.match(name)
    return name if ok and isinstance(name, str) else ""


def _app_origin(doc: Doc, count: int) -> str:
    return doc.origin if count == 1 else f"{doc.origin}:{doc.line} (document {doc.index})"


def application_from_flags(*, name: str, repo_url: str, revision: str = "HEAD",
                           path: str = ".", dest_namespace: str = "default",
                           project: str = "default", helm: HelmSource | None = None,
                           directory: DirectorySource | None = None,
                           kustomize: KustomizeSource | None = None,
                           sync_policy: SyncPolicy | None = None,
                           ignore_differences: Sequence[Mapping[str, Any] | IgnoreRule] = ()
                           ) -> Application:
    """One app from CLI flags (``--repo --revision --path --dest-namespace``)."""
    if not name:
        raise ConfigError("an app built from flags needs a name (--name)")
    if not repo_url:
        raise ConfigError(f"app {name}: --repo is required")
    if Path(path).is_absolute() or posixpath.normpath(path).startswith(".."):
        raise ConfigError(f"app {name}: --path {path!r} must be relative to the repository "
                          "root and stay inside it")
    source = AppSource(repo_url=repo_url, path=path or ".", target_revision=revision or "HEAD",
                       helm=helm, directory=directory, kustomize=kustomize)
    _single_type(source, "source", _Context(f"app {name}"))
    return Application(name=name, source=source, destination=Destination(dest_namespace),
                       project=project, sync_policy=sync_policy or SyncPolicy(),
                       ignore_differences=_flag_rules(name, ignore_differences))


def _flag_rules(name: str, rules: Sequence[Mapping[str, Any] | IgnoreRule]
                ) -> tuple[IgnoreRule, ...]:
    try:
        return tuple(r if isinstance(r, IgnoreRule) else
                     IgnoreRule.parse(dict(r), f"app {name}: ignoreDifferences[{i}]")
                     for i, r in enumerate(rules))
    except RuleError as e:
        raise ConfigError(str(e)) from None
