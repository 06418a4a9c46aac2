"""Repository credentials go only where they are meant for (issue 36, item 7).

Real git over smart HTTP to servers on 127.0.0.1 (``tests/gitserver.py``), each recording
every ``Authorization`` header it is offered: the server the credentials are for gets the
token, another server (another port is another host) never does, whether an Application
names it, a credential prefix nearly matches it (``/team`` vs ``/team-evil``) or the
trusted server redirects there. The last line of defence is git's credential helper, which
answers only for the protocol, host and path it was given.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gitops_ray.cli import main
from gitops_ray.errors import ConfigError
from gitops_ray.kube import Kube
from gitops_ray.runtime.credentials import CredentialLookup
from gitops_ray.settings import RepoCredential, Secret, load_settings
from gitops_ray.source import Credentials, GitSource, SourceAuthError, env_lookup, in_scope
from gitops_ray.source.auth import credential_env
from tests.gitserver import serve_git
from tests.harness.git import GitRepo
from tests.harness.runtime import application
from tests.samples import raycluster

TOKEN = "scoped-t0ken-9f3a"
Seen = list[tuple[str, str]]


def offered(seen: Seen) -> list[str]:
    """The passwords of the Basic credentials a server was offered."""
    out = []
    for _, header in seen:
        if header.startswith("Basic "):
            out.append(base64.b64decode(header[6:]).decode().partition(":")[2])
    return out


@contextmanager
def two_servers(root: Path, *, redirect: bool = False) -> Iterator[tuple[str, Seen, str, Seen]]:
    """A trusted server (knows TOKEN) and an attacker's (wants another), both recording."""
    trusted_seen: Seen = []
    evil_seen: Seen = []
    with serve_git(root, token="the-attackers-own", seen=evil_seen) as evil, \
            serve_git(root, token=TOKEN, seen=trusted_seen,
                      redirect_to=evil if redirect else None) as trusted:
        yield trusted, trusted_seen, evil, evil_seen


def test_scopes_match_on_a_path_boundary() -> None:
    assert in_scope("https://git.example/team/app.git", "https://git.example/team")
    assert in_scope("https://git.example/team.git", "https://git.example/team/")
    assert in_scope("https://GIT.example:443/team/app", "https://git.example/team")
    assert in_scope("git@git.example:team/app.git", "ssh://git@git.example/team")
    assert not in_scope("https://git.example/team-evil/app.git", "https://git.example/team")
    assert not in_scope("https://git.example.evil/team/app", "https://git.example/team")
    assert not in_scope("https://git.example:8443/team/app", "https://git.example/team")
    assert not in_scope("http://git.example/team/app", "https://git.example/team")
    assert not in_scope("/srv/team/app", "https://git.example/team")
    env = {"GITOPS_RAY_GIT_TOKEN": TOKEN}
    by_repo = env_lookup(["https://git.example/team/config.git"], env)
    assert by_repo("https://git.example/other/app.git") is not None  # the --repo host
    assert by_repo("https://elsewhere.example/team/config.git") is None
    assert env_lookup([], env)("https://git.example/team/config.git") is None
    pinned = env_lookup([], {**env, "GITOPS_RAY_GIT_KNOWN_HOSTS": "/kh"})("ssh://h/x")
    assert pinned == Credentials(known_hosts_file="/kh")  # host keys pinned everywhere
    prefixed = env_lookup(["https://git.example/x"], {**env, "GITOPS_RAY_GIT_URL":
                                                      "https://git.example/team"})
    assert prefixed("https://git.example/team/a") is not None
    assert prefixed("https://git.example/team-evil/a") is None
    assert prefixed("https://git.example/x") is None  # the prefix, not --repo, decides


def test_a_credential_url_must_be_a_url(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"credentials": [{"url": "github.com/org",
                                                       "password": "x"}]}))
    with pytest.raises(ConfigError, match="is not a repository URL prefix"):
        load_settings(config, env={})


