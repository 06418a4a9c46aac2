"""The app-of-apps scan keeps every problem with the app (or file) it belongs to."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops_ray.errors import ConfigError
from gitops_ray.render import load_applications, scan_applications


def application(name: str, path: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name},
        "spec": {"source": {"repoURL": "https://git.example/r.git", "path": path},
                 "destination": {"namespace": "ns"}}})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "good.yaml").write_text(application("good", "clusters/good"))
    (apps / "escape.yaml").write_text(application("escape", "../../../../etc"))
    (apps / "broken.yaml").write_text("apiVersion: argoproj.io/v1alpha1\nkind: [\nmetadata: x\n")
    (apps / "twice-a.yaml").write_text(application("twice", "a"))
    (apps / "twice-b.yaml").write_text(application("twice", "b"))
    return tmp_path


def test_good_apps_load_next_to_bad_ones(repo: Path) -> None:
    scan = scan_applications(repo, "apps")
    assert sorted(scan.apps) == ["good"]
    assert scan.apps["good"][0] == "apps/good.yaml"


def test_a_nameable_bad_application_is_an_error_of_that_app(repo: Path) -> None:
    scan = scan_applications(repo, "apps")
    file, error = scan.invalid["escape"]
    assert file == "apps/escape.yaml"
    assert "spec.source.path '../../../../etc' points outside the repository" in error
    assert "duplicate Application name 'twice'" in scan.invalid["twice"][1]


def test_an_unreadable_file_is_kept_by_file(repo: Path) -> None:
    scan = scan_applications(repo, "apps")
    assert list(scan.broken_files) == ["apps/broken.yaml"]
    assert "invalid YAML" in scan.broken_files["apps/broken.yaml"]


def test_load_applications_still_fails_on_the_first_problem(repo: Path) -> None:
    with pytest.raises(ConfigError, match=r"^apps/broken\.yaml:\d+:\d+: invalid YAML"):
        load_applications(repo, "apps")
