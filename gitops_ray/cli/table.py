"""Tables for people: fitted to the terminal without wrapping rows; whole lines when piped.

Why not rich's ``Table``: when a row is too wide it narrows every column and wraps cells
onto several lines, so in a 120-column terminal each app took three lines and the columns
no longer lined up. Here a table for a terminal is fitted the way a reader expects: the
columns that matter least give up width first (each down to its minimum), a long cell
ends in "…" (a URL loses its start instead, since its end names the repository), and only
a column marked ``wrap`` (``status -o wide``'s MESSAGE, where every word counts)
continues on the next lines, under itself. When even that does not fit, the ``detail``
columns (what ``-o wide`` adds) go under their row, labelled, so the table itself stays
the one a plain ``status`` prints. Output that is not a terminal is never fitted:
one line per row at full width, as ``kubectl get`` prints, so ``grep``/``awk`` see whole
values. Pure functions: what is printed is decided here, where unit tests can see it.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

SEPARATOR = "  "  # between columns, as argocd's tabwriter pads them
ELLIPSIS = "…"
UNDER = "    "  # indent of the detail columns printed under their row


@dataclass(frozen=True)
class Column:
    """One column: its header and how it gives way when the terminal is too narrow."""

    header: str
    shrink: int = 0
    """Order in which columns give up width (1 first); 0: never."""
    minimum: int = 0
    """Width it keeps at least (never less than its header)."""
    keep_end: bool = False
    """Cut at the start rather than the end (URLs: the end names the repository)."""
    wrap: bool = False
    """Continue on the following lines instead of being cut."""
    detail: bool = False
    """Go under the row, labelled, when the table does not fit (see :func:`render`)."""

    @property
    def floor(self) -> int:
        return max(self.minimum, len(self.header))


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]],
           width: int | None = None) -> list[str]:
    """The table's lines; fitted to ``width`` if given, else every cell in full.

    If the table does not fit even so, its ``detail`` columns are printed under each
    row instead, labelled, indented and wrapped to ``width``: nothing of them is cut.
    """
    natural = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    if width is None:
        return _lines(columns, rows, natural, fitted=False)
    widths = fit(columns, natural, width)
    if _total(widths) <= width or not any(c.detail for c in columns):
        return _lines(columns, rows, widths, fitted=True)
    inline = [i for i, c in enumerate(columns) if not c.detail]
    table = render([columns[i] for i in inline], [[r[i] for i in inline] for r in rows], width)
    lines = table[:1]
    for line, row in zip(table[1:], rows, strict=True):
        under = "  ".join(f"{c.header}: {cell}" for c, cell in zip(columns, row, strict=True)
                          if c.detail and cell)
        lines += [line, *textwrap.wrap(under, width, initial_indent=UNDER,
                                       subsequent_indent=UNDER, break_on_hyphens=False)]
    return lines


def fit(columns: Sequence[Column], natural: Sequence[int], width: int) -> list[int]:
    """Column widths within ``width``: shrinking columns give way in order, to their floor.

    If the floors alone do not fit, the table stays wider than ``width``: a cut header
    would help nobody.
    """
    widths = list(natural)
    excess = _total(widths) - width
    for i in sorted((i for i, c in enumerate(columns) if c.shrink), key=lambda i:
                    columns[i].shrink):
        if excess <= 0:
            break
        give = min(excess, max(0, widths[i] - columns[i].floor))
        widths[i] -= give
        excess -= give
    return widths


def clip(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` in at most ``width`` characters, "…" where it was cut."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    return ELLIPSIS + text[len(text) - width + 1:] if keep_end else text[:width - 1] + ELLIPSIS


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(SEPARATOR) * (len(widths) - 1)


def _lines(columns: Sequence[Column], rows: Sequence[Sequence[str]], widths: Sequence[int],
           *, fitted: bool) -> list[str]:
    lines = [_line([c.header for c in columns], widths)]
    for row in rows:
        lines.extend(_row_lines(columns, row, widths, fitted=fitted))
    return lines


def _row_lines(columns: Sequence[Column], row: Sequence[str], widths: Sequence[int], *,
               fitted: bool) -> list[str]:
    cells = [_cell(c, text, w, fitted=fitted) for c, text, w in zip(columns, row, widths,
                                                                   strict=True)]
    height = max(len(c) for c in cells)
    return [_line([c[n] if n < len(c) else "" for c in cells], widths) for n in range(height)]


def _cell(column: Column, text: str, width: int, *, fitted: bool) -> list[str]:
    """The cell's lines: one (cut to fit), or several for a wrapping column."""
    if not fitted:
        return [text]
    if column.wrap and len(text) > width:
        return textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    return [clip(text, width, keep_end=column.keep_end)]


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return SEPARATOR.join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def terminal_width() -> int | None:
    """The width of stdout if it is a terminal (``$COLUMNS`` first), else None: no fitting."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None