def test_the_cli_token_goes_to_the_repo_host_and_never_to_a_host_an_app_names(
        tmp_path: Path) -> None:
    served = tmp_path / "served"
    config = GitRepo(served / "config")
    with two_servers(served) as (trusted, trusted_seen, evil, evil_seen):
        evil_app = application("evil", f"{evil}/config/remote.git", "default")
        config.commit({"manifests/rc.yaml": raycluster("ok"),
                       "apps/evil.yaml": yaml.safe_dump(evil_app)})
        env = {"GITOPS_RAY_GIT_USERNAME": "ci", "GITOPS_RAY_GIT_TOKEN": TOKEN}
        base = ["render", "--cache-dir", str(tmp_path / "cache"),
                "--repo", f"{trusted}/config/remote.git"]
        ok = CliRunner().invoke(main, [*base, "--path", "manifests"], env=env)
        assert ok.exit_code == 0, ok.output
        assert yaml.safe_load(ok.output)["metadata"]["name"] == "ok"
        refused = CliRunner().invoke(main, [*base, "--apps", "apps"], env=env)
    assert refused.exit_code != 0 and "authentication" in refused.output, refused.output
    assert TOKEN in offered(trusted_seen)
    assert evil_seen and TOKEN not in offered(evil_seen)  # asked for it, never given it
    assert TOKEN not in refused.output


def test_a_prefix_is_not_offered_to_a_sibling_path(kube: Kube, namespace: str,
                                                   tmp_path: Path) -> None:
    served = tmp_path / "served"
    team, evil = GitRepo(served / "team"), GitRepo(served / "team-evil")
    sha = team.commit({"a.yaml": "a: 1\n"})
    evil.commit({"a.yaml": "a: 2\n"})
    seen: Seen = []
    with serve_git(served, token=TOKEN, seen=seen) as base:
        lookup = CredentialLookup([RepoCredential(f"{base}/team", username="ci",
                                                  password=Secret(TOKEN))], kube, namespace)
        source = GitSource(tmp_path / "cache", credentials=lookup)
        assert source.resolve(f"{base}/team/remote.git", "main") == sha
        with pytest.raises(SourceAuthError):
            source.resolve(f"{base}/team-evil/remote.git", "main")
    assert {path.split("/")[1] for path, header in seen
            if TOKEN in offered([(path, header)])} == {"team"}
    assert any(path.startswith("/team-evil/") for path, _ in seen)


def test_the_helper_answers_only_for_its_host_and_path(tmp_path: Path) -> None:
    served = tmp_path / "served"
    GitRepo(served / "team").commit({"a.yaml": "a: 1\n"})
    GitRepo(served / "team-evil").commit({"a.yaml": "a: 2\n"})
    with two_servers(served) as (trusted, trusted_seen, evil, evil_seen):
        host = trusted.removeprefix("http://")
        env = {**os.environ, **credential_env("ci", TOKEN, ("http", host, "team"))}

        def ls_remote(url: str) -> int:  # git itself, with only the helper's environment
            return subprocess.run(["git", "ls-remote", url], env=env, capture_output=True,
                                  check=False).returncode
        assert ls_remote(f"{trusted}/team/remote.git") == 0
        assert ls_remote(f"{trusted}/team-evil/remote.git") != 0
        assert ls_remote(f"{evil}/team/remote.git") != 0
        # A lookup that gets it wrong (the same credentials whatever the URL) is caught too.
        careless = Credentials(username="ci", token=TOKEN, scope=f"{trusted}/team")
        source = GitSource(tmp_path / "cache", credentials=lambda _url: careless)
        with pytest.raises(SourceAuthError):
            source.resolve(f"{evil}/team/remote.git", "main")
    assert TOKEN in offered(trusted_seen)
    assert not [p for p, h in trusted_seen if p.startswith("/team-evil/") and offered([(p, h)])]
    assert evil_seen and TOKEN not in offered(evil_seen)


def test_a_redirect_to_another_host_gets_no_credentials(tmp_path: Path) -> None:
    served = tmp_path / "served"
    GitRepo(served / "team").commit({"a.yaml": "a: 1\n"})
    with two_servers(served, redirect=True) as (trusted, trusted_seen, _evil, evil_seen):
        source = GitSource(tmp_path / "cache", credentials=env_lookup(
            [trusted], {"GITOPS_RAY_GIT_USERNAME": "ci", "GITOPS_RAY_GIT_TOKEN": TOKEN}))
        with pytest.raises(SourceAuthError):
            source.resolve(f"{trusted}/team/remote.git", "main")
    assert trusted_seen and evil_seen  # git followed the redirect and was asked there
    assert TOKEN not in offered(evil_seen)
