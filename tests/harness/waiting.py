"""Waiting on a real condition, the only way tests here wait.

Why a helper: Kubernetes and the controller finish their work asynchronously (a delete
is accepted before the object is gone, a metric is bumped after the write it counts), and
a test that asserts the state right after the call passes on an idle machine and fails on
a busy one. ``eventually`` polls the condition itself; the timeout is a liveness bound
for a hung test, never a claim about speed, so it is generous.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(condition: Callable[[], T], timeout: float = 60.0,
               message: str = "condition") -> T:
    """``condition()``'s first truthy value; fails the test if none comes within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{message} not met within {timeout}s"
        time.sleep(0.1)
