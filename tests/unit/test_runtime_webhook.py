"""Webhook authentication and push matching (GitHub and GitLab payload shapes)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from gitops_ray.runtime.webhook import (
    MAX_DEPTH,
    Push,
    WebhookRejected,
    admit,
    authenticate,
    nesting_depth,
    normalize_repo_url,
    parse_push,
    provider_of,
)

SECRET = "topsecret"


def github(body: dict, *, event: str = "push", secret: str | None = SECRET
           ) -> tuple[dict[str, str], bytes]:
    raw = json.dumps(body).encode()
    headers = {"x-github-event": event}
    if secret is not None:
        digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
        headers["x-hub-signature-256"] = f"sha256={digest}"
    return headers, raw


GITHUB_PUSH = {"ref": "refs/heads/main", "after": "abc123",
               "repository": {"clone_url": "https://github.com/Org/Config.git",
                              "ssh_url": "git@github.com:Org/Config.git",
                              "html_url": "https://github.com/Org/Config",
                              "default_branch": "main"}}
GITLAB_PUSH = {"object_kind": "push", "ref": "refs/heads/release", "checkout_sha": "def456",
               "project": {"git_http_url": "https://gitlab.example.com/team/config.git",
                           "git_ssh_url": "git@gitlab.example.com:team/config.git",
                           "default_branch": "main"}}


@pytest.mark.parametrize(("url", "normal"), [
    ("https://github.com/Org/Config.git", "github.com/org/config"),
    ("https://user:tok@github.com:443/org/config/", "github.com/org/config"),
    ("git@github.com:org/config.git", "github.com/org/config"),
    ("ssh://git@github.com:22/org/config.git", "github.com/org/config"),
    ("file:///tmp/x/remote.git", "tmp/x/remote"),
    ("/tmp/x/remote.git", "tmp/x/remote"),
])
def test_repo_urls_normalise(url: str, normal: str) -> None:
    assert normalize_repo_url(url) == normal


def test_valid_github_signature_is_accepted() -> None:
    headers, body = github(GITHUB_PUSH)
    assert provider_of(headers) == "github"
    authenticate("github", headers, body, SECRET)
    push = parse_push("github", headers, body)
    assert push is not None and push.sha == "abc123" and push.revision == "main"


@pytest.mark.parametrize("secret", [None, "wrong"])
def test_unsigned_or_forged_github_delivery_is_401(secret: str | None) -> None:
    headers, body = github(GITHUB_PUSH, secret=secret)
    with pytest.raises(WebhookRejected) as info:
        authenticate("github", headers, body, SECRET)
    assert info.value.status == 401
    assert SECRET not in str(info.value)


def test_tampered_body_is_rejected() -> None:
    headers, _ = github(GITHUB_PUSH)
    with pytest.raises(WebhookRejected, match="does not match"):
        authenticate("github", headers, b'{"ref": "refs/heads/evil"}', SECRET)


def test_gitlab_token() -> None:
    body = json.dumps(GITLAB_PUSH).encode()
    headers = {"x-gitlab-event": "Push Hook", "x-gitlab-token": SECRET}
    authenticate("gitlab", headers, body, SECRET)
    with pytest.raises(WebhookRejected):
        authenticate("gitlab", {**headers, "x-gitlab-token": "nope"}, body, SECRET)
    push = parse_push("gitlab", headers, body)
    assert push is not None and push.sha == "def456"
    assert push.matches("git@gitlab.example.com:team/config.git", "release")
    assert not push.matches("https://gitlab.example.com/team/config.git", "HEAD")


def test_without_a_configured_secret_everything_is_rejected() -> None:
    headers, body = github(GITHUB_PUSH, secret="")
    with pytest.raises(WebhookRejected) as info:
        authenticate("github", headers, body, "")
    assert info.value.status == 401


def test_unknown_provider_is_a_bad_request() -> None:
    with pytest.raises(WebhookRejected) as info:
        authenticate("", {}, b"{}", SECRET)
    assert info.value.status == 400


def test_ping_and_other_events_are_not_pushes() -> None:
    headers, body = github({"zen": "hi"}, event="ping")
    assert parse_push("github", headers, body) is None


def test_push_matching_follows_argo_cd() -> None:
    headers, body = github(GITHUB_PUSH)
    push = parse_push("github", headers, body)
    assert push is not None
    assert push.matches("https://github.com/org/config", "HEAD")  # default branch
    assert push.matches("git@github.com:org/config.git", "main")
    assert push.matches("https://github.com/org/config.git", "refs/heads/main")
    assert not push.matches("https://github.com/org/config.git", "dev")
    assert not push.matches("https://github.com/org/other.git", "main")


def test_malformed_push_is_a_bad_request() -> None:
    headers, _ = github(GITHUB_PUSH)
    with pytest.raises(WebhookRejected) as info:
        parse_push("github", headers, b"not json")
    assert info.value.status == 400
    with pytest.raises(WebhookRejected):
        parse_push("github", headers, b'{"no": "ref"}')


def test_changed_files_say_which_apps_a_push_touched() -> None:
    payload = {**GITHUB_PUSH, "commits": [
        {"added": ["teams/a/rc.yaml"], "modified": [], "removed": []},
        {"added": [], "modified": ["README.md"], "removed": ["teams/b/old.yaml"]}]}
    headers, body = github(payload)
    push = parse_push("github", headers, body)
    assert push is not None
    assert push.touches("teams/a") and push.touches("teams/b/") and push.touches(".")
    assert not push.touches("teams/c") and not push.touches("teams/a-other")
    bare_headers, bare_body = github(GITHUB_PUSH)  # no file lists: nothing is "touched"
    bare = parse_push("github", bare_headers, bare_body)
    assert bare is not None and not bare.touches(".")


# -- before the body: admission on the headers alone ----------------------------------------

@pytest.mark.parametrize(("headers", "status"), [
    ({"x-github-event": "push"}, 401),
    ({"x-github-event": "push", "x-hub-signature-256": "sha256=nothex"}, 401),
    ({"x-github-event": "push", "x-hub-signature-256": "sha1=" + "a" * 40}, 401),
    ({"x-gitlab-event": "Push Hook", "x-gitlab-token": "wrong"}, 401),
    ({"x-gitlab-event": "Push Hook"}, 401),
    ({}, 400),
])
def test_admission_refuses_on_headers_alone(headers: dict[str, str], status: int) -> None:
    with pytest.raises(WebhookRejected) as info:
        admit(provider_of(headers), headers, SECRET)
    assert info.value.status == status


def test_admission_lets_plausible_deliveries_through() -> None:
    admit("github", {"x-hub-signature-256": "sha256=" + "ab" * 32}, SECRET)
    admit("gitlab", {"x-gitlab-token": SECRET}, SECRET)


def test_admission_without_a_configured_secret_refuses_everything() -> None:
    with pytest.raises(WebhookRejected) as info:
        admit("gitlab", {"x-gitlab-token": ""}, "")
    assert info.value.status == 401


# -- JSON depth -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "depth"), [
    (b"1", 0), (b"{}", 1), (b"[[[]]]", 3), (b'{"a": [1, {"b": "]]]\\"[[["}]}', 3),
    (b'"[[[["', 0), (b"[" * 100_000 + b"]" * 100_000, 100_000)])
def test_nesting_depth_ignores_brackets_in_strings(text: bytes, depth: int) -> None:
    assert nesting_depth(text) == depth
    assert nesting_depth(memoryview(text)) == depth


def test_deep_json_is_a_400_not_a_recursion_error() -> None:
    headers, _ = github(GITHUB_PUSH)
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"ref": ' + b"[" * 40 + b"]" * 40 + b"}"):
        with pytest.raises(WebhookRejected) as info:
            parse_push("github", headers, body)
        assert info.value.status == 400 and "deeper" in info.value.reason


def test_a_push_within_the_depth_limit_parses() -> None:
    headers, body = github({**GITHUB_PUSH, "x": [[[[[[[[{"a": 1}]]]]]]]]})
    assert nesting_depth(body) < MAX_DEPTH
    assert parse_push("github", headers, body) is not None


def test_the_apps_a_push_touched_are_refreshed_first_and_urgently() -> None:
    push = Push("github", frozenset({"example.com/org/repo"}), "main", "main",
                changed=frozenset({"teams/c/rc.yaml"}))
    order = push.refresh_order({"a": "teams/a", "b": "teams/b", "c": "teams/c", "d": "."})
    assert order == [("c", True), ("d", True), ("a", False), ("b", False)]


def test_a_branch_push_keeps_its_previous_commit_a_tag_push_does_not() -> None:
    from gitops_ray.runtime.webhook import _github_push, _gitlab_push

    branch = {"ref": "refs/heads/main", "before": "a" * 40, "after": "b" * 40,
              "repository": {"clone_url": "https://github.com/o/r.git"}}
    assert _github_push(branch).moved == ("a" * 40, "b" * 40)
    assert _gitlab_push({**branch, "checkout_sha": "b" * 40}).moved == ("a" * 40, "b" * 40)
    tag = {**branch, "ref": "refs/tags/v1"}
    assert _github_push(tag).moved is None and _github_push(tag).before == ""
