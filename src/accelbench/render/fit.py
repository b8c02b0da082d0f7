"""A terminal table laid out for the console's width without breaking words, and footnote marks.

rich, when a table is too wide, shrinks columns alike and breaks words ("accelerato / r time",
"e253809f45d / 8"). Here each column starts at its natural width and, while the table is too wide,
the widest column that can still wrap gives up one character, never going below its longest word
(headers included): cells wrap between words and nothing is cut. Columns whose cells are all empty
are left out. Cells are plain text, never read as markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def mark(number: int) -> str:
    """A footnote mark: ¹, ², ... ¹⁰."""
    return str(number).translate(_SUPERSCRIPT)


class Footnotes:
    """Explanations said once: the same text gets the same mark wherever it is needed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return mark(self.texts.index(text) + 1)

    def lines(self) -> list[str]:
        return [f"{mark(i + 1)} {text}" for i, text in enumerate(self.texts)]


def non_empty_columns(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Indexes of the columns with at least one non-empty cell (all of them when there are no rows)."""
    if not rows:
        return list(range(len(columns)))
    return [i for i in range(len(columns)) if any(row[i].strip() for row in rows)]


def wrapped_lines(cell: str, width: int) -> int:
    """How many lines ``cell`` takes at ``width``, wrapped between words (greedy, as rich does)."""
    total = 0
    for paragraph in cell.splitlines() or [""]:
        lines, used = 1, 0
        for word in paragraph.split():
            if used and used + 1 + len(word) > width:
                lines, used = lines + 1, len(word)
            else:
                used += len(word) + (1 if used else 0)
        total += lines
    return total


def fit_widths(columns: Sequence[str], rows: Sequence[Sequence[str]], max_width: int) -> list[int]:
    """Natural widths, narrowed one character at a time where it costs least: first the table's
    height (a row is as tall as its tallest cell), then the number of wrapped cells, then the widest
    column goes first; never below a column's longest word."""
    cells = [[column, *(row[i] for row in rows)] for i, column in enumerate(columns)]
    least = [max((len(word) for cell in column for word in cell.split()), default=1) for column in cells]
    widths = [max((len(line) for cell in column for line in cell.splitlines()), default=1)
              for column in cells]
    available = max_width - (len(widths) + 1)  # one blank between and beside columns
    lines = [[wrapped_lines(cell, width) for cell in column]
             for column, width in zip(cells, widths, strict=True)]

    def cost(i: int) -> tuple[int, int, int]:
        trial = [wrapped_lines(cell, widths[i] - 1) for cell in cells[i]]
        height = sum(max(trial[r], *(lines[c][r] for c in range(len(cells)) if c != i))
                     for r in range(len(trial)))
        return height, sum(trial) - sum(lines[i]), -widths[i]

    while sum(widths) > available:
        shrinkable = [i for i, width in enumerate(widths) if width > least[i]]
        if not shrinkable:
            break
        chosen = min(shrinkable, key=cost)
        widths[chosen] -= 1
        lines[chosen] = [wrapped_lines(cell, widths[chosen]) for cell in cells[chosen]]
    return widths


class FittedTable:
    """A titled table of plain-text cells, fitted to the console when printed."""

    def __init__(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                 styles: Sequence[str] | None = None, right: Sequence[str] = ()) -> None:
        keep = non_empty_columns(columns, rows)
        self.title = title
        self.columns = [columns[i] for i in keep]
        self.rows = [[row[i] for i in keep] for row in rows]
        self.styles = list(styles) if styles else [""] * len(rows)
        self.right = set(right)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # The title is a line of its own: it wraps at the console's width, not the table's.
        yield Text(self.title, style="bold")
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0), show_edge=False)
        for column, width in zip(self.columns, fit_widths(self.columns, self.rows, options.max_width),
                                 strict=True):
            table.add_column(column, width=width, justify="right" if column in self.right else "left",
                             overflow="fold")
        for row, style in zip(self.rows, self.styles, strict=True):
            table.add_row(*(Text(cell) for cell in row), style=style or None)
        yield table
