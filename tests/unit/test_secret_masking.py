"""An ignore rule cannot unmask a Secret: values are masked before any rule sees them.

Each attack is one a committer of the app's repository can write in its Application's
``ignoreDifferences``: a jq program that closes Argo CD's ``del(`` and copies a value into
an annotation (the copy survived the old, final masking), one that names a path after a
value, one that makes the value its error, a JSON pointer or a managers rule next to
them. Whatever the rule does, the token (and its base64 form) is in no output: unified
diff, ``-o json``, the web page's kept comparison, the warnings. Sync still writes real
values: the paths rules ignore on the masked copies are the real object's.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gitops_ray.diff import AppDiff, compare, compile_rules
from gitops_ray.diff.format import to_json, unified
from gitops_ray.health import assess
from gitops_ray.health.lua import LuaCheck, LuaChecks
from gitops_ray.reconcile.pipeline import Comparison
from gitops_ray.render.apps import Application, AppSource
from gitops_ray.runtime.compared import diff_text, remembered
from gitops_ray.secretmask import MASK, masked
from gitops_ray.sync.dryrun import prepare

TOKEN = "hunter2-s3cr3t-token"
B64 = base64.b64encode(TOKEN.encode()).decode()
OTHER_B64 = base64.b64encode(b"other-value").decode()
APP = Application("team-a", AppSource("https://git.example/a.git", "a"))

ATTACKS = [
    # the annotation copy (the jq worker's del mode: a whole new object)
    '.x) | .metadata.annotations.leak = (.data.token | @base64d) | (.',
    '.x) | .metadata.annotations.leak = .data.token | (.',
    '.x) | .metadata.annotations.leak = (.metadata.annotations'
    '["kubectl.kubernetes.io/last-applied-configuration"]) | (.',
    '.x) | .metadata.labels.leak = (.stringData.token // "none") | (.',
    # a path named after the value (paths mode: sync's ignored_paths)
    '.metadata.annotations[.data.token | @base64d]',
    # the value as the error message
    'error(.data.token | @base64d)',
    '.data.token | @base64d | fromjson',
]


def secret(token_b64: str = B64, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "team-a", "resourceVersion": "7",
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                         json.dumps({"data": {"token": token_b64}})}},
            "data": {"token": token_b64, "user": base64.b64encode(b"ray").decode()},
            **extra}


def rules_of(expression: str) -> Any:
    return compile_rules([{"kind": "Secret", "jqPathExpressions": [expression],
                           "jsonPointers": ["/data/user"]}])


def shown(diff: Any) -> str:
    app = AppDiff([diff])
    kept = remembered_text(app)
    return "\n".join([unified(diff), json.dumps(to_json(app)), kept, *app.warnings])


def remembered_text(app: AppDiff) -> str:
    """The web page's diff text, from what the controller keeps of a comparison."""
    kept = remembered(Comparison(APP, "abc", [], app))
    return "\n".join(diff_text(k) for k in kept.diffs)


def assert_no_value(text: str) -> None:
    for needle in (TOKEN, B64, OTHER_B64[:12]):
        assert needle not in text


@pytest.mark.parametrize("expression", ATTACKS)
def test_no_rule_moves_a_secret_value_into_the_diff(expression: str) -> None:
    desired = secret(OTHER_B64)
    live = secret()
    diff = compare(desired=desired, predicted=None, live=live, rules=rules_of(expression))
    assert diff.out_of_sync  # the values differ, and the diff still says so
    assert_no_value(shown(diff))
    prediction = compare(desired=desired, predicted=secret(OTHER_B64), live=live,
                         rules=rules_of(expression))
    assert_no_value(shown(prediction))


@pytest.mark.parametrize("expression", ATTACKS)
def test_no_rule_moves_a_value_through_sync_paths(expression: str) -> None:
    rules = rules_of(expression)
    live = secret()
    body = prepare(secret(OTHER_B64), live, rules)
    # what sync writes: git's value where git sets one, live's at ignored paths, nothing
    # else of live's anywhere (a path named after the token is not a path live has)
    assert body["data"]["token"] == OTHER_B64
    assert body["data"]["user"] == live["data"]["user"]  # /data/user is ignored: live kept
    assert TOKEN not in json.dumps(body["metadata"])


def test_a_rule_on_secret_data_still_keeps_the_live_value_on_sync() -> None:
    rules = compile_rules([{"kind": "Secret", "jsonPointers": ["/data/token"]}])
    live = secret()
    desired = secret(OTHER_B64)
    assert not compare(desired=desired, predicted=None, live=live, rules=rules).out_of_sync
    body = prepare(desired, live, rules)
    assert body["data"]["token"] == B64  # the real live value, not a mask
    jq = compile_rules([{"kind": "Secret", "jqPathExpressions": [".data.token"]}])
    assert prepare(desired, live, jq)["data"]["token"] == B64


def test_masks_still_tell_equal_from_different_and_string_data_from_data() -> None:
    rules = compile_rules([])
    same = compare(desired={**secret(), "data": {}, "stringData": {"token": TOKEN,
                                                                    "user": "ray"}},
                   predicted=None, live=secret(), rules=rules)
    assert not same.out_of_sync
    changed = compare(desired=secret(OTHER_B64), predicted=None, live=secret(), rules=rules)
    assert changed.out_of_sync
    assert changed.desired_normalized is not None and changed.live_normalized is not None
    desired_mask = changed.desired_normalized["data"]["token"]
    live_mask = changed.live_normalized["data"]["token"]
    assert desired_mask != live_mask and {desired_mask, live_mask} <= {MASK, MASK + "++++"}


def test_masking_copies_and_keeps_identity() -> None:
    live = secret()
    desired, predicted, same = masked(secret(), live, live)
    assert predicted is same and live["data"]["token"] == B64  # originals untouched
    assert desired is not None and desired["data"]["token"] == MASK


def test_a_lua_check_of_a_secret_sees_masks() -> None:
    checks = LuaChecks(exact={"Secret": LuaCheck(
        "k", 'return {status = "Healthy", message = obj.data.token .. " " .. '
             'obj.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]}')})
    verdict = assess(secret(), custom=checks)
    assert verdict is not None and verdict.message == f"{MASK} {MASK}"
