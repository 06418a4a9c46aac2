"""``gitops-ray get -o json``'s summary, byte for byte, over recorded records.

``tests/testdata/get/summaries.json`` holds the summary the dict-reading ``get`` printed
for each record of ``tests/testdata/records/`` (written by the previous version), for
``full.status.json`` (every field the summary shows: a running wave with hooks,
refusals, impact, conditions, an error) and for an empty status. The typed view must
print the same bytes (``json.dumps(..., indent=2)``, as ``get -o json`` does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.cli.get import summary
from gitops_ray.sync.appstatus import decode_status

DATA = Path(__file__).parent.parent / "testdata"
EXPECTED: dict[str, Any] = json.loads((DATA / "get" / "summaries.json").read_text())


def _statuses() -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for path in sorted((DATA / "records").glob("*.json")):
        data = json.loads(path.read_text())
        out[path.stem] = (data["app"], json.loads(data["status"]))
    out["full"] = ("full", json.loads((DATA / "get" / "full.status.json").read_text()))
    out["empty"] = ("empty", {})
    return out


STATUSES = _statuses()


def test_every_record_has_its_recorded_summary() -> None:
    assert sorted(STATUSES) == sorted(EXPECTED)


@pytest.mark.parametrize("stem", sorted(STATUSES))
def test_the_summary_prints_the_recorded_bytes(stem: str) -> None:
    name, status = STATUSES[stem]
    printed = json.dumps(summary(name, decode_status(status)), indent=2)
    assert printed == json.dumps(EXPECTED[stem], indent=2)
