"""``gitops-ray diff --argocd-app NS/NAME``: preview handing an Argo CD Application over.

Before a team adds the two annotations, it wants to know what gitops-ray would do with
the Application: what its first sync would change in the cluster (the ordinary diff,
with Argo CD's settings and the app's AppProject, as the controller with ``--argocd``
compares it), and which of its fields gitops-ray would not honour. The latter is the
parser's own list (:func:`gitops_ray.render.applications.parse_application`'s warnings:
``syncPolicy.retry``, ``managedNamespaceMetadata``, ``sourceHydrator``, Jsonnet,
``helm.fileParameters``, kustomize ``images``, unknown fields, ...), so the preview and
the controller can never disagree about it. Each such field changes what the app does
after the hand-over: the command then exits 2.

The Application is read with one GET; nothing is written, and it does not matter
whether it is handed over already.
"""

from __future__ import annotations

from typing import Any

from gitops_ray.cli.common import Selection, argocd_namespace
from gitops_ray.errors import ConfigError
from gitops_ray.kube import Kube
from gitops_ray.reconcile.argostatus import app_name, cluster_application
from gitops_ray.render.applications import API_VERSION
from gitops_ray.render.apps import Application


def parse_ref(text: str) -> tuple[str, str]:
    """``NS/NAME`` (``ConfigError`` naming the expected form)."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ConfigError(f"--argocd-app {text!r}: expected NAMESPACE/NAME")
    return namespace, name


def preview_options(opts: dict[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
    """The options with ``--argocd`` on: Argo CD's namespace is the first app's, if unset."""
    first = parse_ref(refs[0])[0]
    return {**opts, "argocd": True, "argocd_namespace": argocd_namespace(opts) or first}


def previewed(kube: Kube, refs: tuple[str, ...], opts: dict[str, Any]) -> Selection:
    """The Applications ``refs`` names, read and parsed as the controller takes them over."""
    namespace = argocd_namespace(opts)
    apps: list[Application] = []
    for ref in refs:
        ns, name = parse_ref(ref)
        obj = kube.get(API_VERSION, "Application", name=name, namespace=ns)
        if obj is None:
            raise ConfigError(f"Application {ns}/{name} not found")
        apps.append(cluster_application(obj, app_name(ns, name, argocd_namespace=namespace)))
    return Selection(apps)


def not_honoured(app: Application) -> list[str]:
    """The fields of ``app`` gitops-ray would not honour (each changes its behaviour)."""
    return list(app.warnings)
