"""The libjq worker pool: real deadlines, recovery, and no orphaned workers."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from gitops_ray.childpool import Pool
from gitops_ray.diff.jqworker import JqTimeout, new_pool

ROOT = Path(__file__).parents[2]
T = TypeVar("T")


@pytest.fixture
def pool() -> Iterator[Pool]:
    workers = new_pool(max_idle=2)
    yield workers
    workers.close()


def test_answers_outputs_errors_and_paths(pool: Pool) -> None:
    assert pool.run({"e": ".a", "d": {"a": 1, "b": 2}}, 5) == {"o": [{"b": 2}]}
    assert pool.run({"e": ".missing[]", "d": {}}, 5) == {"x": "Cannot iterate over null (null)"}
    assert pool.run({"e": ".a) , (.b", "d": {"a": 1, "b": 2}}, 5) == {"o": [{"b": 2}, 2]}
    assert pool.run({"e": ".a[]", "d": {"a": [1, 2]}, "m": "paths"}, 5) == {
        "o": [{"a": []}], "p": [[["a", 0], ["a", 1]]]}


def test_stops_after_two_outputs(pool: Pool) -> None:
    reply = pool.run({"e": ".a) | range(1e12) | (.", "d": {"a": 1}}, 5)
    assert len(reply["o"]) == 2


def test_deadline_kills_a_runaway_expression_and_the_pool_recovers(pool: Pool) -> None:
    with pytest.raises(JqTimeout):
        pool.run({"e": "until(false; .)", "d": {}}, 0.2)
    assert pool.run({"e": ".a", "d": {"a": 1}}, 5) == {"o": [{}]}


def test_values_json_cannot_carry_are_sent_as_text(pool: Pool) -> None:
    doc = {"a": datetime.date(2026, 1, 2), "b": 1}
    assert pool.run({"e": ".b", "d": doc}, 5) == {"o": [{"a": "2026-01-02"}]}


def test_a_worker_outlives_the_thread_that_needed_it(pool: Pool) -> None:
    thread = threading.Thread(target=pool.run, args=({"e": ".a", "d": {}}, 5))
    thread.start()
    thread.join()
    assert pool.run({"e": ".a", "d": {"a": 1, "b": 2}}, 5) == {"o": [{"b": 2}]}


def test_a_stuck_worker_dies_with_its_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, threading, time
        sys.path.insert(0, {str(ROOT)!r})
        from gitops_ray.diff.jqworker import POOL
        threading.Thread(target=POOL.run, args=({{"e": "until(false; .)", "d": {{}}}}, 600),
                         daemon=True).start()
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        worker = _wait_for(lambda: _children(parent.pid))
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert worker is not None
    assert _wait_for(lambda: not _alive(worker))


def _children(pid: int) -> int | None:
    out = subprocess.run(["pgrep", "-P", str(pid)], check=False, capture_output=True,
                         text=True).stdout
    return int(out.split()[0]) if out.split() else None


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(condition: Callable[[], T], limit: float = 30.0) -> T:
    """Poll until ``condition()`` is truthy (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_environment_is_not_passed(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITOPS_RAY_TEST_SECRET", "x")
    reply = pool.run({"e": ".a) | $ENV | (.", "d": {}}, 5)
    assert "GITOPS_RAY_TEST_SECRET" not in reply["o"][0]
    assert os.environ["GITOPS_RAY_TEST_SECRET"] == "x"
