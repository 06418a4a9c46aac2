"""Chart archives and indexes are read within bounds, and never outside the chart."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from gitops_ray.source.charts import is_oci, parse_index
from gitops_ray.source.chartstore import ChartLimits, InvalidChart, pick_version, unpack
from gitops_ray.source.http import TooLarge, host_allowed
from gitops_ray.source.oci import reference, tag_of


def archive(members: list[tuple[str, bytes | None, str]]) -> bytes:
    """A .tgz of (name, content, link target); content None: a directory."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


CHART = [("rc/Chart.yaml", b"apiVersion: v2\nname: rc\nversion: 1.0.0\n", ""),
         ("rc/templates/cm.yaml", b"kind: ConfigMap\n", "")]


def test_unpack_gives_the_chart_directory(tmp_path: Path) -> None:
    root = unpack(archive(CHART), tmp_path / "v1", ChartLimits(), "test")
    assert root == tmp_path / "v1" / "rc"
    assert (root / "templates" / "cm.yaml").read_text() == "kind: ConfigMap\n"


@pytest.mark.parametrize(("members", "message"), [
    ([*CHART, ("rc/templates/link", None, "/etc/passwd")], "links are refused"),
    ([*CHART, ("../escape.yaml", b"x", "")], "leaves the chart"),
    ([*CHART, ("/abs.yaml", b"x", "")], "leaves the chart"),
    ([*CHART, ("other/Chart.yaml", b"x", "")], "more than one directory"),
    ([("rc/values.yaml", b"a: 1\n", "")], "no rc/Chart.yaml"),
])
def test_unpack_refuses(tmp_path: Path, members: list[tuple[str, bytes | None, str]],
                        message: str) -> None:
    with pytest.raises(InvalidChart, match=message):
        unpack(archive(members), tmp_path / "v1", ChartLimits(), "test")
    assert not (tmp_path / "v1").exists()
    assert not (tmp_path / "escape.yaml").exists()


def test_unpack_is_bounded(tmp_path: Path) -> None:
    bomb = archive([*CHART, ("rc/zeros", b"\0" * 2_000_000, "")])
    assert len(bomb) < 20_000
    with pytest.raises(TooLarge, match="unpacks to more than"):
        unpack(bomb, tmp_path / "v1", ChartLimits(unpacked_bytes=1_000_000), "test")
    many = archive([*CHART, *((f"rc/f{i}", b"", "") for i in range(20))])
    with pytest.raises(TooLarge):
        unpack(many, tmp_path / "v2", ChartLimits(files=10), "test")
    with pytest.raises(InvalidChart, match="not a chart archive"):
        unpack(b"not gzip", tmp_path / "v3", ChartLimits(), "test")


def test_index() -> None:
    text = (b"apiVersion: v1\nentries:\n  rc:\n  - version: 1.0.0\n    digest: AB12\n"
            b"    urls: [rc-1.0.0.tgz]\n  - version: 1.1.0\n    urls: []\n")
    entries = parse_index(text, "rc", "repo")
    assert entries is not None
    assert [(e.version, e.digest, e.urls) for e in entries] == [
        ("1.0.0", "ab12", ("rc-1.0.0.tgz",)), ("1.1.0", "", ())]
    assert parse_index(text, "other", "repo") is None
    with pytest.raises(InvalidChart, match="aliases"):
        parse_index(b"a: &x [1]\nb: *x\nentries: {}\n", "rc", "repo")
    with pytest.raises(InvalidChart, match="not a Helm repository index"):
        parse_index(b"- 1\n", "rc", "repo")


def test_pick_version() -> None:
    versions = ("1.4.0", "1.5.0", "1.5.1", "2.0.0-rc.1")
    assert pick_version(versions, "1.5.0", "w") == "1.5.0"
    assert pick_version(versions, "1.5.*", "w") == "1.5.1"
    assert pick_version(versions, "", "w") == "1.5.1"
    assert pick_version(versions, "2.0.0-rc.1", "w") == "2.0.0-rc.1"
    with pytest.raises(Exception, match=r"no version matches '3\.x'"):
        pick_version(versions, "3.x", "w")
    with pytest.raises(Exception, match="neither a version nor a version constraint"):
        pick_version(versions, "main", "w")


def test_oci_references_and_hosts() -> None:
    assert is_oci("oci://r.example/charts") and is_oci("r.example/charts")
    assert not is_oci("https://charts.example/")
    assert reference("oci://r.example:5000/a/b", "rc") == ("https://r.example:5000", "a/b/rc")
    assert reference("r.example", "rc") == ("https://r.example", "rc")
    assert tag_of("1.0.0+build.1") == "1.0.0_build.1"
    assert host_allowed("https://a.example/x", ("a.example",))
    assert host_allowed("https://127.0.0.1:5000/x", ("127.0.0.1:5000",))
    assert host_allowed("https://x.a.example/", ("*.a.example",))
    assert not host_allowed("https://a.example.evil/", ("a.example", "*.a.example"))
    assert not host_allowed("https://127.0.0.1:5001/x", ("127.0.0.1:5000",))
    assert host_allowed("https://anything/", ())
