"""The app model: an Argo CD ``Application`` (``argoproj.io/v1alpha1``), as we honour it.

Users keep Argo CD ``Application`` manifests in their config repo, so the same files work
for Argo CD and for gitops-ray. Only the fields we act on are modelled; anything else is
reported as a warning by the parser (see ``parse_application``) rather than ignored
silently. ``ignoreDifferences`` entries and ``syncOptions`` are parsed here, once, into the
shared vocabulary's types (:class:`~gitops_ray.types.IgnoreRule`,
:class:`~gitops_ray.types.SyncOptions`): ``gitops_ray.diff`` compiles the rules, so the
diff stage does not depend on this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitops_ray.types import IgnoreRule, SyncOption, SyncOptions


@dataclass(frozen=True)
class HelmSource:
    """``spec.source.helm`` (a chart stored in the repo, rendered with ``helm template``)."""

    value_files: tuple[str, ...] = ()
    values: str = ""
    values_object: dict[str, Any] | None = None
    parameters: tuple[tuple[str, str, bool], ...] = ()  # (name, value, forceString)
    release_name: str = ""
    skip_crds: bool = False
    namespace: str = ""  # overrides destination.namespace for ``--namespace``
    ignore_missing_value_files: bool = False
    skip_schema_validation: bool = False
    skip_tests: bool = False
    kube_version: str = ""  # overrides the cluster's version for ``--kube-version``
    api_versions: tuple[str, ...] = ()  # overrides the cluster's for ``--api-versions``


@dataclass(frozen=True)
class DirectorySource:
    """``spec.source.directory``."""

    recurse: bool = False
    include: str = ""
    exclude: str = ""
    disable_extension_filter: bool = False  # Argo CD >= 3.6: any file include/exclude match


@dataclass(frozen=True)
class KustomizeSource:
    """``spec.source.kustomize`` (presence selects Kustomize even without the file)."""

    name_prefix: str = ""
    name_suffix: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class AppSource:
    """``spec.source``: where the manifests come from."""

    repo_url: str
    path: str = "."
    target_revision: str = "HEAD"
    chart: str = ""  # a chart of a Helm repository / OCI registry (repo_url); path unused
    helm: HelmSource | None = None
    directory: DirectorySource | None = None
    kustomize: KustomizeSource | None = None
    ref: str = ""  # multi-source: other sources' ``$ref/...`` value files read this one

    @property
    def ref_only(self) -> bool:
        """A ``ref:`` source with neither ``path`` nor ``chart``: read, never rendered."""
        return bool(self.ref) and not self.path and not self.chart


REVISIONS_SEPARATOR = ","
"""Joins a multi-source app's revisions (one per source, in order) into its one revision:
what records, history and rollback keep; Argo CD's ``revisions`` lists are its parts."""


def short_revision(revision: str, width: int = 12) -> str:
    """A revision as shown: commit SHAs (and digests) cut to ``width``, versions whole.

    Each part of a multi-source app's joined revision is cut on its own.
    """
    def cut(part: str) -> str:
        digest = part.startswith("sha256:")
        body = part.removeprefix("sha256:")
        if len(body) >= 32 and all(c in "0123456789abcdef" for c in body.lower()):
            return ("sha256:" if digest else "") + body[:width]
        return part
    return REVISIONS_SEPARATOR.join(cut(p) for p in revision.split(REVISIONS_SEPARATOR))


def split_revisions(revision: str, count: int) -> tuple[str, ...] | None:
    """A multi-source app's joined revision as one per source; ``None`` if it is not one."""
    parts = tuple(revision.split(REVISIONS_SEPARATOR)) if revision else ()
    return parts if len(parts) == count and all(parts) else None


@dataclass(frozen=True)
class Destination:
    """``spec.destination``; another ``server``/``name`` resolves by its cluster Secret."""

    namespace: str = ""
    server: str = ""
    name: str = ""


@dataclass(frozen=True)
class SyncPolicy:
    """``spec.syncPolicy``: automation flags and ``syncOptions`` (exact strings, as Argo)."""

    automated: bool = False
    prune: bool = False
    self_heal: bool = False
    allow_empty: bool = False
    sync_options: tuple[str, ...] = ()
    options: SyncOptions = field(init=False, compare=False, repr=False)
    """``sync_options`` parsed (once, when the policy is made)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", SyncOptions.parse(self.sync_options))

    def has_option(self, option: SyncOption | str) -> bool:
        return self.options.has(option)

    @property
    def summary(self) -> str:
        """The SYNCPOLICY column of ``argocd app list``: Manual, Auto or Auto-Prune."""
        if not self.automated:
            return "Manual"
        return "Auto-Prune" if self.prune else "Auto"


@dataclass(frozen=True)
class Application:
    """One app: a source rendered into one destination namespace."""

    name: str
    source: AppSource
    destination: Destination = Destination()
    namespace: str = ""  # where the Application object itself lives
    project: str = "default"
    ignore_differences: tuple[IgnoreRule, ...] = ()  # parsed once (types.IgnoreRule)
    sync_policy: SyncPolicy = SyncPolicy()
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()  # resources-finalizer.argocd.argoproj.io: cascade delete
    warnings: tuple[str, ...] = ()
    sources: tuple[AppSource, ...] = ()  # ``spec.sources`` of two or more; source is [0]

    @property
    def all_sources(self) -> tuple[AppSource, ...]:
        """Every source: ``spec.sources``, or ``spec.source`` alone."""
        return self.sources or (self.source,)
