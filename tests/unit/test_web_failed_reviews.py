"""Failed reviews of the web page's actions are limited per client (issue 36, item 10)."""

from __future__ import annotations

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.runtime.web.auth import CLIENTS_TRACKED, Denied, FailedReviews
from gitops_ray.settings import load_settings


def test_a_client_is_refused_after_its_failures_until_the_oldest_ages_out() -> None:
    now = [1000.0]
    limit = FailedReviews(allowed=3, window=60.0, clock=lambda: now[0])
    for _ in range(3):
        limit.check("10.0.0.1")
        limit.record("10.0.0.1")
        now[0] += 10
    with pytest.raises(Denied) as refused:
        limit.check("10.0.0.1")
    assert refused.value.status == 429 and "retry in 31 s" in refused.value.message
    limit.check("10.0.0.2")  # another client is not affected
    now[0] += 31  # the first failure is now 61 s old
    limit.check("10.0.0.1")


def test_the_clients_remembered_are_bounded() -> None:
    limit = FailedReviews(allowed=1, window=60.0, clock=lambda: 0.0)
    for i in range(CLIENTS_TRACKED + 10):
        limit.record(f"client-{i}")
    limit.check("client-0")  # forgotten: the oldest go first
    with pytest.raises(Denied):
        limit.check(f"client-{CLIENTS_TRACKED + 9}")


def test_the_token_audience_cannot_be_empty() -> None:
    assert load_settings(env={}).ui_token_audience == "gitops-ray"
    with pytest.raises(ConfigError, match="tokenAudience"):
        load_settings(env={"GITOPS_RAY_UI_TOKEN_AUDIENCE": " "})
