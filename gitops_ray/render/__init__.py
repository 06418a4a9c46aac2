"""Stage 2, render: turn a checkout into the desired manifests of each app.

Reads Argo CD ``Application`` manifests (app-of-apps), renders plain YAML, Helm charts and
Kustomize, and expands Ray pod shapes. Pure apart from the helm and kustomize processes.

Modules: ``apps`` (the model), ``applications`` (parsing Applications, app-of-apps, flags),
``pipeline`` (``render_app``), ``manifests`` (plain directories), ``helm``, ``kustomize``,
``documents`` (YAML/JSON decoding with file and line), ``scope`` (default namespace),
``globs`` (include/exclude), ``tools`` (sandboxed subprocesses), ``shapes`` (pod shapes),
``bounds`` (every YAML/JSON text measured against ``gitops_ray.limits`` before it is
built), ``notes`` (problems a render tolerated, so no prune follows it), ``inputs`` (the
digest of what a render reads, which the render cache is keyed by), ``memo`` (decoded
texts remembered by content, so a re-render decodes only the files that changed).
"""

from gitops_ray.render.applications import (
    AppScan,
    application_from_flags,
    load_applications,
    parse_application,
    scan_applications,
)
from gitops_ray.render.apps import (
    Application,
    AppSource,
    Destination,
    DirectorySource,
    HelmSource,
    KustomizeSource,
    SyncPolicy,
)
from gitops_ray.render.inputs import Inputs, input_digest, render_inputs, touches
from gitops_ray.render.pipeline import render_app, source_type

__all__ = [
    "AppScan", "AppSource", "Application", "Destination", "DirectorySource", "HelmSource",
    "Inputs", "KustomizeSource", "SyncPolicy", "application_from_flags", "input_digest",
    "load_applications", "parse_application", "render_app", "render_inputs",
    "scan_applications", "source_type", "touches",
]
