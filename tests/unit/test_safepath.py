"""Paths named by a config repo stay inside it: ``..``, absolute paths, escaping symlinks."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gitops_ray.errors import SourceError
from gitops_ray.safepath import check_no_escaping_symlinks, safe_path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repo with an app dir, a link inside it, and links to /etc and to a dir outside."""
    root = tmp_path / "repo"
    (root / "apps" / "ray").mkdir(parents=True)
    (root / "apps" / "ray" / "cluster.yaml").write_text("kind: RayCluster\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text("kind: Secret\n")
    os.symlink("ray/cluster.yaml", root / "apps" / "shared.yaml")
    os.symlink("apps/ray", root / "current")
    return root


@pytest.mark.parametrize("relative", ["apps", "apps/ray/cluster.yaml", ".", "",
                                      "apps/../apps/ray", "../repo/apps"])
def test_paths_inside_the_repository_resolve(repo: Path, relative: str) -> None:
    assert safe_path(repo, relative) == (repo / relative).resolve()


def test_symlinks_inside_the_repository_are_followed(repo: Path) -> None:
    assert safe_path(repo, "current") == (repo / "apps" / "ray").resolve()
    assert safe_path(repo, "apps/shared.yaml") == (repo / "apps/ray/cluster.yaml").resolve()
    check_no_escaping_symlinks(repo, repo)


@pytest.mark.parametrize("relative", ["..", "../outside", "apps/../../outside/secret.yaml",
                                      "apps/ray/../../../etc"])
def test_dotdot_out_of_the_repository_is_rejected(repo: Path, relative: str) -> None:
    with pytest.raises(SourceError, match=re.escape(f"path {relative!r} escapes the repository")):
        safe_path(repo, relative)


@pytest.mark.parametrize("relative", ["/etc", "/etc/passwd", "//x"])
def test_absolute_paths_are_rejected(repo: Path, relative: str) -> None:
    with pytest.raises(SourceError, match=re.escape(f"path {relative!r} is absolute")):
        safe_path(repo, relative)


def test_nul_bytes_are_rejected(repo: Path) -> None:
    with pytest.raises(SourceError, match="NUL byte"):
        safe_path(repo, "apps\0/x")


def test_symlink_to_etc_is_rejected_and_named(repo: Path) -> None:
    os.symlink("/etc/passwd", repo / "apps" / "ray" / "passwd.yaml")
    with pytest.raises(SourceError, match=re.escape("symlink that points outside the "
                                                    "repository: 'apps/ray/passwd.yaml'")):
        safe_path(repo, "apps/ray/passwd.yaml")
    with pytest.raises(SourceError, match=re.escape("symlink 'apps/ray/passwd.yaml' points "
                                                    "outside the repository")):
        check_no_escaping_symlinks(repo, repo / "apps")


def test_symlinked_directory_pointing_outside_is_rejected(repo: Path) -> None:
    os.symlink(repo.parent / "outside", repo / "apps" / "vendored")
    with pytest.raises(SourceError, match=re.escape("outside the repository: 'apps/vendored'")):
        safe_path(repo, "apps/vendored/secret.yaml")
    with pytest.raises(SourceError, match=re.escape("symlink 'apps/vendored' points outside")):
        check_no_escaping_symlinks(repo, repo / "apps")


def test_link_followed_by_dotdot_is_judged_by_where_it_really_goes(repo: Path) -> None:
    # Lexically "apps/out/../x" is inside; the OS follows "out" first and lands outside.
    os.symlink(repo.parent / "outside", repo / "apps" / "out")
    with pytest.raises(SourceError, match=re.escape("outside the repository: 'apps/out'")):
        safe_path(repo, "apps/out/../outside")


def test_relative_symlink_climbing_out_is_rejected(repo: Path) -> None:
    os.symlink("../../outside/secret.yaml", repo / "apps" / "sneaky.yaml")
    with pytest.raises(SourceError, match=re.escape("symlink 'apps/sneaky.yaml' points")):
        check_no_escaping_symlinks(repo, repo)


def test_only_the_given_directory_is_walked(repo: Path) -> None:
    os.symlink("/etc", repo / "etc")
    check_no_escaping_symlinks(repo, repo / "apps")  # the bad link is elsewhere
    with pytest.raises(SourceError, match="symlink 'etc' points outside"):
        check_no_escaping_symlinks(repo, repo)


def test_symlink_loops_are_rejected_with_a_clear_message(repo: Path) -> None:
    os.symlink("loop-b", repo / "loop-a")
    os.symlink("loop-a", repo / "loop-b")
    with pytest.raises(SourceError, match="'loop-a' cannot be resolved"):
        safe_path(repo, "loop-a")
    with pytest.raises(SourceError, match="'loop-a' cannot be resolved"):
        check_no_escaping_symlinks(repo, repo)


def test_dangling_symlink_inside_the_repository_is_not_an_escape(repo: Path) -> None:
    os.symlink("apps/missing.yaml", repo / "dangling.yaml")
    assert safe_path(repo, "dangling.yaml") == (repo / "apps" / "missing.yaml").resolve()
    check_no_escaping_symlinks(repo, repo)


def test_links_inside_a_directory_reached_through_a_link_are_checked(
        repo: Path, tmp_path: Path) -> None:
    """apps/ray/lib -> ../../lib (inside), lib/key -> outside: reached, so refused."""
    (repo / "lib").mkdir()
    os.symlink(tmp_path / "outside" / "secret.yaml", repo / "lib" / "key")
    os.symlink("../../lib", repo / "apps" / "ray" / "lib")
    with pytest.raises(SourceError, match=re.escape(
            "symlink 'lib/key' (reached through 'apps/ray/lib') points outside")):
        check_no_escaping_symlinks(repo, repo / "apps" / "ray")


def test_link_loops_through_directories_end(repo: Path) -> None:
    os.symlink("..", repo / "apps" / "ray" / "up")  # apps/ray/up -> apps: a cycle
    os.symlink("../..", repo / "apps" / "ray" / "top")
    check_no_escaping_symlinks(repo, repo / "apps")


def test_a_start_directory_that_is_a_link_outside_is_refused(
        repo: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside", repo / ".gitops-ray")
    with pytest.raises(SourceError, match=re.escape(
            "symlink '.gitops-ray' points outside the repository")):
        check_no_escaping_symlinks(repo, repo / "apps", repo / ".gitops-ray")
