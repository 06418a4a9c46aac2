"""A commit re-renders only the plain-directory apps whose inputs it touched: the files
render reads, by content after symlinks, and the in-cluster pod-shape ConfigMaps."""

from __future__ import annotations

from pathlib import Path

from gitops_ray.render import application_from_flags, input_digest, render_inputs, touches
from gitops_ray.render.apps import HelmSource
from gitops_ray.render.shapes import ClusterShapes


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


def test_a_symlinked_file_is_digested_by_its_target(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "shared" / "rc.yaml").write_text("kind: A\n")
    (tmp_path / "a" / "rc.yaml").symlink_to("../shared/rc.yaml")
    app = application_from_flags(name="a", repo_url="r", path="a")
    before = input_digest(app, tmp_path)
    (tmp_path / "shared" / "rc.yaml").write_text("kind: A2\n")
    assert before is not None and input_digest(app, tmp_path) != before


def test_only_files_render_reads_count(tmp_path: Path) -> None:
    _repo(tmp_path)
    app = application_from_flags(name="a", repo_url="r", path="a")
    before = input_digest(app, tmp_path)
    (tmp_path / "a" / "README.md").write_text("not a manifest\n")
    (tmp_path / "a" / "sub").mkdir()
    (tmp_path / "a" / "sub" / "x.yaml").write_text("kind: X\n")  # no directory.recurse
    assert input_digest(app, tmp_path) == before
    (tmp_path / "a" / "new.yaml").write_text("kind: N\n")
    assert input_digest(app, tmp_path) != before


def test_a_new_gitops_ray_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rc.yaml").write_text("kind: A\n")
    app = application_from_flags(name="a", repo_url="r", path="a")
    before = input_digest(app, tmp_path)
    (tmp_path / ".gitops-ray").mkdir()  # turns on the generic provider's defaults
    assert input_digest(app, tmp_path) != before


def test_in_cluster_shapes_count(tmp_path: Path) -> None:
    _repo(tmp_path)
    app = application_from_flags(name="a", repo_url="r", path="a")
    configmap = {"metadata": {"name": "it", "namespace": "ops"},
                 "data": {"instance_types.yaml": "{}"}}
    edited = {**configmap, "data": {"instance_types.yaml": "a: {}"}}
    assert input_digest(app, tmp_path, cluster=ClusterShapes.of(configmap, None)) != \
        input_digest(app, tmp_path, cluster=ClusterShapes.of(edited, None))


def test_the_scope_is_the_apps_directory_and_gitops_ray_when_nothing_is_linked(
        tmp_path: Path) -> None:
    _repo(tmp_path)
    found = render_inputs(application_from_flags(name="a", repo_url="r", path="a"), tmp_path)
    assert found is not None and found.scope == ("a", ".gitops-ray")
    at_root = render_inputs(application_from_flags(name="r", repo_url="r", path="."),
                            tmp_path)
    assert at_root is not None and at_root.scope == ("",)  # every change touches it


def test_a_symlink_on_the_way_leaves_the_scope_unknown(tmp_path: Path) -> None:
    _repo(tmp_path)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "rc.yaml").write_text("kind: S\n")
    (tmp_path / "a" / "link.yaml").symlink_to("../shared/rc.yaml")
    (tmp_path / "b-link").symlink_to("b")
    (tmp_path / "c" / ".gitops-ray").parent.mkdir()
    (tmp_path / "c" / "rc.yaml").write_text("kind: C\n")
    (tmp_path / "c" / ".gitops-ray").symlink_to("../.gitops-ray")
    for path in ("a", "b-link", "c"):
        found = render_inputs(application_from_flags(name="x", repo_url="r", path=path),
                              tmp_path)
        assert found is not None and found.scope is None, path
    found = render_inputs(application_from_flags(name="b", repo_url="r", path="b"), tmp_path)
    assert found is not None and found.scope == ("b", ".gitops-ray")


def test_touches_is_in_on_or_above_a_scope_path() -> None:
    scope = ("clusters/a", ".gitops-ray")
    assert touches(["clusters/a/rc.yaml"], scope)
    assert touches(["clusters/a/deep/x.yaml"], scope)
    assert touches(["clusters/a"], scope)  # the directory became a file or a link
    assert touches(["clusters"], scope)  # so did a parent
    assert touches([".gitops-ray/catalog.yaml"], scope)
    assert not touches(["clusters/ab/rc.yaml", "clusters/b/rc.yaml", "README.md"], scope)
    assert not touches([], scope)
    assert touches(["anything"], ("",))
