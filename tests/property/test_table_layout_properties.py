"""The CLI's tables (`cortex.cli.tables`) are laid out as one string with
its style spans: for any cells, styles, widths and justification, the table
prints exactly what appending each padded or cut cell to a line printed
(the plain way, kept here as the reference), on a colour terminal and on a
console without colours."""

from __future__ import annotations

import io
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from cortex.cli.tables import GAP, Column, fit_widths, print_table, render_table

STYLES = ["", "bold", "dim", "red", "green on black", "underline", "bold magenta"]
# Wide, combining and accented characters, whose cells are not their length.
WORDS = ["abc", "héllo", "日本語", "x" * 30, "", "naïve", "e\u0301", "ok", "1234567", " "]


def _reference(
    columns: Sequence[Column], widths: Sequence[int], rows: Sequence[Sequence[Text]], header: bool
) -> Text:
    gap = Text(" " * GAP)
    lines = [[Text(c.header, style="bold") for c in columns]] if header else []
    lines += rows
    rendered = []
    for cells in lines:
        line = Text()
        for i, (cell, column, width) in enumerate(zip(cells, columns, widths, strict=True)):
            if i:
                line.append_text(gap)
            if cell.cell_len > width:
                cell = cell.copy()
                cell.truncate(width, overflow="ellipsis")
            room = width - cell.cell_len
            if room > 0 and not (i == len(columns) - 1 and column.justify == "left"):
                cell = (
                    Text(" " * room) + cell
                    if column.justify == "right"
                    else cell + Text(" " * room)
                )
            line.append_text(cell)
        rendered.append(line)
    return Text("\n").join(rendered)


def _printed(text: Text, colours: bool) -> str:
    out = io.StringIO()
    console = Console(
        file=out, width=300, force_terminal=colours, color_system="truecolor" if colours else None
    )
    console.print(text, soft_wrap=True)
    return out.getvalue()


cells = st.builds(
    lambda first, style, more: (
        Text(first, style=style).append(*more) if more else Text(first, style=style)
    ),
    st.sampled_from(WORDS).map(lambda w: w * 2),
    st.sampled_from(STYLES),
    st.one_of(st.none(), st.tuples(st.sampled_from(WORDS), st.sampled_from(STYLES))),
)
columns = st.builds(
    Column,
    header=st.sampled_from(["id", "state", "n", "command"]),
    keep=st.booleans(),
    min_width=st.integers(0, 6),
    max_width=st.sampled_from([None, 4, 10]),
    justify=st.sampled_from(["left", "right"]),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Column], list[list[Text]], int]:
    cols = draw(st.lists(columns, min_size=1, max_size=6))
    rows = draw(st.lists(st.lists(cells, min_size=len(cols), max_size=len(cols)), max_size=6))
    return cols, rows, draw(st.integers(8, 90))


@settings(max_examples=300, deadline=None)
@given(tables(), st.booleans())
def test_a_table_prints_as_its_cells_appended_one_by_one(
    table: tuple[list[Column], list[list[Text]], int], header: bool
) -> None:
    cols, rows, width = table
    widths = fit_widths(cols, rows, width)
    laid = render_table(cols, widths, rows, header)
    reference = _reference(cols, widths, rows, header)
    assert laid.plain == reference.plain
    for colours in (True, False):
        assert _printed(laid, colours) == _printed(reference, colours)
        out = io.StringIO()
        console = Console(
            file=out,
            width=300,
            force_terminal=colours,
            color_system="truecolor" if colours else None,
        )
        print_table(console, cols, rows, widths, header)
        assert out.getvalue() == _printed(reference, colours)
