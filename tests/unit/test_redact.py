"""Redaction and value-free error messages: the one rule, and every place it is applied."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from gitops_ray.diff.jqrule import safe_message
from gitops_ray.errors import RenderError
from gitops_ray.kube.errors import Invalid, error_from_response, without_values
from gitops_ray.logs import configure_logging, redact_url
from gitops_ray.redact import redact
from gitops_ray.render.documents import parse_yaml
from gitops_ray.render.helm import resolve_value_file
from gitops_ray.render.tools import ToolResult, tool_error
from gitops_ray.source.auth import Credentials, git_env, split_credentials
from gitops_ray.sync.events import event_for
from gitops_ray.sync.validate import validate_ray_objects


@pytest.mark.parametrize(("text", "safe"), [
    ("https://user:tok3n@github.com/org/r.git", "https://***@github.com/org/r.git"),
    ("https://ghp_tok3n@github.com/org/r.git", "https://***@github.com/org/r.git"),
    ("https://u:p@ss:w@rd@host:8443/r", "https://***@host:8443/r"),
    ("http://u:tok3n@127.0.0.1:9/r.git?x=a@b", "http://***@127.0.0.1:9/r.git?x=a@b"),
    ("ssh://git:tok3n@host/r", "ssh://***@host/r"),
    ("https://github.com/org/r.git", "https://github.com/org/r.git"),
    ("git@github.com:org/r.git", "git@github.com:org/r.git"),
    ("mail me at a@b.c", "mail me at a@b.c"),
    ("fatal: unable to access 'https://u:tok3n@h/r/': 401; also http://x:tok3n@y/z",
     "fatal: unable to access 'https://***@h/r/': 401; also http://***@y/z"),
    ('{"repoURL": "https://u:tok3n@h/r"}', '{"repoURL": "https://***@h/r"}'),
])
def test_redact_hides_every_userinfo(text: str, safe: str) -> None:
    assert redact(text) == safe
    assert "tok3n" not in redact(text)


def test_there_is_one_redaction_function() -> None:
    from gitops_ray import source
    assert redact_url is redact and source.redact is redact


@pytest.mark.parametrize(("url", "bare", "username", "token"), [
    ("https://ci:t%40k@h/r.git", "https://h/r.git", "ci", "t@k"),
    ("https://tok3n@h:8443/r.git", "https://h:8443/r.git", "tok3n", "configured"),
    ("http://ci:@h/r", "http://h/r", "ci", ""),
])
def test_userinfo_becomes_credentials_for_http(url: str, bare: str, username: str,
                                               token: str) -> None:
    found = Credentials(username="other", token="configured")
    got_url, creds = split_credentials(url, found)
    assert got_url == bare and creds is not None
    assert (creds.username, creds.token) == (username, token)


def test_ssh_keeps_the_user_and_drops_a_password_other_urls_unchanged() -> None:
    assert split_credentials("ssh://git:pw@h/r", None) == ("ssh://git@h/r", None)
    for url in ("https://h/r.git", "file:///tmp/r.git", "git@h:org/r.git"):
        assert split_credentials(url, None) == (url, None)


def test_a_token_reaches_git_through_the_environment_only(tmp_path: object) -> None:
    from pathlib import Path
    secrets = Path(str(tmp_path)) / ".secrets"
    _, creds = split_credentials("https://ci:tok3n@h/r", None)
    env = git_env(creds, secrets)
    assert env["GITOPS_RAY_CREDENTIAL_PASSWORD"] == "tok3n"
    assert env["GITOPS_RAY_CREDENTIAL_USERNAME"] == "ci"
    assert [k for k, v in env.items() if "tok3n" in v] == ["GITOPS_RAY_CREDENTIAL_PASSWORD"]
    assert env["GIT_ASKPASS"] == "/bin/false"  # askpass would get the user in its argv
    assert not any(p.is_file() for p in secrets.rglob("*"))  # nothing written to disk


def test_log_lines_are_redacted_even_in_exceptions() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("json", "info", stream)
    try:
        log = structlog.get_logger("t")
        log.warning("x", url="https://u:tok3n@h/r", nested={"a": ["http://u:tok3n@h"]})
        try:
            raise RuntimeError("cannot fetch https://u:tok3n@h/r")
        except RuntimeError:
            log.exception("failed")
        logging.getLogger("git.cmd").warning("stdlib https://u:tok3n@h/r")
        text = stream.getvalue()
        assert "tok3n" not in text
        assert json.loads(text.splitlines()[0])["url"] == "https://***@h/r"
        assert "https://***@h/r" in text.splitlines()[-1]
    finally:
        structlog.reset_defaults()
        root.handlers[:], root.level = saved[0], saved[1]


def test_event_messages_are_redacted() -> None:
    event = event_for({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
                      reason="ComparisonError", message="source: https://u:tok3n@h/r: 401")
    assert event["message"] == "source: https://***@h/r: 401"


# -- messages without document values ------------------------------------------------


@pytest.mark.parametrize(("message", "shown"), [
    ("Invalid numeric literal at line 1, column 5 (while parsing 'auth: MARK (a) b')",
     "Invalid numeric literal at line 1, column 5"),
    ('string ("MARK (x") cannot be parsed as a number', "string cannot be parsed as a number"),
    ('Cannot iterate over string ("MARK")', "Cannot iterate over string"),
    ('Cannot index string with string "MARK"', None),
    ("Invalid path expression with result \"MARK\"", "Invalid path expression"),
    ('string ("MARK") and number (1) cannot be added', "string and number cannot be added"),
    ("Cannot index MARK", None),  # error("Cannot index \(.data.x)")
    ("MARK", None),  # error(.data.x)
    ("Expected separator between values at line 1, column 6 (while parsing 'MARK x')",
     "Expected separator between values at line 1, column 6"),
])
def test_jq_messages_keep_libjq_words_only(message: str, shown: str | None) -> None:
    safe = safe_message(message)
    assert "MARK" not in safe
    assert safe == (shown or "runtime error (message withheld: it may quote the object)")


@pytest.mark.parametrize(("message", "safe"), [
    ('ConfigMap "x" is invalid: data[k k]: Invalid value: "MARK": a valid config key must',
     'ConfigMap "x" is invalid: data[k k]: Invalid value (withheld): a valid config key must'),
    ('spec.type: Unsupported value: "MA\\"RK": supported values: "ClusterIP"',
     'spec.type: Unsupported value (withheld): supported values: "ClusterIP"'),
    ("spec.replicas: Invalid value: -3: must be >= 0",
     "spec.replicas: Invalid value (withheld): must be >= 0"),
    ('spec: Invalid value: map[string]interface {}{"a":"MARK"}: bad',
     "spec: Invalid value (withheld)"),
    ("spec.x: Required value", "spec.x: Required value"),
])
def test_api_errors_drop_echoed_field_values(message: str, safe: str) -> None:
    assert without_values(message) == safe
    body = json.dumps({"kind": "Status", "message": message, "reason": "Invalid"}).encode()
    error = error_from_response(422, body, "PATCH /x")
    assert isinstance(error, Invalid) and "MARK" not in str(error)


def test_tool_errors_quote_neither_rendered_output_nor_yaml_values() -> None:
    rendered = ToolResult(1, stdout="apiVersion: v1\ndata:\n  token: MARK\n", stderr="")
    assert "MARK" not in str(tool_error("helm template .", rendered))
    decode = ToolResult(1, "", "Error: yaml: unmarshal errors:\n  line 3: cannot unmarshal "
                                "!!str `MARK` into int; repo https://u:tok3n@h/c")
    message = str(tool_error("helm template .", decode))
    assert "MARK" not in message and "tok3n" not in message
    assert "cannot unmarshal !!str `…` into int" in message


def test_helm_value_files_with_credentials_are_refused(tmp_path: object) -> None:
    from pathlib import Path
    with pytest.raises(RenderError, match="credentials in a URL") as err:
        resolve_value_file(Path(str(tmp_path)), ".", "https://u:tok3n@h/values.yaml",
                           ignore_missing=False, hosts=("h",))
    assert "tok3n" not in str(err.value)
    assert resolve_value_file(Path(str(tmp_path)), ".", "https://h/values.yaml",
                              ignore_missing=False, hosts=("h",)) == "https://h/values.yaml"


def test_ray_validation_names_the_field_not_its_value() -> None:
    group = {"groupName": "g", "replicas": "MARK", "minReplicas": -7,
             "template": {"spec": {"containers": [{"name": "c"}]}}}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
               "spec": {"headGroupSpec": group, "workerGroupSpecs": [group]}}
    problems = validate_ray_objects([cluster])
    assert any("replicas must be a non-negative integer, got a string" in p for p in problems)
    assert any("got a negative number" in p for p in problems)
    assert not any("MARK" in p or "-7" in p for p in problems)


@pytest.mark.parametrize("text", [
    "data:\n  token: MARK\n\tbad: 1\n",
    'data:\n  token: "MARK\\q"\n',
    "data:\n  token: MARK: x\n",
    "data:\n  token: [MARK\n",
])
def test_yaml_errors_name_file_and_line_not_the_text(text: str) -> None:
    with pytest.raises(RenderError) as err:
        parse_yaml(text, origin="app/cm.yaml")
    assert str(err.value).startswith("app/cm.yaml:") and "MARK" not in str(err.value)
