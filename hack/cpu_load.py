"""Run a command while every core is kept busy by another process (``make test-stress``).

Why: the suite has to pass where users run it, on a laptop compiling something or a CI
runner shared with other jobs. On an idle machine a test that asserts the state right
after an asynchronous call (an object gone right after its delete, a counter right after
the request that bumps it) passes almost every time and hides its bug; with each core
contended by a process at the same priority the controller, the API server and the test
lose the CPU at random points, and such a test fails within a run or two.

Usage::

    python hack/cpu_load.py [--cores N] [--limit SECONDS] -- COMMAND [ARGS...]

One burner per core (default: every core this process may run on), at normal priority,
started before the command and stopped when it ends; the exit code is the command's. A
burner also stops on its own when this script dies (it watches its parent) or after
``--limit`` seconds, so a killed run never leaves a machine spinning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

DEFAULT_LIMIT = 3 * 3600.0


def burn(parent: int, limit: float) -> None:
    """Spin until the parent is gone or ``limit`` seconds have passed."""
    deadline = time.monotonic() + limit
    while os.getppid() == parent and time.monotonic() < deadline:
        for _ in range(200_000):
            pass


def start_burners(cores: int, limit: float) -> list[subprocess.Popen[bytes]]:
    me = str(os.getpid())
    return [subprocess.Popen([sys.executable, __file__, "--burn", me, "--limit", str(limit)])
            for _ in range(cores)]


def stop(burners: list[subprocess.Popen[bytes]]) -> None:
    for proc in burners:
        proc.terminate()
    for proc in burners:
        proc.wait(30)


def run(command: list[str], cores: int, limit: float) -> int:
    burners = start_burners(cores, limit)
    print(f"cpu_load: {cores} burner(s) running (pids "
          f"{' '.join(str(p.pid) for p in burners)}) for: {' '.join(command)}",
          file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
    finally:
        stop(burners)
        print(f"cpu_load: command finished after {time.monotonic() - started:.0f}s; "
              "burners stopped", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--limit", type=float, default=DEFAULT_LIMIT,
                        help="seconds after which a burner stops anyway")
    parser.add_argument("--burn", type=int, help=argparse.SUPPRESS)  # internal: parent pid
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.burn is not None:
        burn(args.burn, args.limit)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("say which command to run after --")
    return run(command, max(1, args.cores), args.limit)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
