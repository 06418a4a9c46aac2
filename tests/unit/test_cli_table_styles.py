"""The one table renderer's terminal side: styled cells, column styles, headers, titles.

A table prints the same text piped and on a terminal (where it is also fitted); only a
terminal sees its styles. ``get``'s tables (summary, tree, hooks, worker groups) are
checked through :func:`~gitops_ray.cli.table.show` on a real rich console of each kind.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.style import Style
from rich.text import Text

from gitops_ray.cli.table import Column, Table, clip, render, show
from gitops_ray.cli.views import console, groups_table
from gitops_ray.health.workergroups import WorkerGroupView


def _styles(text: Text) -> list[tuple[str, str]]:
    """(text, style) of each span of a line: what a terminal shows in colour."""
    return [(text.plain[s.start:s.end], str(s.style)) for s in text.spans]


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system="standard",
                   highlight=False), buf


def test_a_styled_cell_keeps_its_style_and_prints_its_text() -> None:
    table = Table([Column("NAME"), Column("SYNC")],
                  [["prod", Text("Synced", style="green")], ["dev", "Unknown"]])
    assert table.plain() == ["NAME  SYNC", "prod  Synced", "dev   Unknown"]
    header, prod, dev = table.styled()
    assert header.plain == "NAME  SYNC" and _styles(header) == [("NAME", "bold"),
                                                               ("SYNC", "bold")]
    assert prod.plain == "prod  Synced" and _styles(prod) == [("Synced", "green")]
    assert _styles(dev) == []


def test_a_column_style_lies_under_the_cells_own() -> None:
    table = Table([Column("", style="bold"), Column("")],
                  [["Sync:", Text("OutOfSync", style="yellow")],
                   [Text("Error:", style="red"), "x"]], show_header=False)
    sync, error = table.styled()
    assert sync.plain == "Sync:   OutOfSync" and _styles(sync) == [("Sync:", "bold"),
                                                                   ("OutOfSync", "yellow")]
    assert error.plain == "Error:  x"
    out, _ = _terminal(80)
    assert error.get_style_at_offset(out, 0) == Style.parse("bold red")  # both: red on top


def test_a_key_value_table_has_no_header_and_its_widths_ignore_the_headers() -> None:
    table = Table([Column("LABEL"), Column("VALUE")], [["a:", "1"], ["bb:", "2"]],
                  show_header=False)
    assert table.plain() == ["a:   1", "bb:  2"]


def test_a_title_goes_above_the_table_whole_when_piped_wrapped_on_a_terminal() -> None:
    table = Table([Column("HOOK"), Column("PHASE")], [["PreSync", "Succeeded"]],
                  title="Hooks of the last operation")
    assert table.plain() == ["Hooks of the last operation", "HOOK     PHASE",
                             "PreSync  Succeeded"]
    assert table.plain(18)[:2] == ["Hooks of the last", "operation"]
    title = table.styled()[0]
    assert _styles(title) == [("Hooks of the last operation", "bold")]


def test_a_cell_with_line_breaks_continues_under_itself() -> None:
    columns = [Column("KIND"), Column("MESSAGE", shrink=1, wrap=True), Column("X")]
    rows = [["Job", "first line\nsecond line", "1"]]
    assert render(columns, rows) == ["KIND  MESSAGE      X", "Job   first line   1",
                                     "      second line"]
    assert render(columns, rows, 19) == ["KIND  MESSAGE     X", "Job   first line  1",
                                         "      second", "      line"]


def test_a_cut_or_wrapped_styled_cell_keeps_its_styles() -> None:
    cell = Text.assemble(("Synced", "green"), " (1 modified)")
    assert clip(cell, 8) == Text.assemble(("Synced", "green"), " …")
    cut = clip(Text("https://host/repo", style="cyan"), 8, keep_end=True)
    assert isinstance(cut, Text) and cut.plain == "…st/repo"
    assert cut.style == "cyan"  # the "…" in the cell's colour
    lines = Table([Column("V", shrink=1, wrap=True)], [[cell]], show_header=False).styled(10)
    assert [line.plain for line in lines] == ["Synced (1", "modified)"]
    assert _styles(lines[0]) == [("Synced", "green")] and _styles(lines[1]) == []


def test_a_terminal_counts_cells_and_a_pipe_characters() -> None:
    columns = [Column("GROUP"), Column("SET BY", shrink=1, wrap=True), Column("X")]
    rows = [["日本", "mañana", "1"], ["cpu", "日本語のマネージャ", "2"]]
    assert render(columns, rows) == ["GROUP  SET BY     X", "日本     mañana     1",
                                     "cpu    日本語のマネージャ  2"]  # as kubectl's tabwriter
    assert render(columns, rows, 20) == ["GROUP  SET BY      X", "日本   mañana      1",
                                         "cpu    日本語のマ  2", "       ネージャ"]  # cells
    assert clip("日本語abc", 6) == "日本…" and clip("abc日本語", 6, keep_end=True) == "…本語"


def test_show_prints_plain_whole_lines_piped_and_fitted_styled_lines_on_a_terminal() -> None:
    table = Table([Column("NAME"), Column("MESSAGE", shrink=1)],
                  [["prod", "x" * 1500], ["dev", Text("ok", style="green")]])
    buf = io.StringIO()
    show(console(buf), table)  # not a terminal: as `kubectl get` prints, whole lines
    assert buf.getvalue() == f"NAME  MESSAGE\nprod  {'x' * 1500}\ndev   ok\n"
    out, term = _terminal(20)
    show(out, table)
    lines = term.getvalue().splitlines()
    assert lines[0] == "\x1b[1mNAME\x1b[0m  \x1b[1mMESSAGE\x1b[0m"
    assert lines[1] == "prod  " + "x" * 13 + "…"  # fitted to 20 columns, never wrapped
    assert lines[2] == "dev   \x1b[32mok\x1b[0m"


def test_the_worker_group_table_is_titled_and_its_long_cells_wrap_on_a_terminal() -> None:
    view = WorkerGroupView("small", True, True, 1, 3, "python-requests", 0, 4, 2, 3, 0, ())
    table = groups_table([view], title="RayCluster ns/rc worker groups:")
    assert table.plain() == [
        "RayCluster ns/rc worker groups:",
        "GROUP  GIT  LIVE  SET BY                        MIN  MAX  READY  TO DELETE  STALE",
        "small  1    3     python-requests (autoscaler)  0    4    2/3    0          0"]
    fitted = table.plain(70)
    assert all(len(line) <= 70 for line in fitted[1:])
    assert fitted[2].startswith("small  1    3     python-requests") and \
        fitted[3].strip() == "(autoscaler)"  # SET BY wraps under itself
    live = table.styled()[2]
    assert ("3", "yellow") in _styles(live)  # live differs from git: drift shows
