"""The one memory limit of every child process, with real children (Python, git)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops_ray import childproc, limits
from gitops_ray.diff.jqworker import JqWorkerError, new_pool
from gitops_ray.errors import ConfigError
from gitops_ray.render.helm import url_allowed
from gitops_ray.settings import load_settings
from gitops_ray.source.git import GitSource

MIB = limits.MIB


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    yield
    childproc.configure(childproc.AUTO)


def test_the_container_limit_is_read_from_cgroup_v2_then_v1(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    assert childproc.container_memory(v2, v1) is None  # no cgroup files at all
    v1.write_text(f"{512 * MIB}\n")
    assert childproc.container_memory(v2, v1) == 512 * MIB
    v1.write_text("9223372036854771712\n")  # v1's "unlimited"
    assert childproc.container_memory(v2, v1) is None
    v2.write_text("max\n")
    assert childproc.container_memory(v2, v1) is None
    v2.write_text(f"{256 * MIB}\n")
    assert childproc.container_memory(v2, v1) == 256 * MIB


def test_the_limit_is_half_the_container_or_the_setting() -> None:
    assert childproc.memory_limit(childproc.AUTO, 512 * MIB) == 256 * MIB
    assert childproc.memory_limit(childproc.AUTO, 0) == 0  # no container limit: none
    assert childproc.memory_limit(300 * MIB, 512 * MIB) == 300 * MIB
    assert childproc.memory_limit(0, 512 * MIB) == 0  # switched off
    assert childproc.memory_limit(1, None) == childproc.MIN_LIMIT


def test_the_setting_takes_quantities_auto_and_zero(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    for text, expected in (("256Mi", 256 * MIB), ("auto", childproc.AUTO), ("0", 0)):
        config.write_text(f"childMemoryLimit: {text}\n")
        assert load_settings(config, env={}).child_memory_limit == expected
    env = {"GITOPS_RAY_CHILD_MEMORY_LIMIT": "1Gi"}
    assert load_settings(None, env=env).child_memory_limit == 1024 * MIB
    with pytest.raises(ConfigError, match="childMemoryLimit"):
        load_settings(None, env={"GITOPS_RAY_CHILD_MEMORY_LIMIT": "lots"})


def test_value_file_hosts_are_a_setting(tmp_path: Path) -> None:
    env = {"GITOPS_RAY_VALUE_FILE_HOSTS": "Charts.Example.com, raw.example.org:8443"}
    settings = load_settings(None, env=env)
    assert settings.value_file_hosts == ("charts.example.com", "raw.example.org:8443")
    assert load_settings(None, env={}).value_file_hosts == ()
    with pytest.raises(ConfigError, match="valueFileHosts"):
        load_settings(None, env={"GITOPS_RAY_VALUE_FILE_HOSTS": "https://x.example.com/"})


@pytest.mark.parametrize(("url", "allowed"), [
    ("https://charts.example.com/v.yaml", True),
    ("https://CHARTS.example.com:443/v.yaml", True),
    ("https://charts.example.com.evil.test/v.yaml", False),
    ("https://evil.test/charts.example.com/v.yaml", False),
    ("http://169.254.169.254/latest/meta-data/", False),
    ("https://raw.example.org:8443/v.yaml", True),
    ("https://raw.example.org/v.yaml", False),  # another port than the one named
    ("https://charts.example.com:notaport/v.yaml", False),
])
def test_value_file_urls_match_a_host_exactly(url: str, allowed: bool) -> None:
    assert url_allowed(url, ("charts.example.com", "raw.example.org:8443")) is allowed


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, **childproc.popen_options())


def test_a_child_gets_the_limit_and_one_over_it_fails_alone() -> None:
    childproc.configure(128 * MIB)
    shown = _child("import resource; print(resource.getrlimit(resource.RLIMIT_DATA)[0])")
    assert int(shown.stdout) == 128 * MIB
    greedy = _child("b = bytearray(512 << 20); print(len(b))")
    assert greedy.returncode != 0 and not greedy.stdout
    assert childproc.out_of_memory(greedy.returncode, greedy.stderr)
    assert "MemoryLimitExceeded" in childproc.explain("helm template chart")
    assert "128 MiB" in childproc.explain("helm template chart")


def test_go_children_get_a_soft_limit_below_the_hard_one() -> None:
    childproc.configure(256 * MIB)
    env = childproc.popen_options({"PATH": "/bin"})["env"]
    assert env["PATH"] == "/bin"
    assert int(env["GOMEMLIMIT"]) < 256 * MIB
    childproc.configure(0)
    assert childproc.popen_options({"PATH": "/bin"}) == {"env": {"PATH": "/bin"}}
    assert childproc.popen_options() == {}


def test_out_of_memory_is_told_from_other_failures() -> None:
    assert childproc.out_of_memory(2, "fatal error: runtime: out of memory\n\ngoroutine 1")
    assert childproc.out_of_memory(128, "fatal: Out of memory, malloc failed (tried to "
                                        "allocate 1073741824 bytes)")
    assert not childproc.out_of_memory(0, "out of memory")  # it succeeded all the same
    assert not childproc.out_of_memory(1, "Error: template: x.yaml:1: function \"y\"")


def test_mirror_directories_are_not_derivable_from_the_url(tmp_path: Path) -> None:
    url = "https://github.com/other-team/config.git"
    one, same, other = GitSource(tmp_path / "a"), GitSource(tmp_path / "a"), \
        GitSource(tmp_path / "b")
    plain = hashlib.sha256(url.encode()).hexdigest()[:16]
    assert one.repo_dir(url).name != plain
    assert one.repo_dir(url) == same.repo_dir(url)  # one key per cache, kept on disk
    assert other.repo_dir(url).name != one.repo_dir(url).name
    key = tmp_path / "a" / ".secrets" / "mirror-key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32


def test_a_jq_rule_over_the_limit_fails_its_worker_alone() -> None:
    """The issue's jq rule reached ~800 MB inside its deadline; now its worker stops."""
    childproc.configure(128 * MIB)
    pool = new_pool(max_idle=0)  # a worker started now, with the limit
    try:
        with pytest.raises(JqWorkerError, match="MemoryLimitExceeded"):
            pool.run({"e": ".a | [range(0; 30000000)] | length as $n | .b",
                      "d": {"a": 1, "b": 2}, "m": ""}, 120.0)
        assert pool.run({"e": ".a", "d": {"a": 1, "b": 2}, "m": ""}, 120.0)["o"] == [
            {"b": 2}]  # the next request gets a new worker
    finally:
        pool.close()


def test_render_children_together_reserve_at_most_three_quarters_of_the_container() -> None:
    """Two children of half the container's memory each: the second waits for the first."""
    container = 1024 * MIB
    childproc.configure(container // 2)
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with childproc.slot(container):
            first_in.set()
            release.wait(60)

    def second() -> None:
        first_in.wait(60)
        with childproc.slot(container):
            second_in.set()

    threads = [threading.Thread(target=f) for f in (first, second)]
    for t in threads:
        t.start()
    assert first_in.wait(60)
    assert not second_in.wait(0.2)  # it waits (a short look, not a timing assertion)
    release.set()
    assert second_in.wait(60)
    for t in threads:
        t.join(60)
    childproc.configure(container // 4)  # three fit at once
    with childproc.slot(container), childproc.slot(container), childproc.slot(container):
        pass
    childproc.configure(0)  # no limit: no reservation
    with childproc.slot(container), childproc.slot(container), childproc.slot(container):
        pass
