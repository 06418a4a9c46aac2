"""A commit re-renders only the plain-directory apps whose inputs it touched."""

from __future__ import annotations

from pathlib import Path

from gitops_ray.reconcile.pipeline import input_digest
from gitops_ray.render import application_from_flags
from gitops_ray.render.apps import HelmSource


def _repo(root: Path) -> None:
    for rel, text in {"a/rc.yaml": "kind: A\n", "b/rc.yaml": "kind: B\n",
                      "chart/Chart.yaml": "name: c\n", ".gitops-ray/shapes.yaml": "x: 1\n"
                      }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_digest_changes_only_with_the_apps_inputs(tmp_path: Path) -> None:
    _repo(tmp_path)
    app_a = application_from_flags(name="a", repo_url="r", path="a")
    app_b = application_from_flags(name="b", repo_url="r", path="b")
    a0, b0 = input_digest(app_a, tmp_path), input_digest(app_b, tmp_path)
    (tmp_path / "b" / "rc.yaml").write_text("kind: B2\n")
    assert input_digest(app_a, tmp_path) == a0
    assert input_digest(app_b, tmp_path) != b0
    (tmp_path / ".gitops-ray" / "shapes.yaml").write_text("x: 2\n")
    assert input_digest(app_a, tmp_path) != a0  # pod-shape config is an input of every app


def test_helm_and_kustomize_apps_always_rerender(tmp_path: Path) -> None:
    _repo(tmp_path)
    assert input_digest(application_from_flags(name="c", repo_url="r", path="chart"),
                        tmp_path) is None
    helm = application_from_flags(name="h", repo_url="r", path="a", helm=HelmSource())
    assert input_digest(helm, tmp_path) is None
