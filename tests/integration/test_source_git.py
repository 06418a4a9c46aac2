"""The source stage against real git: bare repos on disk, smart HTTP and SSH with auth."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitops_ray.errors import SourceError
from gitops_ray.safepath import check_no_escaping_symlinks
from gitops_ray.source import (
    Credentials,
    GitSource,
    SourceAuthError,
    SourceTimeout,
    UnknownRevision,
    UnreachableRemote,
)
from gitops_ray.source import trees as source_trees
from gitops_ray.source.auth import git_env
from tests.gitserver import serve_git, serve_git_ssh
from tests.harness.git import GitRepo


@pytest.fixture
def source(tmp_path: Path) -> GitSource:
    return GitSource(tmp_path / "cache", credentials=lambda _url: None)


# -- revisions -------------------------------------------------------------------------


def test_resolves_branches_tags_shas_head_and_other_refs(source: GitSource,
                                                          git_repo: GitRepo) -> None:
    first = git_repo.commit({"a.yaml": "a: 1\n"})
    git_repo.git("tag", "light")
    git_repo.git("tag", "-a", "annotated", "-m", "release")
    git_repo.git("push", "-q", "origin", "light", "annotated")
    second = git_repo.commit({"a.yaml": "a: 2\n"}, branch="main")
    git_repo.git("push", "-q", "origin", f"{first}:refs/heads/stable",
                 f"{first}:refs/pull/7/head")
    url = git_repo.url
    assert source.resolve(url, "main") == second
    assert source.resolve(url, "refs/heads/main") == second
    assert source.resolve(url, "HEAD") == second
    assert source.resolve(url, "") == second  # Argo CD: empty targetRevision means HEAD
    assert source.resolve(url, "stable") == first
    assert source.resolve(url, "light") == first
    assert source.resolve(url, "annotated") == first  # peeled to the commit
    assert source.resolve(url, "refs/tags/annotated") == first
    assert source.resolve(url, "pull/7/head") == first  # neither branch nor tag
    assert source.resolve(url, first) == first
    assert source.resolve(url, first.upper()) == first
    assert source.resolve(url, first[:10]) == first
    checkout = source.checkout(url, "stable")
    assert (checkout.root / "a.yaml").read_text() == "a: 1\n"
    assert (checkout.sha, checkout.revision, checkout.repo_url) == (first, "stable", url)


def test_fetches_only_when_the_commit_changed(source: GitSource, git_repo: GitRepo) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    url = git_repo.url
    first = source.checkout(url, "main")
    assert first.root.parent.parent == source.repo_dir(url)
    assert source.repo_dir(url).parent == source.cache_dir / "repos"
    fetch_head = source.repo_dir(url) / "mirror.git" / "FETCH_HEAD"
    stamp = fetch_head.stat().st_mtime_ns
    again = source.checkout(url, "main")
    assert again.root == first.root
    assert source.fetches[url] == 1
    assert fetch_head.stat().st_mtime_ns == stamp  # git did not fetch either
    new = git_repo.commit({"a.yaml": "a: 2\n"})
    assert source.resolve(url, "main") == new
    assert source.fetches[url] == 1  # resolving is ls-remote only
    latest = source.checkout(url, "main")
    assert source.fetches[url] == 2
    assert (latest.root / "a.yaml").read_text() == "a: 2\n"
    assert (first.root / "a.yaml").read_text() == "a: 1\n"  # old trees are immutable


def test_short_sha_is_resolved_locally_once_known(source: GitSource, git_repo: GitRepo) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    url = git_repo.url
    assert source.resolve(url, sha[:8]) == sha
    assert source.fetches[url] == 1  # the mirror had to learn about it
    assert source.resolve(url, sha[:8]) == sha
    assert source.checkout(url, sha[:8]).sha == sha
    assert source.fetches[url] == 1


def test_ambiguous_short_sha_is_an_error(source: GitSource, git_repo: GitRepo) -> None:
    shas = _many_commits(git_repo.bare, 1500)
    prefixes = Counter(s[:4] for s in shas)
    prefix = next(p for p, n in sorted(prefixes.items()) if n > 1)
    with pytest.raises(UnknownRevision, match=f"short SHA '{prefix}' is ambiguous"):
        source.resolve(git_repo.url, prefix)
    one = next(s for s in shas if s.startswith(prefix))
    assert source.resolve(git_repo.url, one[:12]) == one


def test_unknown_revisions(source: GitSource, git_repo: GitRepo) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    with pytest.raises(UnknownRevision, match=r"revision 'v9' not found in file://"):
        source.checkout(git_repo.url, "v9")
    with pytest.raises(UnknownRevision, match="revision 'abcdef1' not found"):
        source.checkout(git_repo.url, "abcdef1")
    with pytest.raises(UnknownRevision, match=f"commit {'0' * 40} .* not found"):
        source.checkout(git_repo.url, "0" * 40)


# -- trees -----------------------------------------------------------------------------


def test_tree_is_the_commit_as_committed(source: GitSource, git_repo: GitRepo) -> None:
    # A repository's .gitattributes must not drop (export-ignore) or rewrite (export-subst)
    # files when the tree is materialised: Argo CD checks out, it does not archive.
    sha = git_repo.commit({".gitattributes": "dropped.yaml export-ignore\n"
                                             "subst.yaml export-subst\n",
                           "dropped.yaml": "a: 1\n", "subst.yaml": "v: $Format:%H$\n"})
    root = source.checkout(git_repo.url, sha).root
    assert (root / "dropped.yaml").read_text() == "a: 1\n"
    assert (root / "subst.yaml").read_text() == "v: $Format:%H$\n"


def test_committed_symlinks_are_kept_for_path_checks(source: GitSource, git_repo: GitRepo,
                                                     tmp_path: Path) -> None:
    git_repo.write({"apps/ray.yaml": "kind: RayCluster\n"})
    os.symlink("ray.yaml", git_repo.work / "apps" / "inner.yaml")
    git_repo.commit({})
    root = source.checkout(git_repo.url, "main").root
    assert (root / "apps" / "inner.yaml").read_text() == "kind: RayCluster\n"
    check_no_escaping_symlinks(root, root)
    os.symlink("/etc/passwd", git_repo.work / "apps" / "passwd.yaml")
    git_repo.commit({})
    root = source.checkout(git_repo.url, "main").root
    assert (root / "apps" / "passwd.yaml").is_symlink()
    with pytest.raises(SourceError, match=r"symlink 'apps/passwd\.yaml' points outside"):
        check_no_escaping_symlinks(root, root)


def test_a_commit_with_no_files_has_an_empty_tree(source: GitSource,
                                                  git_repo: GitRepo) -> None:
    root = source.checkout(git_repo.url, git_repo.commit({})).root
    assert root.is_dir() and not any(root.iterdir())


def test_old_trees_are_evicted(source: GitSource, git_repo: GitRepo,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_trees, "KEEP_TREES", 2)
    roots = [source.checkout(git_repo.url, git_repo.commit({"a": str(i)})).root
             for i in range(3)]
    assert [r.exists() for r in roots] == [False, True, True]


def _snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path below ``root``: (type, permission bits, content or link target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        if path.is_symlink():
            out[str(path.relative_to(root))] = ("link", 0, os.readlink(path))
        elif path.is_file():
            out[str(path.relative_to(root))] = ("file", mode & 0o777, path.read_text())
        else:
            out[str(path.relative_to(root))] = ("dir", 0, "")
    return out


def _full_extraction(git_repo: GitRepo, sha: str, tmp_path: Path) -> Path:
    fresh = GitSource(tmp_path / f"fresh-{sha[:8]}", credentials=lambda _url: None)
    return fresh.checkout(git_repo.url, sha).root


@pytest.mark.parametrize("link_copy", ["cp", "copytree"])
def test_a_tree_derived_from_the_previous_one_is_the_commit_exactly(
        source: GitSource, git_repo: GitRepo, tmp_path: Path, link_copy: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if link_copy == "copytree":  # where cp has no -l: Python's copytree does the same
        monkeypatch.setattr(source_trees, "LINK_COPY", ("false",))
    git_repo.write({".gitattributes": "gone.yaml export-ignore\n", "gone.yaml": "g: 1\n",
                    "apps/a.yaml": "a: 1\n", "apps/b.yaml": "b: 1\n", "run.sh": "echo\n",
                    "old/deep/x.yaml": "x: 1\n", "f": "file, then a directory\n"})
    os.symlink("a.yaml", git_repo.work / "apps" / "link.yaml")
    first = source.checkout(git_repo.url, git_repo.commit({})).root
    before = _snapshot(first)
    # modify, delete, add, rename, mode and type changes, a file becoming a directory
    (git_repo.work / "apps" / "link.yaml").unlink()
    os.symlink("b.yaml", git_repo.work / "apps" / "link.yaml")
    (git_repo.work / "run.sh").chmod(0o755)
    git_repo.git("mv", "apps/b.yaml", "apps/renamed.yaml")
    git_repo.write({"f": None})
    steps = [{"apps/a.yaml": "a: 2\n", "old/deep/x.yaml": None, "new/y.yaml": "y: 1\n",
              "f/inside.yaml": "now a directory\n", "gone.yaml": "g: 2\n"},
             {"apps/a.yaml": "a: 3\n"}, {}]
    previous = first
    for files in steps:
        sha = git_repo.commit(files)
        derived = source.checkout(git_repo.url, sha).root
        assert _snapshot(derived) == _snapshot(_full_extraction(git_repo, sha, tmp_path))
        # derived, not extracted: an unchanged file is the previous tree's file
        inode = (derived / ".gitattributes").stat().st_ino
        assert inode == (previous / ".gitattributes").stat().st_ino
        previous = derived
    assert _snapshot(first) == before  # shared (hard-linked) files were never written through
    assert not (derived / "old").exists()  # emptied directories go, as in a full extraction


def test_concurrent_checkouts_share_one_fetch(source: GitSource, git_repo: GitRepo) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    with ThreadPoolExecutor(8) as pool:
        checkouts = list(pool.map(lambda _: source.checkout(git_repo.url, "main"), range(16)))
    assert {c.sha for c in checkouts} == {sha}
    assert len({c.root for c in checkouts}) == 1
    assert source.fetches[git_repo.url] == 1


# -- remotes that fail -----------------------------------------------------------------


def test_unreachable_remotes(source: GitSource, tmp_path: Path) -> None:
    with pytest.raises(UnreachableRemote, match="does not appear to be a git repository"):
        source.resolve((tmp_path / "missing.git").as_uri(), "main")
    with pytest.raises(UnreachableRemote, match=r"cannot read repository http://127\.0\.0\.1"):
        source.resolve(f"http://127.0.0.1:{_closed_port()}/repo.git", "main")


def test_userinfo_in_the_url_is_redacted(source: GitSource) -> None:
    port = _closed_port()
    with pytest.raises(UnreachableRemote) as err:
        source.resolve(f"http://ci:pa55word@127.0.0.1:{port}/repo.git", "main")
    assert "pa55word" not in str(err.value)
    assert f"http://***@127.0.0.1:{port}/repo.git" in str(err.value)


def test_a_remote_that_never_answers_times_out(tmp_path: Path) -> None:
    source = GitSource(tmp_path / "cache", credentials=lambda _u: None, timeout=1)
    with _silent_server() as port, pytest.raises(SourceTimeout, match="did not answer"):
        source.resolve(f"http://127.0.0.1:{port}/repo.git", "main")


def test_command_running_transports_are_refused(source: GitSource, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(UnreachableRemote, match="transport 'ext' not allowed"):
        source.resolve(f"ext::sh -c touch% {marker}", "main")
    assert not marker.exists()


# -- HTTPS token -----------------------------------------------------------------------


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
            with pytest.raises(SourceAuthError, match="authentication to http://127") as err:
                bad.resolve(url, "main")
            assert token not in str(err.value)
            assert "wrong" not in str(err.value)
    _assert_not_on_disk(tmp_path / "good", token)


def test_a_token_in_the_url_goes_to_git_through_the_environment(git_repo: GitRepo,
                                                         tmp_path: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    token = "url-t0ken-value"
    asked: list[str] = []
    with serve_git(git_repo.bare.parent, token=token) as base:
        bare = f"{base}/{git_repo.bare.name}"
        url = bare.replace("://", f"://ci:{token}@")
        source = GitSource(tmp_path / "cache", credentials=lambda u: asked.append(u) or None)
        assert source.checkout(url, "main").sha == sha
        assert source.repo_dir(url) == source.repo_dir(bare)  # one mirror, not one per token
        assert asked and set(asked) == {bare}  # configured credentials looked up by bare URL
        with pytest.raises(SourceAuthError) as err:
            source.resolve(url.replace(token, "wrong-t0ken"), "main")
        assert "wrong-t0ken" not in str(err.value) and "http://***@127.0.0.1" in str(err.value)
    _assert_not_on_disk(tmp_path / "cache", token)


def test_a_user_name_in_the_url_keeps_the_configured_token(git_repo: GitRepo,
                                                           tmp_path: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    with serve_git(git_repo.bare.parent, username="ci", token="conf-t0ken") as base:
        url = f"{base}/{git_repo.bare.name}".replace("://", "://ci@")
        source = GitSource(tmp_path / "cache", credentials=lambda _u: Credentials(
            username="someone-else", token="conf-t0ken"))
        assert source.resolve(url, "main") == sha


def test_a_token_as_user_name_works_and_stays_off_disk(git_repo: GitRepo,
                                                       tmp_path: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    token = "ghp-like-t0ken"  # forges take https://<token>@host/...
    with serve_git(git_repo.bare.parent, username=token, token="") as base:
        url = f"{base}/{git_repo.bare.name}".replace("://", f"://{token}@")
        source = GitSource(tmp_path / "cache", credentials=lambda _u: None)
        assert source.checkout(url, "main").sha == sha
    _assert_not_on_disk(tmp_path / "cache", token)


# -- SSH key ---------------------------------------------------------------------------


@pytest.fixture
def ssh_key(tmp_path: Path) -> Path:
    pytest.importorskip("paramiko")
    return _keygen(tmp_path / "id_ed25519")


def test_ssh_key_file_auth(git_repo: GitRepo, tmp_path: Path, ssh_key: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    with serve_git_ssh(git_repo.bare.parent, authorized_key=_pub(ssh_key)) as server:
        known = tmp_path / "known_hosts"
        known.write_text(server.known_hosts_line)
        source = GitSource(tmp_path / "cache", credentials=lambda _u: Credentials(
            ssh_key_file=str(ssh_key), known_hosts_file=str(known)))
        url = server.url(git_repo.bare.name)
        assert source.resolve(url, "main") == sha
        assert (source.checkout(url, "main").root / "a.yaml").read_text() == "a: 1\n"


def test_ssh_key_from_text_learns_the_host_key(git_repo: GitRepo, tmp_path: Path,
                                               ssh_key: Path) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    key_text = ssh_key.read_text()
    with serve_git_ssh(git_repo.bare.parent, authorized_key=_pub(ssh_key)) as server:
        source = GitSource(tmp_path / "cache",
                           credentials=lambda _u: Credentials(ssh_key=key_text))
        assert source.checkout(server.url(git_repo.bare.name), "main").sha == sha
        learnt = (tmp_path / "cache" / ".secrets" / "known_hosts").read_text()
        assert server.known_hosts_line.split()[2] in learnt
    secrets = tmp_path / "cache" / ".secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    keys = list(secrets.glob("key-*"))
    assert len(keys) == 1 and stat.S_IMODE(keys[0].stat().st_mode) == 0o600


def test_ssh_wrong_key_is_an_auth_error(git_repo: GitRepo, tmp_path: Path,
                                        ssh_key: Path) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    other = _keygen(tmp_path / "other")
    with serve_git_ssh(git_repo.bare.parent, authorized_key=_pub(ssh_key)) as server:
        source = GitSource(tmp_path / "cache", credentials=lambda _u: Credentials(
            ssh_key=other.read_text()))
        with pytest.raises(SourceAuthError, match=r"Permission denied \(publickey\)") as err:
            source.resolve(server.url(git_repo.bare.name), "main")
    assert "PRIVATE KEY" not in str(err.value)


def test_ssh_unknown_host_key_is_refused(git_repo: GitRepo, tmp_path: Path,
                                         ssh_key: Path) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    with serve_git_ssh(git_repo.bare.parent, authorized_key=_pub(ssh_key)) as server:
        pinned = tmp_path / "known_hosts"
        pinned.write_text(f"[127.0.0.1]:{server.port} {_pub(_keygen(tmp_path / 'imposter'))}")
        source = GitSource(tmp_path / "cache", credentials=lambda _u: Credentials(
            ssh_key_file=str(ssh_key), known_hosts_file=str(pinned)))
        with pytest.raises(SourceAuthError, match="Host key verification failed"):
            source.resolve(server.url(git_repo.bare.name), "main")


def test_credentials_never_show_in_repr_or_commands(tmp_path: Path) -> None:
    creds = Credentials(token="tok-123", ssh_key="-----BEGIN KEY-----\nabc\n")
    assert "tok-123" not in repr(creds) and "abc" not in repr(creds)
    env = git_env(creds, tmp_path / "secrets")
    assert "IdentitiesOnly=yes" in env["GIT_SSH_COMMAND"]
    assert "tok-123" not in env["GIT_SSH_COMMAND"] and "abc" not in env["GIT_SSH_COMMAND"]
    assert all("tok-123" not in v for k, v in env.items() if not k.endswith("_PASSWORD"))
    pinned = git_env(Credentials(known_hosts_file="/kh"), tmp_path / "secrets")
    assert "UserKnownHostsFile=/kh" in pinned["GIT_SSH_COMMAND"]
    assert "StrictHostKeyChecking=yes" in pinned["GIT_SSH_COMMAND"]
    assert Credentials.from_env({"GITOPS_RAY_GIT_TOKEN": "t"}) == Credentials(token="t")
    assert Credentials.from_env({"GITOPS_RAY_GIT_SSH_KEY_FILE": "/k"}) == Credentials(
        ssh_key_file="/k")
    assert Credentials.from_env({"GITOPS_RAY_GIT_KNOWN_HOSTS": "/kh"}) == Credentials(
        known_hosts_file="/kh")
    assert Credentials.from_env({}) is None


# -- helpers ---------------------------------------------------------------------------


def _many_commits(bare: Path, count: int) -> list[str]:
    """``count`` commits on branch ``many`` via fast-import (deterministic SHAs)."""
    stream = []
    for i in range(count):
        message = f"commit {i}\n"
        parent = f"from :{i}\n" if i else ""
        stream.append(f"commit refs/heads/many\nmark :{i + 1}\n"
                      f"committer t <t@example.com> {1_700_000_000 + i} +0000\n"
                      f"data {len(message)}\n{message}{parent}\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, check=True,
                   input="".join(stream).encode())
    return subprocess.run(["git", "rev-list", "many"], cwd=bare, check=True,
                          capture_output=True, text=True).stdout.split()


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f",
                    str(path)], check=True)
    return path


def _pub(key: Path) -> str:
    return key.with_suffix(".pub").read_text()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _silent_server() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts connections and never says a word."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield int(listener.getsockname()[1])  # the kernel completes handshakes (backlog)


def _assert_not_on_disk(directory: Path, secret: str) -> None:
    for path in directory.rglob("*"):
        if path.is_file() and path.stat().st_size < 1_000_000:
            assert secret.encode() not in path.read_bytes(), path



def test_changed_paths_name_files_or_give_up_on_gitattributes(source: GitSource,
                                                              git_repo: GitRepo) -> None:
    first = git_repo.commit({"apps/a.yaml": "a: 1\n", "apps/b.yaml": "b: 1\n"})
    source.checkout(git_repo.url, first)
    second = git_repo.commit({"apps/a.yaml": "a: 2\n", "apps/b.yaml": None, "c.yaml": "c\n"})
    source.checkout(git_repo.url, second)
    assert source.changed_paths(git_repo.url, first, second) == {
        "apps/a.yaml", "apps/b.yaml", "c.yaml"}
    third = git_repo.commit({"apps/.gitattributes": "*.yaml text eol=crlf\n"})
    source.checkout(git_repo.url, third)  # may rewrite files git reports unchanged
    assert source.changed_paths(git_repo.url, second, third) is None
