"""An app-of-apps directory never loses an Application silently: what would be skipped in
a plain manifest directory is an error here (the controller deletes apps that vanish)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.render import load_applications


def write(root: Path, text: str) -> None:
    (root / "apps").mkdir(parents=True, exist_ok=True)
    (root / "apps" / "a.yaml").write_text(text)


def test_undecodable_yaml_is_an_error_even_if_it_does_not_look_like_a_manifest(
        tmp_path: Path) -> None:
    write(tmp_path, "apiVersion: argoproj.io/v1alpha1\nkind: [\n")
    with pytest.raises(ConfigError, match=r"apps/a\.yaml"):
        load_applications(tmp_path, "apps")


def test_an_argo_application_of_another_version_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "apiVersion: argoproj.io/v1alpha2\nkind: Application\n"
                    "metadata: {name: x}\nspec: {}\n")
    with pytest.raises(ConfigError, match=r"expected apiVersion argoproj\.io/v1alpha1"):
        load_applications(tmp_path, "apps")


def test_other_valid_yaml_and_other_applications_are_still_skipped(tmp_path: Path) -> None:
    write(tmp_path, "replicas: 3\n---\napiVersion: app.k8s.io/v1beta1\nkind: Application\n"
                    "metadata: {name: sig-apps}\n")
    assert load_applications(tmp_path, "apps") == []


def test_finalizers_are_kept(tmp_path: Path) -> None:
    write(tmp_path, "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n"
                    "  name: x\n  finalizers: [resources-finalizer.argocd.argoproj.io]\n"
                    "spec: {source: {repoURL: https://example.com/r.git}}\n")
    [app] = load_applications(tmp_path, "apps")
    assert app.finalizers == ("resources-finalizer.argocd.argoproj.io",)
