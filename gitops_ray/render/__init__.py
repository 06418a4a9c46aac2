"""Stage 2, render: turn a checkout into the desired manifests of each app.

Reads Argo CD ``Application`` manifests (app-of-apps), renders plain YAML, Helm charts and
Kustomize, and expands Ray pod shapes. Pure apart from the helm and kustomize processes.
"""
