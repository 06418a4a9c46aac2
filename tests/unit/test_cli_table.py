"""The status table's pure parts: fitting columns, cutting cells, the cells themselves."""

from __future__ import annotations

from gitops_ray.cli.apptable import (
    NONE,
    cells,
    conditions_summary,
    human_time,
    last_sync,
    message,
    short_repo,
    table,
)
from gitops_ray.cli.table import Column, clip, fit, render
from gitops_ray.sync.appstatus import decode_status
from gitops_ray.types import ResourceKey

NOW = 1_750_000_000.0


def test_clip_cuts_at_the_end_or_keeps_it() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdef", 4) == "abc…"
    assert clip("github.com/acme/ray-config", 12, keep_end=True) == "…/ray-config"
    assert clip("abc", 1) == "…" and clip("abc", 0) == ""


def test_columns_give_way_in_order_down_to_their_floor() -> None:
    columns = [Column("NAME", shrink=3, minimum=6), Column("REPO", shrink=1, minimum=8),
               Column("PATH", shrink=2), Column("SYNC")]
    natural = [10, 30, 12, 6]  # 58 + 3 separators of 2 = 64
    assert fit(columns, natural, 64) == natural
    assert fit(columns, natural, 50) == [10, 16, 12, 6]  # REPO alone gives 14
    assert fit(columns, natural, 40) == [10, 8, 10, 6]  # REPO at its floor, then PATH gives
    assert fit(columns, natural, 38) == [10, 8, 8, 6]  # PATH at its floor (its header)
    assert fit(columns, natural, 10) == [6, 8, 4, 6]  # cannot fit: floors, never less


def test_a_fitted_table_cuts_cells_and_a_piped_one_never_does() -> None:
    columns = [Column("NAME"), Column("REPO", shrink=1, keep_end=True)]
    rows = [["prod", "https://github.com/acme/ray-config.git"]]
    assert render(columns, rows) == ["NAME  REPO", "prod  https://github.com/acme/ray-config.git"]
    assert render(columns, rows, 20) == ["NAME  REPO", "prod  …ay-config.git"]


def test_a_wrapping_column_continues_under_itself() -> None:
    columns = [Column("NAME"), Column("MESSAGE", shrink=1, minimum=10, wrap=True)]
    lines = render(columns, [["prod", "waiting for the head pod to start"]], 23)
    assert lines == ["NAME  MESSAGE", "prod  waiting for the", "      head pod to start"]


def test_detail_columns_go_under_the_row_when_the_table_cannot_fit() -> None:
    columns = [Column("NAME"), Column("SYNC"), Column("TARGET", detail=True),
               Column("MESSAGE", minimum=20, wrap=True, detail=True)]
    rows = [["prod", "Synced", "main", "Waiting for the KubeRay operator"], ["dev", "Synced",
                                                                            "main", ""]]
    assert render(columns, rows, 30) == [
        "NAME  SYNC",
        "prod  Synced",
        "    TARGET: main  MESSAGE:",
        "    Waiting for the KubeRay",
        "    operator",
        "dev   Synced",
        "    TARGET: main"]


def test_human_time() -> None:
    assert human_time(NOW - 42, NOW) == "42s ago"
    assert human_time(NOW - 180, NOW) == "3m ago"
    assert human_time(NOW - 7300, NOW) == "2h ago"
    assert human_time(NOW - 90000, NOW) == "2025-06-14T14:06:40Z"
    assert human_time(NOW + 5, NOW) == "0s ago"  # another machine's clock ran ahead
    assert human_time(None, NOW) == "" and human_time(0, NOW) == ""


def test_short_repo() -> None:
    assert short_repo("https://github.com/acme/ray-config.git") == "github.com/acme/ray-config"
    assert short_repo("ssh://git@host/repo") == "git@host/repo"
    assert short_repo("file:///tmp/remote.git") == "/tmp/remote"


STATUS = {"sync": "OutOfSync", "health": "Progressing", "revision": "0123456789abcdef",
          "healthMessage": "RayCluster head is not ready", "repoURL": "https://g/acme/r.git",
          "path": "ray/prod", "targetRevision": "main", "destinationNamespace": "ray",
          "syncPolicy": "Auto-Prune", "error": "",
          "conditions": [{"type": "OrphanedResourceWarning", "message": "1 orphan"},
                         {"type": "OrphanedResourceWarning", "message": "2 orphans"},
                         {"type": "SharedResourceWarning", "message": "shared"}],
          "operation": {"phase": "Failed", "reason": "ApplyFailed", "message": "denied",
                        "revision": "0123456789abcdef", "startedAt": NOW - 200,
                        "finishedAt": NOW - 180}}


def test_the_row_of_an_app() -> None:
    assert cells("prod", decode_status(STATUS), wide=False, short=True, now=NOW) == [
        "prod", "ray", "g/acme/r", "ray/prod", "OutOfSync", "Progressing", "0123456",
        "Auto-Prune", "OrphanedResourceWarning(2),SharedResourceWarning,SyncError"]
    wide = cells("prod", decode_status(STATUS), wide=True, short=False, now=NOW)
    assert wide[2] == "https://g/acme/r.git"
    assert wide[-3:-1] == ["main", "Failed (ApplyFailed) 3m ago"]
    assert wide[-1].startswith("RayCluster head is not ready; OrphanedResourceWarning: 1 orphan")
    assert wide[-1].endswith("SyncError: Failed sync attempt to 0123456: denied")


def test_an_app_known_only_by_a_failed_sync() -> None:
    status = decode_status({"sync": "Unknown", "error": "error (source): repository not found"})
    row = cells("new", status, wide=True, short=True, now=NOW)
    assert row[:4] == ["new", NONE, NONE, NONE] and row[5] == "Unknown"
    assert conditions_summary(status) == "ComparisonError"
    assert message(status) == "ComparisonError: error (source): repository not found"
    assert last_sync(status, NOW) == "" and row[-2] == NONE  # never synced


def test_a_sync_waiting_for_a_wave() -> None:
    status = decode_status({"operationState": {
        "phase": "Running", "wave": 1, "startedAt": NOW - 30,
        "message": "waiting for wave 1 to be healthy"}})
    assert last_sync(status, NOW) == "Running (wave 1) 30s ago"
    assert message(status) == "waiting for wave 1 to be healthy"


def test_rows_are_sorted_and_fitted() -> None:
    statuses = {"b": decode_status(STATUS), "a": decode_status(
        {**STATUS, "repoURL": "https://example.com/" + "x" * 80})}
    lines = table(statuses, wide=False, width=120, now=NOW)
    assert [line.split()[0] for line in lines] == ["NAME", "a", "b"]
    assert all(len(line) <= 120 for line in lines)
    assert any(len(line) > 120 for line in table(statuses, wide=False, width=None, now=NOW))


def test_without_a_display_the_progress_hook_does_nothing() -> None:
    from gitops_ray.cli.progress import AppProgress
    from gitops_ray.types import ResourceAction

    hook = AppProgress(None, None)  # stderr is not a terminal: nobody to tell
    hook.planned(2)
    hook.done(ResourceKey("", "ConfigMap", "ns", "a"), ResourceAction.CREATED)
