"""How ``get`` and ``diff`` show times, writers and trees to people (pure)."""

from __future__ import annotations

import io

from rich.table import Table

from gitops_ray.cli.get import sync_reason, tree_rows
from gitops_ray.cli.views import console, duration, human_time, iso
from gitops_ray.health.workergroups import writer_label
from gitops_ray.reconcile.tree import TreeNode
from gitops_ray.sync.appstatus import decode_status

NOW = 1_790_000_000.0


def test_times_read_as_dates_and_ages_never_as_epoch_seconds() -> None:
    assert human_time(NOW - 185, now=NOW) == "2026-09-21 14:10:15 UTC (3m ago)"
    assert human_time(NOW - 0.25, now=NOW).endswith("(0s ago)")  # the one ago (moments)
    assert iso(NOW) == "2026-09-21T14:13:20Z"
    assert human_time(None) == iso("x") == iso(True) == iso(0) == ""
    assert [duration(s) for s in (0.04, 3, 59, 3600, 3 * 86400 + 7200)] == [
        "<0.1s", "3.0s", "59s", "1h", "3d2h"]


def test_writers_are_named_with_what_they_are() -> None:
    assert writer_label("python-requests") == "python-requests (autoscaler)"
    assert writer_label("kubectl-edit") == "kubectl-edit (by hand)"
    assert writer_label("gitops-ray") == "gitops-ray"
    assert writer_label("kubectl-foo-operator") == "kubectl-foo-operator (by hand)"
    assert writer_label("") == "-"


def test_plain_output_has_no_colour_and_no_trailing_padding() -> None:
    buf = io.StringIO()
    table = Table(box=None, pad_edge=False)
    table.add_column("NAME")
    table.add_column("X")
    table.add_row("[bold]long-name[/bold]", "1")
    table.add_row("a", "")
    console(buf).print(table)
    assert buf.getvalue() == "NAME       X\nlong-name  1\na\n"


def _node(name: str, *children: TreeNode, hidden: int = 0) -> TreeNode:
    return TreeNode("", "Pod", "ns", name, "", "", "", children=children,
                    hidden_children=hidden)


def test_tree_rows_draw_connectors_and_count_hidden_children() -> None:
    tree = [_node("top", _node("a", _node("a1")), _node("b"), hidden=2)]
    assert [(prefix, n.kind if not n.name else n.name) for prefix, n in tree_rows(tree)] == [
        ("", "top"), ("├─ ", "a"), ("│  └─ ", "a1"), ("├─ ", "b"), ("└─ ", "… 2 more")]


def test_sync_reason_counts_the_out_of_sync_resources_reasons() -> None:
    rows = [{"status": "OutOfSync", "reason": "missing"}, {"status": "Synced"},
            {"status": "OutOfSync", "reason": "modified"}, {"status": "OutOfSync"}]
    assert sync_reason(decode_status({"resources": rows})) == "1 missing, 2 modified"


def test_the_running_wave_and_wide_view_show_in_the_plain_text() -> None:
    from gitops_ray.cli.get import print_app
    from gitops_ray.cli.live import LiveTree
    from gitops_ray.health.workergroups import WorkerGroupView

    view = WorkerGroupView("small", True, True, 1, 3, "python-requests", 0, 2**31 - 1, 2, 3,
                           1, ("rc-small-worker-abcde",))
    node = TreeNode("ray.io", "RayCluster", "ns", "rc", "Synced", "Healthy", "",
                    worker_groups=(view,))
    status = {"sync": "Synced", "operationState": {"phase": "Running", "wave": 2,
                                                   "startedAt": NOW - 60},
              "operation": {"phase": "Succeeded", "finishedAt": NOW - 3600}}
    buf = io.StringIO()
    print_app(console(buf), "app", decode_status(status), LiveTree([node]), wide=True)
    text = buf.getvalue()
    assert "Last Operation:  Running, waiting for wave 2, 2026-09-21 14:12:20 UTC (" in text
    assert "RayCluster ns/rc worker groups:" in text
    assert "small  1    3     python-requests (autoscaler)  0    unbounded  2/3    " \
           "rc-small-worker-abcde  1" in text
    assert "\x1b[" not in text and " \n" not in text
