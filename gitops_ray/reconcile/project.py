"""Argo CD AppProject rules for the Applications we reconcile, with Argo CD's messages.

Why here: once gitops-ray syncs in-cluster Argo CD Applications in Argo CD's place, the
project is the admin's fence around what an app may deploy, and a sync that ignored it
would let any app author write anything gitops-ray's ServiceAccount may. So the rules
are Argo CD v3.2.11's, ported function by function from
``pkg/apis/application/v1alpha1/app_project_types.go`` (``IsSourcePermitted``,
``isDestinationMatched``, ``IsGroupKindPermitted``, ``IsAppNamespacePermitted``) and
``util/argo/argo.go`` (``ValidatePermissions``, the condition messages), so an app that
Argo CD would refuse is refused here with the same words:

* ``sourceRepos``: globs with ``/`` as separator, on Argo CD's normalized git URL;
  ``!pattern`` denies. ``destinations``: ``server``/``name`` and ``namespace`` globs, ``!``
  denies. ``sourceNamespaces`` (only for Applications outside Argo CD's namespace): globs,
  or ``/regex/``. A miss is an ``InvalidSpecError`` condition (a forbidden source namespace
  is an ``UnknownError``, as Argo CD's ``projectErrorToCondition`` makes it), and the app
  is not compared or synced at all.
* ``cluster/namespaceResourceWhitelist`` and ``...Blacklist``: Go ``filepath.Match``
  patterns on group and kind. An absent cluster whitelist forbids every cluster-scoped
  kind; an absent (``null``) namespace whitelist allows every namespaced kind, but an
  explicit empty list (``[]``) allows none, exactly as Go's ``nil`` versus empty slice.
  A forbidden desired object fails the sync ("resource g:K is not permitted in project
  p"), and a forbidden live object is never pruned (Argo CD drops it from the live state).

**Destination clusters.** A destination ``server: https://kubernetes.default.svc`` or
``name: in-cluster`` (or neither, as the git-only Applications are read) is the
controller's own cluster, matched against the project as Argo CD's in-cluster entry (that
server *and* that name). Another cluster is found by a :data:`ResolveCluster` (among
the cluster Secrets, :mod:`gitops_ray.reconcile.destinations`): by Secret ``name`` for
``destination.name``, by ``server`` for ``destination.server``, with Argo CD's messages
when there is none ("there are no clusters with this name: far"). Without one, only our
own cluster exists and any other is an
``InvalidSpecError``: an app synced into the wrong cluster is worse than one not synced.
A cluster whose Secret lists ``namespaces`` refuses a destination namespace outside them
(a condition), and any object outside them, or cluster-scoped unless ``clusterResources``
is ``"true"`` (gitops-engine's sync messages, as forbidden objects: the sync fails).

A broken project (a field of the wrong type, a pattern that does not compile) is an
``UnknownError`` condition naming the field: the app is not synced and nothing is pruned.
Not modelled: Argo CD's global projects, project-scoped repository and cluster Secrets,
``permitOnlyProjectScopedClusters`` and roles. Sync windows are parsed here and
evaluated in :mod:`gitops_ray.reconcile.windows`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gitops_ray.errors import ConfigError
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.kube import Kube, KubeError, UnknownKind
from gitops_ray.reconcile.windows import SyncWindow, parse_windows
from gitops_ray.redact import redact
from gitops_ray.render.applications import IN_CLUSTER_SERVER
from gitops_ray.render.apps import Application, Destination
from gitops_ray.types import AppCondition, ConditionType, Manifest, ResourceKey

IN_CLUSTER_NAME = "in-cluster"
APP_PROJECT = ("argoproj.io/v1alpha1", "AppProject")
_LISTS = ("sourceRepos", "sourceNamespaces")
_GROUP_KINDS = ("clusterResourceWhitelist", "clusterResourceBlacklist",
                "namespaceResourceWhitelist", "namespaceResourceBlacklist")


@dataclass(frozen=True)
class GroupKind:
    """One entry of a resource white- or blacklist (Go ``filepath.Match`` patterns)."""

    group: str
    kind: str


@dataclass(frozen=True)
class ProjectDestination:
    """One entry of ``spec.destinations`` (globs; a leading ``!`` denies)."""

    server: str = ""
    name: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class Cluster:
    """A destination cluster as the rules see it (its Secret's fields, no credentials)."""

    name: str
    server: str
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    cluster_resources: bool = True  # cluster-scoped kinds may be managed


IN_CLUSTER = Cluster(IN_CLUSTER_NAME, IN_CLUSTER_SERVER)
ResolveCluster = Callable[[Destination], "Cluster | str"]
"""The cluster a destination names, or Argo CD's message saying there is none."""


def in_cluster_only(dest: Destination) -> Cluster | str:
    """The resolver without cluster Secrets: our own cluster, nothing else."""
    if dest.server in ("", IN_CLUSTER_SERVER) and dest.name in ("", IN_CLUSTER_NAME):
        return IN_CLUSTER
    named = f"name '{dest.name}'" if dest.name else f"server '{redact(dest.server)}'"
    return (f"application destination {named} is not the cluster gitops-ray syncs to "
            f"(server '{IN_CLUSTER_SERVER}', name '{IN_CLUSTER_NAME}'): not synced")


@dataclass(frozen=True)
class Project:
    """An ``argoproj.io/v1alpha1`` AppProject, the parts that decide what an app may do."""

    name: str
    source_repos: tuple[str, ...] = ()
    destinations: tuple[ProjectDestination, ...] = ()
    source_namespaces: tuple[str, ...] = ()
    cluster_whitelist: tuple[GroupKind, ...] = ()
    cluster_blacklist: tuple[GroupKind, ...] = ()
    namespace_whitelist: tuple[GroupKind, ...] | None = None  # None: every kind
    namespace_blacklist: tuple[GroupKind, ...] = ()
    sync_windows: tuple[SyncWindow, ...] = ()

    @classmethod
    def parse(cls, manifest: Manifest) -> Project:
        """The project in ``manifest``; :class:`ConfigError` naming the field if malformed."""
        meta = _mapping(manifest.get("metadata"), "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError("AppProject: metadata.name must be a non-empty string")
        where = f"AppProject '{name}'"
        spec = _mapping(manifest.get("spec"), f"{where}: spec")
        lists = {key: _strings(spec.get(key), f"{where}: spec.{key}") for key in _LISTS}
        kinds = {key: _group_kinds(spec.get(key), f"{where}: spec.{key}")
                 for key in _GROUP_KINDS}
        return cls(name, lists["sourceRepos"],
                   _destinations(spec.get("destinations"), f"{where}: spec.destinations"),
                   lists["sourceNamespaces"],
                   kinds["clusterResourceWhitelist"] or (),
                   kinds["clusterResourceBlacklist"] or (),
                   kinds["namespaceResourceWhitelist"],
                   kinds["namespaceResourceBlacklist"] or (),
                   parse_windows(spec.get("syncWindows"), f"{where}: spec.syncWindows"))


class Projects(Protocol):
    """Where AppProjects are read: Argo CD's namespace (``argocd.namespace``)."""

    namespace: str

    def get(self, name: str) -> Manifest | None:
        """The AppProject ``name``, or ``None`` when there is none (or no AppProject CRD)."""
        ...


class ProjectsFrom:
    """AppProjects of ``namespace`` read through ``read(namespace, name)``.

    E.g. the controller's watch cache (``NamedObjects.get``/``KindWatch.get`` on
    ``argoproj.io/v1alpha1`` ``AppProject``), so a comparison costs no request. Without
    the AppProject CRD there are no projects (Argo CD's "does not exist" condition).
    """

    def __init__(self, read: Callable[[str, str], Manifest | None], namespace: str) -> None:
        self.read = read
        self.namespace = namespace

    def get(self, name: str) -> Manifest | None:
        try:
            return self.read(self.namespace, name)
        except UnknownKind:  # Argo CD's CRDs are not installed: no project exists
            return None


class KubeProjects(ProjectsFrom):
    """AppProjects read with a GET each time (the one-shot commands)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(lambda ns, name: kube.get(*APP_PROJECT, name=name, namespace=ns),
                         namespace)


# -- the app's conditions -----------------------------------------------------------------

def load(app: Application, projects: Projects, *, check_source: bool = True,
         resolve: ResolveCluster = in_cluster_only
         ) -> tuple[Project | None, tuple[AppCondition, ...]]:
    """The app's project and the conditions that stop it (``()``: it may be synced).

    Never raises: a project that cannot be read or parsed is an ``UnknownError``.
    ``check_source``, ``resolve``: as :func:`app_conditions`.
    """
    try:
        manifest = projects.get(app.project)
    except KubeError as e:
        return None, (_unknown(f"could not retrieve AppProject '{app.project}': {e}"),)
    if manifest is None:
        return None, app_conditions(app, None, argocd_namespace=projects.namespace)
    try:
        project = Project.parse(manifest)
    except ConfigError as e:
        return None, (_unknown(str(e)),)
    return project, app_conditions(app, project, argocd_namespace=projects.namespace,
                                   check_source=check_source, resolve=resolve)


def app_conditions(app: Application, project: Project | None, *, argocd_namespace: str,
                   check_source: bool = True, resolve: ResolveCluster = in_cluster_only
                   ) -> tuple[AppCondition, ...]:
    """What Argo CD's ``refreshAppConditions`` says about ``app`` under ``project``.

    ``None``: the project does not exist. ``check_source=False`` skips ``sourceRepos``
    (a render of a local directory has no repository to check). ``resolve``: the
    destination clusters there are (see the module docstring).
    """
    if project is None:
        return (_invalid(f"Application referencing project {app.project} which does not "
                         "exist"),)
    if not namespace_permitted(project, app.namespace, argocd_namespace=argocd_namespace):
        return (_unknown(f"application '{app.name}' in namespace '{app.namespace}' is not "
                         f"permitted to use project '{project.name}'"),)
    out = []
    for source in app.all_sources if check_source else ():  # every source, any kind
        if not source_permitted(project, source.repo_url):
            out.append(_invalid(f"application repo {redact(source.repo_url)} is not "
                                f"permitted in project '{project.name}'"))
    return (*out, *_destination_conditions(app, project, resolve))


def cluster_conditions(app: Application, resolve: ResolveCluster = in_cluster_only
                       ) -> tuple[AppCondition, ...]:
    """Why ``app``'s destination cannot be synced to (``()``: it can).

    Checked with or without AppProjects: the destination must resolve to a known
    cluster (``resolve``), and its namespace be one the cluster's Secret allows.
    """
    dest = app.destination
    if dest.server and dest.name:  # the parser refuses it; a hand-built app may not
        return (_invalid("application destination can't have both name and server defined: "
                         f"{dest.name} {redact(dest.server)}"),)
    cluster = resolve(dest)
    if isinstance(cluster, str):
        return (_invalid(cluster),)
    if cluster.namespaces and dest.namespace and dest.namespace not in cluster.namespaces:
        return (_invalid(f"application destination namespace '{dest.namespace}' is not "
                         f"managed by cluster '{cluster.name or cluster.server}' (its Secret's "
                         f"namespaces: {','.join(cluster.namespaces)})"),)
    return ()


def cluster_forbidden(cluster: Cluster, key: ResourceKey, namespaced: bool) -> str:
    """gitops-engine's message for an object its cluster's Secret does not allow; or ``""``."""
    if not cluster.namespaces:
        return ""
    if not namespaced:
        return "" if cluster.cluster_resources else \
            f'Cluster level {key.kind} "{key.name}" can not be managed when in namespaced mode'
    if key.namespace not in cluster.namespaces:
        return f'namespace "{key.namespace}" for {key.kind} "{key.name}" is not managed'
    return ""


def _destination_conditions(app: Application, project: Project, resolve: ResolveCluster
                            ) -> tuple[AppCondition, ...]:
    dest = app.destination
    remote = cluster_conditions(app, resolve)
    if remote:
        return remote
    cluster = resolve(dest)
    assert not isinstance(cluster, str)  # cluster_conditions said so
    if destination_permitted(project, dest.namespace, server=cluster.server, name=cluster.name):
        return ()
    server = dest.name or dest.server or IN_CLUSTER_SERVER  # as the app names it
    return (_invalid(f"application destination server '{server}' and namespace "
                     f"'{dest.namespace}' do not match any of the allowed destinations in "
                     f"project '{project.name}'"),)


def _invalid(message: str) -> AppCondition:
    return AppCondition(ConditionType.INVALID_SPEC, message)


def _unknown(message: str) -> AppCondition:
    return AppCondition(ConditionType.UNKNOWN, message)


def stops_sync(conditions: Iterable[AppCondition]) -> tuple[AppCondition, ...]:
    """The conditions a sync refuses to run with (Argo CD: spec errors, project errors)."""
    return tuple(c for c in conditions
                 if c.type in (ConditionType.INVALID_SPEC, ConditionType.UNKNOWN))


def format_conditions(conditions: Iterable[AppCondition]) -> str:
    """Argo CD's ``FormatAppConditions``: ``Type: message`` joined by ``;``."""
    return ";".join(f"{c.type.value}: {c.message}" for c in conditions)


# -- the rules ----------------------------------------------------------------------------

def namespace_permitted(project: Project, app_namespace: str, *, argocd_namespace: str) -> bool:
    """``IsAppNamespacePermitted``: Argo CD's own namespace always is."""
    if app_namespace in ("", argocd_namespace):
        return True
    return any(_in_list(pattern, app_namespace) for pattern in project.source_namespaces)


def _in_list(pattern: str, value: str) -> bool:
    """``glob.MatchStringInList(..., REGEXP)``: ``/regex/`` searches, else a glob."""
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        try:
            if re.search(pattern[1:-1], value):
                return True
        except re.error:
            pass  # Argo CD logs it and falls back to the glob, which fails as well
    return _glob(pattern, value)


def source_permitted(project: Project, repo_url: str) -> bool:
    """``IsSourcePermitted``: a ``!`` entry that does not match denies outright."""
    source = normalize_git_url(repo_url)
    matched_any = False
    for entry in project.source_repos:
        pattern = ("!" + normalize_git_url(entry[1:]) if entry.startswith("!")
                   else normalize_git_url(entry))
        if _glob_match(pattern, source, separators="/"):
            matched_any = True
        elif pattern.startswith("!"):
            return False
    return matched_any


def destination_permitted(project: Project, namespace: str, *, server: str = IN_CLUSTER_SERVER,
                          name: str = IN_CLUSTER_NAME) -> bool:
    """``isDestinationMatched`` for ``namespace`` of a cluster (ours by default)."""
    matched_any = False
    for item in project.destinations:
        name_ok = name != "" and _glob_match(item.name, name)
        server_ok = server != "" and _glob_match(item.server, server)
        namespace_ok = _glob_match(item.namespace, namespace)
        if (server_ok or name_ok) and namespace_ok:
            matched_any = True
        elif (not name_ok and _denies(item.name)) or \
                (not server_ok and _denies(item.server) and namespace_ok):
            return False  # Go: `a || b && c`, and this is what it means
        elif not namespace_ok and _denies(item.namespace) and server_ok:
            return False
    return matched_any


def resource_permitted(project: Project, group: str, kind: str, namespaced: bool) -> bool:
    """``IsGroupKindPermitted`` (see the module docstring for the defaults)."""
    if namespaced:
        whitelist = project.namespace_whitelist
        listed = whitelist is None or _listed(group, kind, whitelist)
        return listed and not _listed(group, kind, project.namespace_blacklist)
    return _listed(group, kind, project.cluster_whitelist) and \
        not _listed(group, kind, project.cluster_blacklist)


def forbidden_reason(project: Project, key: ResourceKey, namespaced: bool,
                     cluster: Cluster = IN_CLUSTER) -> str:
    """Argo CD's sync message for an object the project forbids; ``""`` if it may be synced.

    The permission check of Argo CD's sync (``controller/sync.go``): the kind, then the
    namespace of a namespaced object against the project's destinations (on ``cluster``).
    """
    if not resource_permitted(project, key.group, key.kind, namespaced):
        return f"resource {key.group}:{key.kind} is not permitted in project {project.name}"
    if namespaced and not destination_permitted(project, key.namespace, server=cluster.server,
                                                name=cluster.name):
        return f"namespace {key.namespace} is not permitted in project '{project.name}'"
    return ""


def forbidden_resources(project: Project | None, keys: Iterable[tuple[ResourceKey, bool]],
                        cluster: Cluster = IN_CLUSTER) -> dict[ResourceKey, str]:
    """The objects of a desired set (``(key, namespaced)`` pairs) forbidden.

    By the project (if any) or by the destination cluster's Secret.
    """
    out = {}
    for key, namespaced in keys:
        reason = cluster_forbidden(cluster, key, namespaced) or (
            forbidden_reason(project, key, namespaced, cluster) if project else "")
        if reason:
            out[key] = reason
    return out


def live_permitted(project: Project, key: ResourceKey, cluster: Cluster = IN_CLUSTER) -> bool:
    """``IsLiveResourcePermitted``: a live object is namespaced when it has a namespace.

    A live object that is not is invisible to Argo CD: not compared, never pruned.
    """
    return not live_forbidden_reason(project, key, cluster)


def live_forbidden_reason(project: Project, key: ResourceKey,
                          cluster: Cluster = IN_CLUSTER) -> str:
    """:func:`forbidden_reason` of a live object on ``cluster`` (``""``: permitted)."""
    return forbidden_reason(project, key, key.namespace != "", cluster)


def normalize_git_url(repo: str) -> str:
    """Argo CD's ``git.NormalizeGitURL`` for comparing URLs (lower case, no ``.git``).

    Scp-like SSH addresses (``git@host:org/repo``) become ``git@host/org/repo``. Go's
    ``url.Parse``/``String`` round trip is taken as the identity (it only differs on
    percent-encoding corner cases).
    """
    repo = repo.strip().lower()
    if _SSH_URL.match(repo) and not repo.startswith("ssh://"):
        repo = "ssh://" + repo.replace(":", "/", 1)
    repo = repo.removesuffix(".git")
    return repo.removeprefix("ssh://")


_SSH_URL = re.compile(r"^(ssh://)?([^/:]*?)@[^@]+$")


# -- matching -----------------------------------------------------------------------------

def _denies(pattern: str) -> bool:
    return pattern.startswith("!")


def _glob_match(pattern: str, value: str, *, separators: str = "") -> bool:
    """Argo CD's ``globMatch`` with negation allowed."""
    if _denies(pattern):
        return not _glob(pattern[1:], value, separators)
    return pattern == "*" or _glob(pattern, value, separators)


def _glob(pattern: str, value: str, separators: str = "") -> bool:
    try:
        return compile_glob(pattern, separators)(value)
    except GlobError:  # Argo CD logs it: no match (Project.parse has reported it)
        return False


def _listed(group: str, kind: str, entries: Sequence[GroupKind]) -> bool:
    """``isResourceInList``: both patterns match (``filepath.Match``)."""
    return any(_path_match(e.kind, kind) and _path_match(e.group, group) for e in entries)


def _path_match(pattern: str, value: str) -> bool:
    try:
        return _path_regex(pattern).fullmatch(value) is not None
    except ValueError:
        return False


def _path_regex(pattern: str) -> re.Pattern[str]:
    """Go's ``path/filepath.Match`` syntax as a regex; :class:`ValueError` when malformed."""
    out, pos = [], 0
    while pos < len(pattern):
        char = pattern[pos]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            regex, pos = _path_class(pattern, pos + 1)
            out.append(regex)
            continue
        elif char == "\\":
            pos += 1
            if pos >= len(pattern):
                raise ValueError("trailing backslash")
            out.append(re.escape(pattern[pos]))
        else:
            out.append(re.escape(char))
        pos += 1
    return re.compile("".join(out))


def _path_class(pattern: str, pos: int) -> tuple[str, int]:
    """A ``[...]`` class starting after ``[`` (``^`` negates, ``a-z`` ranges)."""
    negate = pos < len(pattern) and pattern[pos] == "^"
    pos += negate
    parts: list[str] = []
    while True:
        if pos >= len(pattern):
            raise ValueError("unclosed '['")
        if pattern[pos] == "]" and parts:
            return f"[{'^' if negate else ''}{''.join(parts)}]", pos + 1
        low, pos = _class_char(pattern, pos)
        if pos < len(pattern) and pattern[pos] == "-":
            high, pos = _class_char(pattern, pos + 1)
            parts.append(f"{re.escape(low)}-{re.escape(high)}")
        else:
            parts.append(re.escape(low))


def _class_char(pattern: str, pos: int) -> tuple[str, int]:
    if pos >= len(pattern) or pattern[pos] in "-]":
        raise ValueError("bad character class")
    if pattern[pos] == "\\":
        pos += 1
        if pos >= len(pattern):
            raise ValueError("trailing backslash")
    return pattern[pos], pos + 1


# -- parsing ------------------------------------------------------------------------------

def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a mapping, not {type(value).__name__}")
    return value


def _items(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list, not {type(value).__name__}")
    return value


def _string(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string, not {type(value).__name__}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    out = tuple(_string(v, f"{where}[{i}]") for i, v in enumerate(_items(value, where)))
    for i, pattern in enumerate(out):
        _check_glob(pattern.removeprefix("!"), f"{where}[{i}]")
    return out


def _destinations(value: object, where: str) -> tuple[ProjectDestination, ...]:
    out = []
    for i, raw in enumerate(_items(value, where)):
        item = _mapping(raw, f"{where}[{i}]")
        fields = {key: _string(item.get(key), f"{where}[{i}].{key}")
                  for key in ("server", "name", "namespace")}
        for key, pattern in fields.items():
            _check_glob(pattern.removeprefix("!"), f"{where}[{i}].{key}")
        out.append(ProjectDestination(**fields))
    return tuple(out)


def _group_kinds(value: object, where: str) -> tuple[GroupKind, ...] | None:
    if value is None:
        return None
    out = []
    for i, raw in enumerate(_items(value, where)):
        item = _mapping(raw, f"{where}[{i}]")
        entry = GroupKind(_string(item.get("group"), f"{where}[{i}].group"),
                          _string(item.get("kind"), f"{where}[{i}].kind"))
        for field, pattern in (("group", entry.group), ("kind", entry.kind)):
            try:
                _path_regex(pattern)
            except ValueError as e:
                raise ConfigError(f"{where}[{i}].{field}: not a valid pattern ({e})") from e
        out.append(entry)
    return tuple(out)


def _check_glob(pattern: str, where: str) -> None:
    if pattern.startswith("/") and pattern.endswith("/") and len(pattern) > 1:
        return  # a sourceNamespaces regex: Argo CD tolerates one that does not compile
    try:
        compile_glob(pattern)
    except GlobError as e:  # its message quotes the pattern: the field is enough
        raise ConfigError(f"{where}: not a valid glob") from e
