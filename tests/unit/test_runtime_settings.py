"""Settings: file < environment < flags, validation with clear errors, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops_ray.errors import ConfigError
from gitops_ray.settings import (
    OPTIONS,
    AppSourceSpec,
    PodShapes,
    Secret,
    load_settings,
    parse_duration,
)


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("text", "seconds"), [
    (90, 90.0), (1.5, 1.5), ("90", 90.0), ("90s", 90.0), ("3m", 180.0), ("200ms", 0.2),
    ("1h", 3600.0), (" 2 s ", 2.0),
])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["abc", "-1", "5d", True, "1m30s"])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_defaults_follow_argo_cd() -> None:
    s = load_settings(env={})
    assert (s.interval, s.jitter) == (120.0, 60.0)
    assert s.autosync.self_heal.delay(1) == 2 and s.autosync.self_heal.cap == 300
    assert s.autosync.retry_limit == 5
    assert s.leader_election and s.lease.namespace == "gitops-ray"
    assert (s.lease.lease_duration, s.lease.renew_deadline, s.lease.retry_period) == (15, 10, 2)
    assert s.lease.identity  # hostname_random


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    path = write(tmp_path, {"interval": "5m", "jitter": "10s", "workers": 3,
                            "listen": {"metrics": ":9000"}})
    s = load_settings(path, env={"GITOPS_RAY_INTERVAL": "1m", "GITOPS_RAY_JITTER": "2s"},
                      flags={"jitter": "1s", "workers": None})
    assert s.interval == 60.0  # env beats the file
    assert s.jitter == 1.0  # flags beat env
    assert s.workers == 3  # an absent flag (None) does not override
    assert s.listen.metrics == ":9000"


def test_every_option_has_a_flag_or_says_why_not() -> None:
    flags = [o.flag_name for o in OPTIONS if o.flag_name]
    assert len(flags) == len(set(flags))
    assert {o.key for o in OPTIONS if o.flag_name is None} == {"webhook.secret"}
    assert all(o.env.startswith("GITOPS_RAY_") for o in OPTIONS)


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'intervall'.*'interval'"):
        load_settings(write(tmp_path, {"intervall": "1m"}), env={})
    with pytest.raises(ConfigError, match=r"leaderElection.leaseDuraton"):
        load_settings(write(tmp_path, {"leaderElection": {"leaseDuraton": 3}}), env={})


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"interval \(--interval / GITOPS_RAY_INTERVAL\): "
                                          r"expected a duration"):
        load_settings(write(tmp_path, {"interval": "soon"}), env={})
    with pytest.raises(ConfigError, match=r"log.format .*: expected one of"):
        load_settings(env={"GITOPS_RAY_LOG_FORMAT": "xml"})
    with pytest.raises(ConfigError, match=r"controlNamespace"):
        load_settings(flags={"controlNamespace": "Not_A_Namespace"}, env={})
    with pytest.raises(ConfigError, match=r"listen.webhook"):
        load_settings(flags={"listen.webhook": "localhost"}, env={})


def test_lease_durations_are_checked() -> None:
    with pytest.raises(ConfigError, match="leaseDuration must exceed renewDeadline"):
        load_settings(env={}, flags={"leaderElection.leaseDuration": "5s",
                                     "leaderElection.renewDeadline": "10s"})


def test_app_sources_from_file_and_flags(tmp_path: Path) -> None:
    path = write(tmp_path, {"appSources": [{"repo": "https://g/x.git", "path": "apps"}]})
    s = load_settings(path, env={"GITOPS_RAY_REPO": "file:///r"},
                      flags={"apps": "more", "revision": "main"})
    assert s.app_sources == (AppSourceSpec("https://g/x.git", "HEAD", "apps"),
                             AppSourceSpec("file:///r", "main", "more"))
    with pytest.raises(ConfigError, match="repo is required"):
        load_settings(write(tmp_path, {"appSources": [{"path": "apps"}]}), env={})
    with pytest.raises(ConfigError, match="--repo"):
        load_settings(env={}, flags={"apps": "apps"})


def test_inline_applications_must_be_applications(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"applications\[0\]"):
        load_settings(write(tmp_path, {"applications": [{"kind": "Deployment"}]}), env={})


def test_secrets_are_read_from_files_and_never_printed(tmp_path: Path) -> None:
    (tmp_path / "hook").write_text("s3cr3t-hook\n")
    (tmp_path / "token").write_text("s3cr3t-token\n")
    path = write(tmp_path, {
        "webhook": {"secretFile": str(tmp_path / "hook")},
        "credentials": [{"url": "https://github.com/", "username": "x",
                         "tokenFile": str(tmp_path / "token")},
                        {"url": "https://github.com/org/", "secret": "org-creds"}]})
    s = load_settings(path, env={})
    assert s.webhook_secret.reveal() == "s3cr3t-hook"
    assert s.credentials[0].url == "https://github.com/org/"  # longest prefix first
    assert s.credentials[1].password_file == str(tmp_path / "token")
    assert "s3cr3t" not in repr(s) and "s3cr3t" not in str(s)


def test_env_secret_wins_over_file(tmp_path: Path) -> None:
    (tmp_path / "hook").write_text("from-file")
    s = load_settings(env={"GITOPS_RAY_WEBHOOK_SECRET": "from-env",
                           "GITOPS_RAY_WEBHOOK_SECRET_FILE": str(tmp_path / "hook")})
    assert s.webhook_secret == Secret("from-env")


def test_missing_secret_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"webhook.secretFile: cannot read"):
        load_settings(env={"GITOPS_RAY_WEBHOOK_SECRET_FILE": str(tmp_path / "nope")})


def test_credentials_need_something_to_authenticate_with(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"credentials\[0\]: give"):
        load_settings(write(tmp_path, {"credentials": [{"url": "https://x/"}]}), env={})
    with pytest.raises(ConfigError, match=r"credentials\[0\]: cannot read"):
        load_settings(write(tmp_path, {"credentials": [{"url": "https://x/",
                                                        "sshKeyFile": "/nonexistent"}]}),
                      env={})
    with pytest.raises(ConfigError, match="unknown key 'token'"):
        load_settings(write(tmp_path, {"credentials": [{"url": "https://x/", "token": "t"}]}),
                      env={})


def test_unreadable_or_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read settings file"):
        load_settings(tmp_path / "missing.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(bad, env={})


def test_pod_shape_configmaps_from_file_env_and_flags(tmp_path: Path) -> None:
    assert load_settings(env={}).pod_shapes == PodShapes("", "")
    path = write(tmp_path, {"podShapes": {"instanceTypesConfigMap": "gr-instance-types",
                                          "patchesConfigMap": "gr-patches"}})
    s = load_settings(path, env={"GITOPS_RAY_PATCHES_CONFIGMAP": "env-patches"})
    assert s.pod_shapes == PodShapes("gr-instance-types", "env-patches")
    with pytest.raises(ConfigError, match=r"podShapes\.instanceTypesConfigMap"):
        load_settings(env={}, flags={"podShapes.instanceTypesConfigMap": "Not_A_Name"})


def test_a_hostile_settings_file_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """The settings file is measured like config-repo files: an alias bomb, a huge file and
    bytes that are not text are clear errors, not a hung or killed controller."""
    bomb = tmp_path / "bomb.yaml"
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    bomb.write_text("\n".join(levels) + "\n")
    huge = tmp_path / "huge.yaml"
    huge.write_text("interval: 2m\n" + "#" * (9 * 1024 * 1024) + "\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00interval")
    for path, expected in ((bomb, "settings file"), (huge, "settings file"),
                           (binary, "not UTF-8")):
        with pytest.raises(ConfigError, match=expected):
            load_settings(path, env={})
