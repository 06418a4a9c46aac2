"""``render_app``: one Application plus a checkout in, the app's desired objects out.

The steps, each a small function so they can be read (and tested) on their own:

1. resolve ``spec.source.path`` inside the checkout (``safepath``), refusing paths and
   symlinks that escape it, and every symlink the render can reach that does (the
   renderers add what else they reach: a chart's ``file://`` dependencies, the bases
   of a kustomization); a ``chart`` from a Helm repository or OCI registry is the
   checkout itself (the source stage fetched and unpacked it);
2. pick the source type as Argo CD does (``ExplicitType`` then discovery): the one of
   ``helm``/``kustomize``/``directory`` that is set, else a kustomization file means
   Kustomize, else ``Chart.yaml`` means Helm, else a plain directory;
3. render (plain files, ``helm template`` or ``kubectl kustomize``) into documents;
4. validate them into objects (empty documents dropped, lists expanded), at most
   ``limits.MAX_OBJECTS`` of them (every decoded text was bounded before, see ``bounds``);
5. set or clear namespaces like Argo CD's controller (``scope``);
6. refuse two objects with the same group, kind, namespace and name: Argo CD keeps the
   last one with a warning; here it is an error naming both files, because which copy
   wins depends on file order and is never what the author meant;
7. expand Ray pod shapes (``render.shapes``).

Every failure is a :class:`RenderError` (``ConfigError`` for bad Application fields)
prefixed with ``app <name>:``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitops_ray import limits
from gitops_ray.errors import ChildTimedOut, ConfigError, LimitExceeded, RenderError, SourceError
from gitops_ray.render.apps import Application, AppSource
from gitops_ray.render.bounds import app_budget
from gitops_ray.render.documents import Doc, located_manifests
from gitops_ray.render.helm import render_helm
from gitops_ray.render.kustomize import find_kustomization, render_kustomize
from gitops_ray.render.manifests import render_directory
from gitops_ray.render.scope import IsNamespaced, apply_default_namespace
from gitops_ray.render.shapes import ClusterShapes, expand_pod_shapes
from gitops_ray.render.shapes.settings import config_dirs
from gitops_ray.render.tools import RenderTools
from gitops_ray.safepath import check_no_escaping_symlinks, safe_path
from gitops_ray.types import Manifest, ResourceKey

HELM, KUSTOMIZE, DIRECTORY = "Helm", "Kustomize", "Directory"
DEFAULT_KUBE_VERSION = "1.36.3"
"""Helm's ``.Capabilities.KubeVersion`` when no cluster is asked (``render --local``)."""


ClusterFacts = Callable[[], tuple[str, tuple[str, ...]]]
"""The target cluster's version and APIs, as Helm's ``.Capabilities`` report them.

Asked by a Helm render only: a plain directory or Kustomize render does not read them, so
a caller that must ask the API server for them (the controller) asks only for charts.
"""


_TOOLS = RenderTools()


@dataclass(frozen=True)
class _Run:
    """What one render may use: the tools, the cluster's facts, the ``ref:`` checkouts."""

    tools: RenderTools
    facts: ClusterFacts
    refs: Mapping[str, Path] = field(default_factory=dict)  # multi-source ``ref:`` checkouts


def render_app(app: Application, root: Path, *, tools: RenderTools = _TOOLS,
               kube_version: str = DEFAULT_KUBE_VERSION,
               api_versions: Sequence[str] = (), cluster_facts: ClusterFacts | None = None,
               is_namespaced: IsNamespaced | None = None,
               cluster_shapes: ClusterShapes | None = None,
               refs: Mapping[str, Path] | None = None) -> list[Manifest]:
    """The desired objects of ``app`` from the checkout at ``root`` (see module docstring).

    ``cluster_shapes`` are the in-cluster instance-types and patches ConfigMaps, which
    the repo's ``.gitops-ray/`` files override (see ``render.shapes.expand``).

    ``is_namespaced(apiVersion, kind)`` comes from the caller's discovery; without it a
    table of well-known cluster-scoped kinds is used. ``kube_version`` and
    ``api_versions`` are what Helm's ``.Capabilities`` report, or ``cluster_facts``
    (asked only if the app is a chart); the controller and the cluster-backed commands
    take them from the target cluster, as Argo CD does. ``tools`` are the helm and kubectl
    binaries and the hosts a Helm ``valueFiles`` URL may name (``render.valueFileHosts``).
    """
    facts = cluster_facts or (lambda: (kube_version, tuple(api_versions)))
    run = _Run(tools, facts, dict(refs or {}))
    try:
        with app_budget():
            return _render(app, root.resolve(), run, is_namespaced, cluster_shapes)
    except LimitExceeded as e:
        raise type(e)(f"app {app.name}: {e}") from e
    except ChildTimedOut as e:
        raise ChildTimedOut(f"app {app.name}: {e}") from e
    except (SourceError, RenderError) as e:
        raise RenderError(f"app {app.name}: {e}") from e
    except ConfigError as e:
        raise ConfigError(f"app {app.name}: {e}") from e


