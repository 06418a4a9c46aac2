"""A Lua health check cannot hang, freeze or outlive its deadline (a real worker process).

The attacks are the ones a security review ran against the in-process Lua: a returned
table whose ``__index`` loops forever (the host read ``status`` through it and hung), a
pattern that backtracks inside one ``string.find`` call (no instruction hook fires
there), a ``__gc`` finaliser (it ran later, with hooks off, with the GIL held), error
values and messages whose ``__tostring`` loops. Each ends as that object's Unknown
health, with a message that says why, and the next check gets an answer.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest

from gitops_ray.health import HealthStatus
from gitops_ray.health.lua import (
    BUDGET_ERROR,
    MAX_MESSAGE,
    POOL,
    TIMEOUT_ERROR,
    LuaCheck,
    run_lua_health,
)

OBJ: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "annotations": {"note": "hi"}}}
LOOP = "function() while true do end end"
HEALTHY = 'return {status = "Healthy", message = obj.metadata.annotations.note}'


def check(script: str, obj: dict[str, Any] = OBJ, **kwargs: Any) -> Any:
    return run_lua_health(LuaCheck("k", script), obj, **kwargs)


def still_answers() -> None:
    verdict = check(HEALTHY, timeout=60)  # a busy machine must not make this one overrun
    assert verdict is not None
    assert (verdict.status, verdict.message) == (HealthStatus.HEALTHY, "hi")


@pytest.mark.parametrize(("script", "expected"), [
    (f"return setmetatable({{}}, {{__index = {LOOP}}})", None),  # rawget: no status
    (f'return setmetatable({{status = "Healthy"}}, {{__index = {LOOP}}})', ""),
    (f'return {{status = "Healthy", message = setmetatable({{}}, {{__tostring = {LOOP}}})}}',
     ""),
    ('return setmetatable({}, {__index = function() return "Healthy" end})', None),
])
def test_metamethods_of_what_a_check_returns_never_run(script: str, expected: Any) -> None:
    verdict = check(script, timeout=60)
    if expected is None:
        assert verdict is None  # no status of its own: no verdict
    else:
        assert verdict is not None and verdict.message == expected
    still_answers()


def test_an_error_value_with_tostring_is_not_called() -> None:
    verdict = check(f"error(setmetatable({{}}, {{__tostring = {LOOP}}}))", timeout=60)
    assert verdict is not None and verdict.status is HealthStatus.UNKNOWN
    assert verdict.message == "the check failed"
    still_answers()


def test_gc_metamethods_are_refused() -> None:
    verdict = check(f"setmetatable({{}}, {{__gc = {LOOP}}}) return {{status = 'Healthy'}}",
                    timeout=60)
    assert verdict is not None and verdict.status is HealthStatus.UNKNOWN
    assert "__gc metamethods are not allowed" in verdict.message
    late = check(f"local mt = {{}} local t = setmetatable({{}}, mt) mt.__gc = {LOOP} "
                 "for i = 1, 200000 do local x = {i} end return {status = 'Healthy'}",
                 timeout=60)  # a __gc added later does not make a finaliser (Lua 5.4)
    assert late is not None and late.status is HealthStatus.HEALTHY
    still_answers()


def test_a_pattern_that_never_yields_is_ended_by_the_deadline() -> None:
    trim = ('local s = obj.metadata.annotations.note '
            'return {status = "Healthy", message = s:match("^%s*(.-)%s*$")}')
    hostile = {**OBJ, "metadata": {"name": "c", "annotations": {
        "note": "x" + " " * 200_000 + "x"}}}  # what a committer puts in git
    verdict = check(trim, hostile, timeout=0.5)
    assert verdict is not None and verdict.status is HealthStatus.UNKNOWN
    assert verdict.message == TIMEOUT_ERROR.format(timeout=0.5)
    still_answers()


def test_a_busy_loop_is_stopped_by_the_instruction_budget() -> None:
    verdict = check("while true do end", timeout=60)
    assert verdict is not None and verdict.message == BUDGET_ERROR
    still_answers()


def test_messages_are_bounded_and_checks_run_concurrently() -> None:
    long = check('return {status = "Healthy", message = string.rep("x", 1e7)}', timeout=60)
    assert long is not None and len(long.message) == MAX_MESSAGE
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda _: check(HEALTHY, timeout=60), range(16)))
    assert all(v is not None and v.message == "hi" for v in verdicts)


def test_a_timed_out_worker_is_gone_and_not_reused() -> None:
    still_answers()
    before = {w.proc.pid for w in POOL._idle}
    check('local s = string.rep("a", 300000) return {status = "Healthy",'
          ' message = s:match(string.rep("a*", 20) .. "b")}', timeout=0.3)
    after = {w.proc.pid for w in POOL._idle}
    assert after <= before and len(after) < len(before)  # the one it used was killed
    still_answers()


def test_the_worker_sees_no_environment() -> None:
    verdict = check('return {status = "Healthy", message = tostring(os.getenv)}', timeout=60)
    assert verdict is not None and verdict.message == "nil"
