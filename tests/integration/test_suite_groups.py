"""The suite's groups hold in a real xdist run (tests/harness/groups.py).

pytest-xdist's own ``loadgroup`` stopped grouping under pytest 9 without a word: every
test was dealt out alone, and each worker started the heavy stacks again. So a run of two
modules on two workers is checked here: each module's tests ran in one worker.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.harness.groups import ARGOCD, RAY_A, RAY_B, group_of_nodeid

ROOT = Path(__file__).parents[2]
MODULES = ("tests/unit/test_app_scan.py", "tests/unit/test_code_size.py")


def test_a_tests_id_names_its_group() -> None:
    assert group_of_nodeid("tests/e2e/test_get.py::test_x[a::b]") == RAY_A
    assert group_of_nodeid("tests/e2e/test_new_one.py::test_x") == RAY_B
    assert group_of_nodeid("tests/argocd/test_hooks_argocd.py::test_x") == ARGOCD
    assert group_of_nodeid("tests/argocd/test_ui_views.py::test_x") == "argocd/test_ui_views.py"
    assert group_of_nodeid("tests/unit/test_ago.py::T::test_x") == "unit/test_ago.py"


def test_each_modules_tests_run_in_one_worker() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
         "--no-loadscope-reorder", "-v", "-p", "no:cacheprovider", *MODULES],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+?)::", result.stdout):
        workers[module].add(worker)
    assert set(workers) == set(MODULES)
    assert all(len(ran_in) == 1 for ran_in in workers.values()), dict(workers)
