"""Argo CD's repository Secrets are matched to URLs as Argo CD matches them."""

from __future__ import annotations

import base64
from typing import Any

from gitops_ray.runtime.argorepos import RepoSecret, match, parse_secret


def secret(kind: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": "s", "labels": {"argocd.argoproj.io/secret-type": kind}},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_parse() -> None:
    parsed = parse_secret(secret("repository", url="https://charts.example/", username="u",
                                 password="p", type="helm"))
    assert parsed == RepoSecret("repository", "https://charts.example/", "u", "p")
    assert "password=" not in repr(parsed)
    assert parse_secret(secret("cluster", url="https://k8s")) is None
    assert parse_secret(secret("repository")) is None


def test_a_repository_secret_first_then_the_longest_template() -> None:
    own = RepoSecret("repository", "https://git.example/org/app.git", password="own")
    bare = RepoSecret("repository", "https://git.example/org/other")  # no credentials
    org = RepoSecret("repo-creds", "https://git.example/org", password="org")
    host = RepoSecret("repo-creds", "https://git.example", password="host")
    oci = RepoSecret("repository", "registry.example/charts", password="oci")
    secrets = [host, org, own, bare, oci]
    assert match(secrets, "https://git.example/org/app") is own  # .git and case ignored
    assert match(secrets, "https://GIT.example/org/other") is org  # own has none: template
    assert match(secrets, "https://git.example/team/x") is host
    assert match(secrets, "oci://registry.example/charts") is oci  # scheme-less in Argo CD
    assert match(secrets, "https://elsewhere.example/x") is None
