"""The CLI's one table renderer: fitted to the terminal without wrapping rows; whole lines piped.

Every table the CLI prints is laid out here: ``status``'s and ``history``'s, and ``get``'s
summary, resource tree, hooks and worker groups (``diff``'s too). rich stays the terminal
library (colours, :class:`~rich.text.Text` cells, the console), but not the layout engine.

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
values; widths count characters, as kubectl's and argocd's tabwriter do. A cell with
line breaks continues under itself, in either case.

On a terminal a table is styled: a cell may be a :class:`~rich.text.Text` (a green
``Synced``), a column has a style (the bold labels of ``get``'s summary), the headers are
bold and a table may have a title; piped, the same table prints its plain text only.
Pure functions: what is printed is decided here, where unit tests can see it.
"""

from __future__ import annotations

import shutil
import string
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.text import Text

SEPARATOR = "  "  # between columns, as argocd's tabwriter pads them
ELLIPSIS = "…"
UNDER = "    "  # indent of the detail columns printed under their row

Cell = str | Text
"""A cell: plain text, or rich text whose styles show on a terminal."""
Line = tuple[Sequence[tuple[Cell, str]], Sequence[int], bool]
"""A line to print: its cells, each with the style it takes on a terminal, their widths,
and whether it is fitted (to a terminal: widths are counted in cells, see :func:`_size`)."""

_SPACES = str.maketrans(string.whitespace, " " * len(string.whitespace))  # as textwrap does


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
    """Go under the row, labelled, when the table does not fit (see :meth:`Table.plain`)."""
    style: str = ""
    """Style of its cells on a terminal, under a styled cell's own (``get``'s bold labels)."""

    @property
    def floor(self) -> int:
        return max(self.minimum, len(self.header))


@dataclass(frozen=True)
class Table:
    """A table: columns, rows, and what a terminal shows besides (title, styles)."""

    columns: Sequence[Column]
    rows: Sequence[Sequence[Cell]]
    title: str = ""
    """A line above the table (``Hooks of the last operation``); none if empty."""
    show_header: bool = True
    """False for a key/value table (``get``'s summary)."""
    header_style: str = "bold"
    title_style: str = "bold"

    def plain(self, width: int | None = None) -> list[str]:
        """The table's lines as plain text; fitted to ``width`` if given, else in full.

        If the table does not fit even so, its ``detail`` columns are printed under each
        row instead, labelled, indented and wrapped to ``width``: nothing of them is cut.
        """
        return [_plain_line(line) for line in self._layout(width)]

    def styled(self, width: int | None = None) -> list[Text]:
        """The same lines (:meth:`plain`'s text), with their styles."""
        return [_styled_line(line) for line in self._layout(width)]

    def _layout(self, width: int | None) -> list[Line]:
        titles = [] if not self.title else [self.title] if width is None \
            else textwrap.wrap(self.title, width) or [self.title]
        header = self.header_style if self.show_header else None
        lines: list[Line] = [([(title, self.title_style)], [0], False) for title in titles]
        return lines + _body(self.columns, self.rows, width, header)


def render(columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
           width: int | None = None) -> list[str]:
    """A plain table's lines (``status``, ``history``): :meth:`Table.plain`."""
    return Table(columns, rows).plain(width)


def show(out: Console, table: Table) -> None:
    """Print ``table`` on ``out``: fitted to it and styled if a terminal, else whole lines."""
    for line in table.styled(out.width if out.is_terminal else None):
        out.print(line, soft_wrap=True)  # fitted already: the console must not wrap it


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


def clip(text: Cell, width: int, *, keep_end: bool = False) -> Cell:
    """``text`` in at most ``width`` cells, "…" where it was cut (styles kept)."""
    plain = _plain(text)
    if cell_len(plain) <= width:
        return text
    if width <= 1:
        return text[:0] + ELLIPSIS[:width]
    if not keep_end:
        return text[:_fits(plain, width - 1)] + ELLIPSIS
    end = text[len(plain) - _fits(plain[::-1], width - 1):]
    return ELLIPSIS + end if isinstance(end, str) else Text(ELLIPSIS, end.style) + end


def terminal_width() -> int | None:
    """The width of stdout if it is a terminal (``$COLUMNS`` first), else None: no fitting."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


# -- layout -----------------------------------------------------------------------------

def _body(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None,
          header: str | None) -> list[Line]:
    """The header (``header``: its style; None: no header) and the rows' lines."""
    natural = _natural(columns, rows, header is not None, fitted=width is not None)
    if width is None:
        return _lines(columns, rows, natural, header, fitted=False)
    widths = fit(columns, natural, width)
    if _total(widths) <= width or not any(c.detail for c in columns):
        return _lines(columns, rows, widths, header, fitted=True)
    return _under(columns, rows, width, header)


def _under(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int,
           header: str | None) -> list[Line]:
    """The table without its detail columns, each row followed by them, labelled."""
    inline = [c for c in columns if not c.detail]
    cut = [[cell for c, cell in zip(columns, row, strict=True) if not c.detail] for row in rows]
    widths = fit(inline, _natural(inline, cut, header is not None, fitted=True), width)
    lines = _header(inline, widths, header, fitted=True)
    for row, cells in zip(rows, cut, strict=True):
        lines += _row_lines(inline, cells, widths, fitted=True)
        under = "  ".join(f"{c.header}: {_plain(cell)}" for c, cell in
                          zip(columns, row, strict=True) if c.detail and _plain(cell))
        lines += [([(text, "")], [0], False) for text in textwrap.wrap(
            under, width, initial_indent=UNDER, subsequent_indent=UNDER,
            break_on_hyphens=False)]
    return lines