def _render(app: Application, root: Path, run: _Run, is_namespaced: IsNamespaced | None,
            cluster_shapes: ClusterShapes | None) -> list[Manifest]:
    # A chart from a Helm repository or registry: the source stage hands over its directory.
    app_dir = root if app.source.chart else app_directory(root, app.source.path)
    check_no_escaping_symlinks(root, app_dir, *config_dirs(root, app_dir))
    docs = RENDERERS[source_type(app.source, app_dir)](app, root, app_dir, run)
    located = located_manifests(docs)
    if len(located) > limits.MAX_OBJECTS:
        raise LimitExceeded(f"renders {len(located):,} objects, over the limit of "
                            f"{limits.MAX_OBJECTS:,} per app (gitops_ray.limits)")
    manifests = apply_default_namespace([obj for _, obj in located],
                                        app.destination.namespace, lookup=is_namespaced)
    check_unique([where for where, _ in located], manifests)
    return expand_pod_shapes(manifests, repo_root=root, app_dir=app_dir,
                             cluster=cluster_shapes)


def app_directory(root: Path, path: str) -> Path:
    """The app's directory inside ``root``; it must exist and be a directory."""
    if Path(path).is_absolute():
        raise RenderError(f"spec.source.path {path!r} must be relative to the repository root")
    directory = safe_path(root, path or ".")
    if not directory.exists():
        raise RenderError(f"spec.source.path {path!r} does not exist in the repository")
    if not directory.is_dir():
        raise RenderError(f"spec.source.path {path!r} is not a directory")
    return directory


def source_type(source: AppSource, app_dir: Path) -> str:
    """Helm, Kustomize or Directory, decided as Argo CD decides it (a ``chart`` is Helm)."""
    if source.chart:
        return HELM
    explicit = [kind for kind, options in ((KUSTOMIZE, source.kustomize), (HELM, source.helm),
                                           (DIRECTORY, source.directory)) if options is not None]
    if len(explicit) > 1:
        raise ConfigError(f"multiple application sources defined: {','.join(explicit)}")
    if explicit:
        return explicit[0]
    if find_kustomization(app_dir) is not None:
        return KUSTOMIZE
    return HELM if (app_dir / "Chart.yaml").is_file() else DIRECTORY


def check_unique(origins: Sequence[str], manifests: Sequence[Manifest]) -> None:
    """Raise, naming both places, if two objects share group, kind, namespace and name."""
    seen: dict[ResourceKey, str] = {}
    for where, obj in zip(origins, manifests, strict=True):
        key = ResourceKey.of(obj)
        if not key.name:  # a hook's generateName: its operation names it (sync.hooks)
            key = dataclasses.replace(key, name=str(obj["metadata"].get("generateName")))
        if key in seen:
            raise RenderError(f"{key} is defined twice: {seen[key]} and {where}")
        seen[key] = where


def _directory(app: Application, root: Path, app_dir: Path, run: _Run) -> list[Doc]:
    del run
    return render_directory(app_dir, root, app.source.directory)


def _helm(app: Application, root: Path, app_dir: Path, run: _Run) -> list[Doc]:
    kube_version, api_versions = run.facts()
    return render_helm(app, repo_root=root, app_dir=app_dir, helm_bin=run.tools.helm_bin,
                       kube_version=kube_version, api_versions=api_versions,
                       value_file_hosts=run.tools.value_file_hosts, refs=run.refs)


def _kustomize(app: Application, root: Path, app_dir: Path, run: _Run) -> list[Doc]:
    return render_kustomize(app, repo_root=root, app_dir=app_dir,
                            kubectl_bin=run.tools.kubectl_bin)


RENDERERS: dict[str, Callable[[Application, Path, Path, _Run], list[Doc]]] = {
    DIRECTORY: _directory, HELM: _helm, KUSTOMIZE: _kustomize,
}
