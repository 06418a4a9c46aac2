"""Chart version constraints resolve as Argo CD's Masterminds/semver v3 resolves them."""

from __future__ import annotations

import itertools

import pytest

from gitops_ray.source.semver import ConstraintError, Version, best_match, parse_constraint

VERSIONS = ["1.4.0", "1.5.0", "1.5.1", "v1.5.2", "1.6.0-rc.1", "1.6.0", "2.0.0", "0.2.3",
            "0.2.9", "0.3.0", "0.0.3", "0.0.4", "not-a-version"]


@pytest.mark.parametrize(("constraint", "expected"), [
    ("1.5.1", "1.5.1"), ("=1.5.1", "1.5.1"), ("1.5.*", "v1.5.2"), ("1.5.x", "v1.5.2"),
    (">=1.5.0 <2.0.0", "1.6.0"), (">=1.5.0, <2.0.0", "1.6.0"), ("~1.5.0", "v1.5.2"),
    ("^1.4", "1.6.0"), ("^0.2.3", "0.2.9"), ("^0.0.3", "0.0.3"), ("*", "2.0.0"),
    ("<1.5", "1.4.0"), ("<=1.5", "v1.5.2"), (">1.5", "2.0.0"), (">1.5.x", "2.0.0"),
    ("1.4.0 - 1.5.1", "1.5.1"), ("!=2.0.0", "1.6.0"), ("1.4.x || 0.x", "1.4.0"),
    ("1.6.0-rc.1", "1.6.0-rc.1"), (">=1.6.0-rc.0 <1.6.0", None), ("~> 1.5", "v1.5.2"),
    ("3.x", None),
])
def test_best_match(constraint: str, expected: str | None) -> None:
    assert best_match(VERSIONS, parse_constraint(constraint)) == expected


def test_prereleases_only_when_asked() -> None:
    assert best_match(["1.0.0", "2.0.0-rc.1"], parse_constraint(">=1.0")) == "1.0.0"


def test_order() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
               "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
    parsed = [Version.parse(v) for v in ordered]
    assert all(a is not None and b is not None and a < b
               for a, b in itertools.pairwise(parsed))
    assert Version.parse("1.2") == Version.parse("v1.2.0+build")


@pytest.mark.parametrize("text", ["", "latest", ">=1.0 <", "1.2.3.4", "x" * 300, "main"])
def test_not_constraints(text: str) -> None:
    with pytest.raises(ConstraintError):
        parse_constraint(text)


def test_short_revisions() -> None:
    from gitops_ray.render.apps import short_revision

    sha = "0123456789abcdef0123456789abcdef01234567"
    assert short_revision(sha) == sha[:12]
    assert short_revision("1.5.1") == "1.5.1"
    assert short_revision(f"1.5.1,{sha}") == f"1.5.1,{sha[:12]}"
    assert short_revision("sha256:" + "f" * 64) == "sha256:" + "f" * 12