def _natural(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], header: bool, *,
             fitted: bool) -> list[int]:
    return [max([len(c.header) if header else 0, *(_longest(r[i], fitted) for r in rows)])
            for i, c in enumerate(columns)]


def _longest(cell: Cell, fitted: bool) -> int:
    plain = _plain(cell)
    return max(_size(line, fitted) for line in plain.split("\n")) if "\n" in plain \
        else _size(plain, fitted)


def _size(text: str, fitted: bool) -> int:
    """The columns ``text`` takes: on a terminal its cells (日 takes two).

    Piped, its characters, as kubectl's and argocd's tabwriter count them.
    """
    return cell_len(text) if fitted else len(text)


def _fits(plain: str, cells: int) -> int:
    """How many of ``plain``'s first characters fit in ``cells`` terminal cells."""
    used = 0
    for n, char in enumerate(plain):
        used += get_character_cell_size(char)
        if used > cells:
            return n
    return len(plain)


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(SEPARATOR) * (len(widths) - 1)


def _lines(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], widths: Sequence[int],
           header: str | None, *, fitted: bool) -> list[Line]:
    lines = _header(columns, widths, header, fitted=fitted)
    for row in rows:
        lines.extend(_row_lines(columns, row, widths, fitted=fitted))
    return lines


def _header(columns: Sequence[Column], widths: Sequence[int], style: str | None, *,
            fitted: bool) -> list[Line]:
    return [] if style is None else [([(c.header, style) for c in columns], widths, fitted)]


def _row_lines(columns: Sequence[Column], row: Sequence[Cell], widths: Sequence[int], *,
               fitted: bool) -> list[Line]:
    if not fitted and not any("\n" in _plain(cell) for cell in row):  # piped, one line each
        return [([(cell, c.style) for c, cell in zip(columns, row, strict=True)], widths, False)]
    cells = [_cell(c, text, w, fitted=fitted) for c, text, w in zip(columns, row, widths,
                                                                   strict=True)]
    height = max(len(c) for c in cells)
    return [([(c[n] if n < len(c) else "", column.style)
              for c, column in zip(cells, columns, strict=True)], widths, fitted)
            for n in range(height)]


def _cell(column: Column, cell: Cell, width: int, *, fitted: bool) -> list[Cell]:
    """The cell's lines: one a line of its text (cut to fit), more for a wrapping column."""
    lines = _split(cell)
    if not fitted:
        return lines
    out: list[Cell] = []
    for line in lines:
        if column.wrap and cell_len(_plain(line)) > width:
            out += _wrap(line, width) or [""]
        else:
            out.append(clip(line, width, keep_end=column.keep_end))
    return out


def _split(cell: Cell) -> list[Cell]:
    """The cell's lines (at its line breaks), styles kept."""
    plain = _plain(cell)
    if "\n" not in plain:
        return [cell]
    lines, start = [], 0
    for part in plain.split("\n"):
        lines.append(cell[start:start + len(part)])
        start += len(part) + 1
    return lines


def _wrap(cell: Cell, width: int) -> list[Cell]:
    """``textwrap``'s lines of the cell, cut out of the cell itself so its styles stay."""
    plain = _plain(cell)
    flat, lines, at = plain.translate(_SPACES), [], 0
    for text in textwrap.wrap(plain, width, break_on_hyphens=False, expand_tabs=False):
        start = flat.find(text, at)  # textwrap only drops whitespace between its lines
        at = start + len(text)
        lines += _chop(cell[start:at], width)
    return lines


def _chop(cell: Cell, width: int) -> list[Cell]:
    """A line of textwrap's (which counts characters) in pieces of at most ``width`` cells."""
    pieces = []
    while cell_len(_plain(cell)) > width:
        n = max(1, _fits(_plain(cell), width))
        pieces.append(cell[:n])
        cell = cell[n:]
    return [*pieces, cell]


def _plain(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell.plain


def _plain_line(line: Line) -> str:
    cells, widths, fitted = line
    plains = [c if isinstance(c, str) else c.plain for c, _ in cells]
    if not fitted:  # piped: as fast as it can be, a long `status` is all such lines
        return SEPARATOR.join([p.ljust(w) for p, w in zip(plains, widths, strict=True)]).rstrip()
    return SEPARATOR.join([p + " " * (w - cell_len(p))
                           for p, w in zip(plains, widths, strict=True)]).rstrip()


def _styled_line(line: Line) -> Text:
    """The line's cells padded to their columns' widths, between separators."""
    cells, widths, fitted = line
    pieces: list[Text | tuple[str, str]] = []
    for n, ((cell, style), width) in enumerate(zip(cells, widths, strict=True)):
        pad = width - _size(_plain(cell), fitted)
        pieces += [_styled(cell, style), (" " * pad + (SEPARATOR if n < len(widths) - 1
                                                       else ""), "")]
    text = Text.assemble(*pieces)
    text.rstrip()
    return text


def _styled(cell: Cell, style: str) -> Text | tuple[str, str]:
    if isinstance(cell, str):
        return cell, style
    if not style:
        return cell
    text = cell.copy()
    text.stylize_before(style)
    return text
