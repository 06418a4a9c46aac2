"""The peer benchmark's counting: what a fight's events say, read the same way for every side."""

from __future__ import annotations

from bench.peer import (
    SSD_ANNOTATION,
    Edit,
    Scale,
    Seen,
    app_status,
    dropped_edits,
    flips,
    flux_objects,
    guide_application,
    reverted_writes,
)
from bench.workload import REPLICAS_RULE, Workload, application


def _seen(at: float, replicas: int, writer: str, edit: str = "") -> Seen:
    return Seen(at, "ns/rc", {"cpu": replicas}, {"cpu": ()}, {"cpu": edit}, writer)


def test_a_write_changed_back_after_it_landed_is_reverted() -> None:
    scales = [Scale(1.0, "ns/rc", "cpu", 5)]
    events = [_seen(1.1, 5, "autoscaler"), _seen(2.0, 2, "argocd-controller")]
    assert reverted_writes(events, scales) == {"count": 1, "of": 1,
                                               "writers": {"argocd-controller": 1}}


def test_a_write_that_never_landed_or_was_superseded_is_not_reverted() -> None:
    scales = [Scale(1.0, "ns/rc", "cpu", 5), Scale(3.0, "ns/rc", "cpu", 2)]
    events = [_seen(1.1, 5, "autoscaler"), _seen(3.1, 2, "autoscaler")]
    assert reverted_writes(events, scales)["count"] == 0


def test_an_edit_is_dropped_unless_live_within_60_s() -> None:
    edits = [Edit(10.0, "ns/rc", "cpu", "a"), Edit(20.0, "ns/rc", "cpu", "b")]
    events = [_seen(15.0, 1, "gitops-ray", "a"), _seen(95.0, 1, "gitops-ray", "b")]
    assert dropped_edits(events, edits) == {"count": 1, "of": 2}


def test_flips_count_synced_outofsync_transitions_in_the_window_only() -> None:
    status = [(0.0, "a", "Synced"), (1.0, "a", "OutOfSync"), (2.0, "a", "Synced"),
              (3.0, "b", "Progressing"), (4.0, "b", "Synced"), (9.0, "a", "OutOfSync")]
    assert flips(status, 0.5, 5.0) == {"total": 2, "apps_flipping": 1, "max_per_app": 2}


def test_the_guide_configurations() -> None:
    app = application(Workload(4, 2), 0, repo_url="http://127.0.0.1/repo.git")
    guide, none, ssd = (guide_application(app, c) for c in ("guide", "none", "guide-ssd"))
    assert guide["spec"]["ignoreDifferences"] == [REPLICAS_RULE]
    assert "RespectIgnoreDifferences=true" in guide["spec"]["syncPolicy"]["syncOptions"]
    assert none["spec"]["ignoreDifferences"] == []
    assert not SSD_ANNOTATION.items() <= (guide["metadata"].get("annotations") or {}).items()
    assert SSD_ANNOTATION.items() <= ssd["metadata"]["annotations"].items()
    assert ssd["spec"]["syncPolicy"] == guide["spec"]["syncPolicy"]


def test_a_flux_kustomization_reads_as_synced_when_ready() -> None:
    def kustomization(status: str) -> dict[str, object]:
        return {"kind": "Kustomization", "metadata": {"name": "team-000"},
                "status": {"conditions": [{"type": "Ready", "status": status}]}}

    assert app_status(kustomization("True")) == ("team-000", "Synced")
    assert app_status(kustomization("False")) == ("team-000", "OutOfSync")
    assert app_status(kustomization("Unknown")) == ("team-000", "Progressing")


def test_flux_gets_one_kustomization_per_app_without_ignore() -> None:
    objs = flux_objects(Workload(4, 2), "http://127.0.0.1/repo.git")
    kustomizations = [o for o in objs if o["kind"] == "Kustomization"]
    assert [k["spec"]["path"] for k in kustomizations] == ["./clusters/team-000",
                                                          "./clusters/team-001"]
    assert all("ignore" not in k["spec"] and k["spec"]["prune"] for k in kustomizations)
