"""The source stage against real git: bare repos on disk, and smart HTTP with auth."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from gitops_ray.errors import SourceError
from gitops_ray.safepath import check_no_escaping_symlinks, safe_path
from gitops_ray.source import (
    Credentials,
    GitSource,
    SourceAuthError,
    UnknownRevision,
    UnreachableRemote,
)
from gitops_ray.source.auth import git_env
from tests.conftest import GitRepo
from tests.gitserver import serve_git


@pytest.fixture
def source(tmp_path: Path) -> GitSource:
    return GitSource(tmp_path / "cache", credentials=lambda _url: None)


def test_resolves_branches_tags_shas_and_head(source: GitSource, git_repo: GitRepo) -> None:
    first = git_repo.commit({"a.yaml": "a: 1\n"})
    git_repo.git("tag", "light")
    git_repo.git("tag", "-a", "annotated", "-m", "release")
    git_repo.git("push", "-q", "origin", "light", "annotated")
    second = git_repo.commit({"a.yaml": "a: 2\n"}, branch="main")
    git_repo.git("push", "-q", "origin", f"{first}:refs/heads/stable")
    url = git_repo.url
    assert source.resolve(url, "main") == second
    assert source.resolve(url, "HEAD") == second
    assert source.resolve(url, "stable") == first
    assert source.resolve(url, "light") == first
    assert source.resolve(url, "annotated") == first  # peeled to the commit
    assert source.resolve(url, first) == first
    assert source.resolve(url, first[:10]) == first
    checkout = source.checkout(url, "stable")
    assert (checkout.root / "a.yaml").read_text() == "a: 1\n"
    assert checkout.sha == first


def test_fetches_only_when_the_commit_changed(source: GitSource, git_repo: GitRepo) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    url = git_repo.url
    first = source.checkout(url, "main")
    again = source.checkout(url, "main")
    assert again.root == first.root
    assert source.fetches[url] == 1
    new = git_repo.commit({"a.yaml": "a: 2\n"})
    assert source.resolve(url, "main") == new
    assert source.fetches[url] == 1  # resolving is ls-remote only
    latest = source.checkout(url, "main")
    assert source.fetches[url] == 2
    assert (latest.root / "a.yaml").read_text() == "a: 2\n"
    assert (first.root / "a.yaml").read_text() == "a: 1\n"  # old trees are immutable


def test_unknown_revision(source: GitSource, git_repo: GitRepo) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    with pytest.raises(UnknownRevision, match="revision 'v9' not found"):
        source.checkout(git_repo.url, "v9")
    with pytest.raises(UnknownRevision):
        source.checkout(git_repo.url, "abcdef1")


def test_unreachable_remotes(source: GitSource, tmp_path: Path) -> None:
    with pytest.raises(UnreachableRemote, match="does not appear to be a git repository"):
        source.resolve((tmp_path / "missing.git").as_uri(), "main")
    with pytest.raises(UnreachableRemote, match=r"127\.0\.0\.1"):
        source.resolve("http://127.0.0.1:9/repo.git", "main")


def test_https_token_auth_over_smart_http(git_repo: GitRepo, tmp_path: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    token = "s3cr3t-t0ken-value"
    with serve_git(git_repo.bare.parent, token=token) as base:
        url = f"{base}/{git_repo.bare.name}"
        good = GitSource(tmp_path / "good", credentials=lambda _u: Credentials(
            username="ci", token=token))
        assert good.checkout(url, "main").sha == sha
        for creds in (Credentials(username="ci", token="wrong"), None):
            bad = GitSource(tmp_path / "bad", credentials=lambda _u, c=creds: c)
            with pytest.raises(SourceAuthError) as err:
                bad.resolve(url, "main")
            assert token not in str(err.value)
            assert "wrong" not in str(err.value)
    # The token is stored nowhere on disk (not in the mirror's config, not in a URL).
    for path in (tmp_path / "good").rglob("*"):
        if path.is_file() and path.stat().st_size < 1_000_000:
            assert token.encode() not in path.read_bytes(), path


def test_credentials_never_show_in_repr_and_keys_are_private(tmp_path: Path) -> None:
    creds = Credentials(token="tok-123", ssh_key="-----BEGIN KEY-----\nabc\n")
    assert "tok-123" not in repr(creds) and "abc" not in repr(creds)
    env = git_env(creds, tmp_path / "secrets")
    key_file = Path(env["GIT_SSH_COMMAND"].split()[2])
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert "IdentitiesOnly=yes" in env["GIT_SSH_COMMAND"]
    assert "tok-123" not in env["GIT_SSH_COMMAND"]
    assert Credentials.from_env({"GITOPS_RAY_GIT_TOKEN": "t"}) == Credentials(token="t")
    assert Credentials.from_env({}) is None


@pytest.mark.skipif(shutil.which("sshd") is None, reason="needs openssh-server (sshd)")
def test_ssh_key_auth_is_configured(tmp_path: Path) -> None:  # pragma: no cover - env
    env = git_env(Credentials(ssh_key_file="/k"), tmp_path)
    assert env["GIT_SSH_COMMAND"].startswith("ssh -i /k")


def test_paths_cannot_escape_the_repository(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "apps").mkdir(parents=True)
    (root / "apps" / "ok.yaml").write_text("a: 1")
    os.symlink("ok.yaml", root / "apps" / "inner-link.yaml")
    os.symlink("/etc/passwd", root / "apps" / "passwd.yaml")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "outdir")
    assert safe_path(root, "apps") == (root / "apps").resolve()
    with pytest.raises(SourceError, match="escapes the repository"):
        safe_path(root, "../outside")
    with pytest.raises(SourceError, match="absolute"):
        safe_path(root, "/etc")
    with pytest.raises(SourceError, match="symlink that points outside"):
        safe_path(root, "outdir")
    with pytest.raises(SourceError, match=r"symlink 'apps/passwd\.yaml' points outside"):
        check_no_escaping_symlinks(root, root / "apps")
    os.unlink(root / "apps" / "passwd.yaml")
    check_no_escaping_symlinks(root, root / "apps")  # a link inside the repo is fine
