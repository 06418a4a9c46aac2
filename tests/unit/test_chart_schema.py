"""The chart's ``values.schema.json`` validates ``config`` with the controller's own rules.

The schema is generated from ``settings.OPTIONS`` (gitops_ray/schema.py); these
tests fail when the committed file is stale, and check that the generated patterns accept
and reject what the settings loader does. Helm's own validation of it runs in
tests/integration/test_chart.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitops_ray.errors import ConfigError
from gitops_ray.schema import (
    CHART_OWNED,
    chart_values_schema,
    main,
    render,
    settings_schema,
)
from gitops_ray.settings import OPTIONS, load_settings

SCHEMA = Path(__file__).resolve().parents[2] / "charts" / "gitops-ray" / "values.schema.json"


def test_committed_schema_is_the_generated_one() -> None:
    text = SCHEMA.read_text()
    assert text == render(chart_values_schema(json.loads(text))), (
        "run: python -m gitops_ray.schema charts/gitops-ray/values.schema.json")
    assert main([str(SCHEMA), "--check"]) == 0


def test_every_option_is_in_the_full_schema() -> None:
    schema = settings_schema()
    for option in OPTIONS:
        node = schema
        for part in option.key.split("."):
            assert node["additionalProperties"] is False
            node = node["properties"][part]
        assert node["description"] == option.help
    assert {"appSources", "applications", "credentials"} <= set(schema["properties"])


def test_chart_owned_keys_are_not_in_config() -> None:
    config = json.loads(SCHEMA.read_text())["properties"]["config"]
    assert "controlNamespace" not in config["properties"]
    assert "listen" not in config["properties"]
    assert "credentials" not in config["properties"]
    assert set(config["properties"]["leaderElection"]["properties"]) == {
        "leaseDuration", "renewDeadline", "retryPeriod"}
    assert "leaderElection.identity" in CHART_OWNED


@pytest.mark.parametrize("value", ["90", "90s", "3m", "200ms", "1.5h", " 2m "])
def test_duration_pattern_accepts_what_the_loader_accepts(tmp_path: Path, value: str) -> None:
    pattern = settings_schema()["properties"]["interval"]["pattern"]
    assert re.search(pattern, value)
    path = tmp_path / "s.yaml"
    path.write_text(f"interval: '{value}'\n")
    load_settings(path, env={})


@pytest.mark.parametrize("value", ["2x", "-1s", "m", "1 d"])
def test_duration_pattern_rejects_what_the_loader_rejects(tmp_path: Path, value: str) -> None:
    pattern = settings_schema()["properties"]["interval"]["pattern"]
    assert not re.search(pattern, value)
    path = tmp_path / "s.yaml"
    path.write_text(f"interval: '{value}'\n")
    with pytest.raises(ConfigError):
        load_settings(path, env={})


def test_address_and_url_patterns() -> None:
    props = settings_schema()["properties"]
    address = props["listen"]["properties"]["metrics"]["pattern"]
    assert all(re.search(address, a) for a in (":8080", "127.0.0.1:80", "[::1]:9", ""))
    assert not any(re.search(address, a) for a in ("8080", "host", ":port"))
    url = props["webhook"]["properties"]["advertiseUrl"]["pattern"]
    assert re.search(url, "http://10.0.0.7:9292/webhook") and re.search(url, "")
    assert not re.search(url, "ftp://x")


def test_log_level_is_an_enum() -> None:
    log = settings_schema()["properties"]["log"]["properties"]
    assert log["level"]["enum"] == ["debug", "info", "warning", "error"]
    assert log["format"]["enum"] == ["auto", "json", "console"]
