"""Tables that fit the terminal: each column's width is decided here, once,
from its cells and the console width, and rows are laid out line by line at
those widths (cheap enough to stream thousands of rows). Columns marked
`keep` (ids, states) are never narrower than their widest cell; the others
give up width down to their minimum and end in "…" when cut. A table whose
kept columns alone are wider than the terminal is printed wider than it (the
terminal wraps the lines) rather than cut."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.text import Span, Text

# Spaces between two columns.
GAP = 2


@dataclass(frozen=True)
class Column:
    header: str
    # Never narrower than its widest cell.
    keep: bool = False
    # How narrow it may get when the table must shrink (at least the header).
    min_width: int = 0
    # How wide it may get, even with room to spare.
    max_width: int | None = None
    justify: Literal["left", "right"] = "left"

    @property
    def floor(self) -> int:
        return max(self.min_width, len(self.header))


Row = Sequence[Text]


def natural_widths(columns: Sequence[Column], rows: Sequence[Row]) -> list[int]:
    """Each column's width with room to spare: its widest cell or header,
    capped by its max_width unless it is kept."""
    widths = []
    for i, column in enumerate(columns):
        widest = max([len(column.header), *(row[i].cell_len for row in rows)])
        if column.keep:
            widest = max(widest, column.min_width)
        if column.max_width is not None and not column.keep:
            widest = min(widest, max(column.max_width, column.floor))
        widths.append(widest)
    return widths


def fit_widths(columns: Sequence[Column], rows: Sequence[Row], width: int) -> list[int]:
    """Column widths for a table at most `width` cells wide (gaps included)
    where it can be: shrinkable columns give up width, the one with the most
    to give first, down to their floor; kept columns never shrink."""
    widths = natural_widths(columns, rows)
    floors = [w if c.keep else min(w, c.floor) for c, w in zip(columns, widths, strict=True)]
    excess = table_width(widths) - width
    while excess > 0:
        slack, index = max((w - f, i) for i, (w, f) in enumerate(zip(widths, floors, strict=True)))
        if slack <= 0:
            break
        widths[index] -= 1
        excess -= 1
    return widths


def table_width(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * max(len(widths) - 1, 0)


def _cell(cell: Text, width: int, justify: str, last: bool) -> tuple[Text, str, str]:
    """A cell cut to `width` (ending in "…") and the spaces before and after
    it that pad it to `width`; the last column is not padded on the right."""
    if cell.cell_len > width:
        cell = cell.copy()
        cell.truncate(width, overflow="ellipsis")
    room = width - cell.cell_len
    if room <= 0 or (last and justify == "left"):
        return cell, "", ""
    if justify == "right":
        return cell, " " * room, ""
    return cell, "", " " * room


def render_table(
    columns: Sequence[Column], widths: Sequence[int], rows: Sequence[Row], header: bool = True
) -> Text:
    """The rows laid out at these exact column widths, under a bold header
    line when asked: one Text, one line per row. Built as one string and its
    style spans (what appending each cell would make, at a fraction of the
    cost: a listing may stream tens of thousands of rows)."""
    lines: list[Row] = []
    if header:
        lines.append([Text(column.header, style="bold") for column in columns])
    lines.extend(rows)
    parts: list[str] = []
    spans: list[Span] = []
    offset = 0
    last = len(columns) - 1
    gap = " " * GAP
    for number, cells in enumerate(lines):
        if number:
            parts.append("\n")
            offset += 1
        for i, (cell, column, width) in enumerate(zip(cells, columns, widths, strict=True)):
            if i:
                parts.append(gap)
                offset += GAP
            laid, before, after = _cell(cell, width, column.justify, i == last)
            plain = laid.plain
            parts += (before, plain, after)
            offset += len(before)
            if laid.style:  # over the padding after it too, as `cell + Text(" ")` styles it
                spans.append(Span(offset, offset + len(plain) + len(after), laid.style))
            spans.extend(Span(offset + a, offset + b, style) for a, b, style in laid.spans)
            offset += len(plain) + len(after)
    return Text("".join(parts), spans=spans)


def print_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Row],
    widths: Sequence[int] | None = None,
    header: bool = True,
) -> list[int]:
    """Prints the rows as a table fitted to the console (or at `widths`);
    returns the widths used, so later pages can line up under it. A table
    wider than the console is printed as it is, never cut (the terminal
    wraps its lines)."""
    if widths is None:
        widths = fit_widths(columns, rows, console.width)
    table = render_table(columns, widths, rows, header)
    # A console without colours prints no style (rich renders a style as
    # its text alone then), and a Text without spans costs it a fifth.
    console.print(table if console.color_system else Text(table.plain), soft_wrap=True)
    return list(widths)


def stretch(columns: Sequence[Column], widths: Sequence[int], width: int) -> list[int]:
    """`widths` with the room left in `width` given to the columns that may
    shrink, up to their max_width, last column first (a streamed listing
    fixes its widths from its first page: later pages get the room)."""
    grown = list(widths)
    room = width - table_width(grown)
    for i in reversed(range(len(columns))):
        column = columns[i]
        if room <= 0:
            break
        if column.keep:
            continue
        limit = column.max_width if column.max_width is not None else grown[i] + room
        step = max(min(room, limit - grown[i]), 0)
        grown[i] += step
        room -= step
    return grown


def widen_kept(columns: Sequence[Column], widths: Sequence[int], rows: Sequence[Row]) -> list[int]:
    """`widths` with each kept column grown to fit these rows (a later page
    of a listing may hold a longer id than the first)."""
    needed = natural_widths(columns, rows)
    return [max(w, n) if c.keep else w for c, w, n in zip(columns, widths, needed, strict=True)]
