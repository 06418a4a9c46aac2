"""The views of a record, byte for byte: get, status and history -o json, Argo CD's status.

``tests/testdata/views/summaries.json``, ``status-rows.json``, ``history-views.json``
and ``argocd-status.json`` hold what the dict-reading ``get``, ``status``, ``history``
and Argo CD projection
(:func:`~gitops_ray.reconcile.argostatus.application_status`) made of each record of
``tests/testdata/records/`` (written by the previous version), of ``full.status.json``
(every field they show: a running wave with hooks, refusals, impact, conditions, an
error) and of an empty status. The typed views must give the same: the same bytes for
what the commands print (``json.dumps(..., indent=2)``), an equal object for Argo CD's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.cli.get import summary
from gitops_ray.cli.history import entry_view
from gitops_ray.cli.sync import status_row
from gitops_ray.reconcile.argostatus import Projection, application_status
from gitops_ray.render.apps import Application, AppSource
from gitops_ray.sync.appstatus import decode_status

DATA = Path(__file__).parent.parent / "testdata"
EXPECTED: dict[str, Any] = json.loads((DATA / "views" / "summaries.json").read_text())
ROWS: dict[str, Any] = json.loads((DATA / "views" / "status-rows.json").read_text())
HISTORY: dict[str, Any] = json.loads((DATA / "views" / "history-views.json").read_text())
ARGOCD: dict[str, Any] = json.loads((DATA / "views" / "argocd-status.json").read_text())
SPEC = {"project": "default",
        "source": {"repoURL": "https://git.example/ray.git", "path": "apps/ray",
                   "targetRevision": "HEAD"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "ray"}}
APP = Application("ray", AppSource("https://git.example/ray.git", "apps/ray"))


def _statuses() -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for path in sorted((DATA / "records").glob("*.json")):
        data = json.loads(path.read_text())
        out[path.stem] = (data["app"], json.loads(data["status"]))
    out["full"] = ("full", json.loads((DATA / "views" / "full.status.json").read_text()))
    out["empty"] = ("empty", {})
    return out


STATUSES = _statuses()


def test_every_record_has_its_recorded_output() -> None:
    assert sorted(STATUSES) == sorted(EXPECTED) == sorted(ROWS) == sorted(ARGOCD) == \
        sorted(HISTORY)


@pytest.mark.parametrize("stem", sorted(STATUSES))
def test_the_summary_prints_the_recorded_bytes(stem: str) -> None:
    name, status = STATUSES[stem]
    printed = json.dumps(summary(name, decode_status(status)), indent=2)
    assert printed == json.dumps(EXPECTED[stem], indent=2)


@pytest.mark.parametrize("stem", sorted(STATUSES))
def test_the_status_row_prints_the_recorded_bytes(stem: str) -> None:
    name, status = STATUSES[stem]
    printed = json.dumps(status_row(name, decode_status(status)), indent=2)
    assert printed == json.dumps(ROWS[stem], indent=2)


@pytest.mark.parametrize("stem", sorted(STATUSES))
def test_the_argo_cd_status_is_the_recorded_one(stem: str) -> None:
    _, status = STATUSES[stem]
    projected = application_status(Projection(decode_status(status), APP, {"spec": SPEC},
                                              now=1_800_000_000.0))
    assert projected == ARGOCD[stem]  # an API object: equal, whatever the keys' order


@pytest.mark.parametrize("stem", sorted(STATUSES))
def test_the_history_prints_the_recorded_bytes(stem: str) -> None:
    _, status = STATUSES[stem]
    printed = json.dumps([entry_view(e) for e in decode_status(status).entries], indent=2)
    assert printed == json.dumps(HISTORY[stem], indent=2)
