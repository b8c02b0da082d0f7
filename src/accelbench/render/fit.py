"""The one way a terminal table (and a paragraph) is laid out for the console's width.

rich, when a table is too wide, shrinks columns alike and then cuts or folds their cells
("workl…", "8.52e…", "transformer-sma / ll"), and it wraps text at every space, the no-break
ones included. Here nothing is cut and no figure is split (render/words.py says where a line may
break):

1. each column needs at least its longest chunk (a word, an id, a date, a number with its unit),
   a ``whole`` column (a figure column) its longest line;
2. while even those widths do not fit, the columns the table names in ``drop`` are left out, in
   that order, and a line under the table names them and what shows them (``hint``);
3. should the rest still not fit (all the columns are then kept), a table that names its
   ``stack`` columns (a row's name: workload, mode, device) is split into parts one under the
   other, each repeating those columns; a table that cannot be split has its rows stacked, each a
   block of "column  value" lines;
4. otherwise each column starts at its natural width and, while the table is too wide, the column
   that costs the fewest extra lines gives up one character.

Cells are then wrapped here and handed to rich in lines that already fit (``no_wrap``), so rich
never re-breaks them, and the table's lines are printed without the blanks rich pads them with.
Columns whose cells are all empty are left out. A cell is plain text or a styled
``rich.text.Text``; plain text is never read as markup. A paragraph (``Prose``: a title, a note, a
footnote) wraps at the console's width with its continuation lines indented by ``HANG``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from accelbench.render.words import hanging_breaks, lines_at, longest_chunk, measure

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
#: A column split into parts is given this much room where its text is longer (render/fit.py 3).
COMFORTABLE = 16
#: What a table's dropped columns are shown by, unless it says otherwise.
WIDE_HINT = "a wider terminal or --json shows them"
#: How far a paragraph's continuation lines are indented, past its own indentation.
HANG = 2

Cell = str | Text


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


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def non_empty_columns(columns: Sequence[str], rows: Sequence[Sequence[Cell]]) -> list[int]:
    """Indexes of the columns with at least one non-empty cell (all of them when there are no rows)."""
    if not rows:
        return list(range(len(columns)))
    return [i for i in range(len(columns)) if any(_plain(row[i]).strip() for row in rows)]


def wrapped(cell: Cell, width: int, style: str = "", hang: int = 0) -> Text:
    """``cell`` wrapped at ``width`` cells between chunks, its styles kept; each paragraph's
    continuation lines indented ``hang`` past its own indentation (render/words.hanging_breaks)."""
    text = cell.copy() if isinstance(cell, Text) else Text(cell, style=style)
    plain = text.plain
    lines = [Text(" " * indent) + text[start:end] if indent else text[start:end]
             for (start, end), indent in hanging_breaks(plain, width, hang)]
    joined = Text("\n").join(lines)
    # The glue (render/words.GLUE) has done its work: it is shown as the space it stands for.
    return Text(joined.plain.replace("\u00a0", " "), style=joined.style, spans=joined.spans,
                justify=text.justify, no_wrap=True)


def _trimmed(console: Console, options: ConsoleOptions, renderable: RenderableType) -> RenderResult:
    """``renderable``'s lines without the blanks at their ends (rich pads every cell to its
    column's width: a copied or piped table would end its lines in spaces)."""
    for line in console.render_lines(renderable, options, pad=False):
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line and not line[-1].control:
            last = line.pop()
            line.append(Segment(last.text.rstrip(), last.style))
        yield from line
        yield Segment.line()


class Prose:
    """A paragraph wrapped at the console's width by the table's rule (no figure split), its
    continuation lines indented by ``HANG``."""

    def __init__(self, text: Cell, style: str = "") -> None:
        self.text, self.style = text, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield wrapped(self.text, options.max_width, self.style, HANG)


def fit_widths(columns: Sequence[str], rows: Sequence[Sequence[Cell]], max_width: int,
               least: Sequence[int] | None = None) -> list[int]:
    """Natural widths, narrowed one character at a time where it costs least: first the table's
    height (a row is as tall as its tallest cell), then the number of wrapped cells, then the widest
    column goes first; never below ``least`` (default: each column's longest chunk)."""
    cells = [[measure(column), *(measure(_plain(row[i])) for row in rows)]
             for i, column in enumerate(columns)]
    texts = [[column, *(_plain(row[i]) for row in rows)] for i, column in enumerate(columns)]
    if least is None:
        least = [max(max(longest_chunk(cell) for cell in column), 1) for column in texts]
    widths = [max(max((_width(line) for cell in column for line in cell.split("\n")), default=1),
                  least[i]) for i, column in enumerate(texts)]
    available = max_width - (len(widths) - 1)  # one blank between columns
    lines = [[lines_at(cell, width) for cell in column]
             for column, width in zip(cells, widths, strict=True)]

    def cost(i: int) -> tuple[int, int, int]:
        trial = [lines_at(cell, widths[i] - 1) for cell in cells[i]]
        height = sum(max(trial[r], *(lines[c][r] for c in range(len(cells)) if c != i))
                     for r in range(len(trial)))
        return height, sum(trial) - sum(lines[i]), -widths[i]

    while sum(widths) > available:
        shrinkable = [i for i, width in enumerate(widths) if width > least[i]]
        if not shrinkable:
            break
        chosen = min(shrinkable, key=cost)
        widths[chosen] -= 1
        lines[chosen] = [lines_at(cell, widths[chosen]) for cell in cells[chosen]]
    return widths


def _width(line: str) -> int:
    from rich.cells import cell_len

    return cell_len(line)


class FittedTable:
    """A titled table, fitted to the console when printed (the module's rule).

    ``right``: right-justified columns; ``whole``: columns never wrapped (figures: their width is
    their longest line); ``drop``: the columns that may be left out when the table cannot fit,
    first to go first; ``stack``: the columns that name a row, repeated in each part when the
    rest is split into tables one under the other; ``hint``: what shows a dropped column;
    ``notes``: lines said under it."""

    def __init__(self, title: Cell, columns: Sequence[str], rows: Sequence[Sequence[Cell]],
                 styles: Sequence[str] | None = None, right: Sequence[str] = (), *,
                 whole: Sequence[str] = (), drop: Sequence[str] = (), stack: Sequence[str] = (),
                 hint: str = WIDE_HINT, notes: Sequence[Cell] = ()) -> None:
        keep = non_empty_columns(columns, rows)
        self.title = title
        self.columns = [columns[i] for i in keep]
        self.rows = [[row[i] for i in keep] for row in rows]
        self.styles = list(styles) if styles else [""] * len(rows)
        self.right, self.whole = set(right), set(whole)
        self.drop = [name for name in drop if name in self.columns]
        self.stack = set(stack)
        self.hint, self.notes = hint, list(notes)

    def least_widths(self) -> list[int]:
        """Each column's narrowest width: its longest chunk, or line for a ``whole`` column."""
        least = []
        for i, column in enumerate(self.columns):
            texts = [_plain(row[i]) for row in self.rows]
            if column in self.whole:
                need = max((_width(line) for text in texts for line in text.split("\n")), default=1)
            else:
                need = max((longest_chunk(text) for text in texts), default=1)
            least.append(max(need, longest_chunk(column), 1))
        return least

    def _fits(self, indexes: Sequence[int], least: Sequence[int], width: int) -> bool:
        return sum(least[i] for i in indexes) + len(indexes) - 1 <= width

    def shown(self, max_width: int) -> tuple[list[int], list[str]]:
        """The columns kept at ``max_width`` (indexes) and the names left out, in ``drop`` order."""
        least = self.least_widths()
        kept = list(range(len(self.columns)))
        dropped: list[str] = []
        for name in self.drop:
            if self._fits(kept, least, max_width):
                break
            kept.remove(self.columns.index(name))
            dropped.append(name)
        return kept, dropped

    def sections(self, kept: list[int], least: list[int], width: int) -> list[list[int]] | None:
        """``kept`` as one table, or as tables one under the other that each repeat the ``stack``
        columns (the row's name) and take the others in order, as many as fit at a comfortable
        width (their natural width up to ``COMFORTABLE``, their least where that is more); None
        when not even one column fits beside the name."""
        if self._fits(kept, least, width):
            return [kept]
        key = [i for i in kept if self.columns[i] in self.stack]
        if not key:
            return None
        natural = self.natural_widths()
        comfortable = [min(natural[i], max(least[i], COMFORTABLE)) for i in range(len(least))]
        parts: list[list[int]] = [[]]
        for i in (i for i in kept if i not in key):
            if not self._fits(key + [i], least, width):
                return None
            if parts[-1] and not self._fits(key + parts[-1] + [i], comfortable, width):
                parts.append([])
            parts[-1].append(i)
        return [key + part for part in parts]

    def natural_widths(self) -> list[int]:
        """Each column's width unwrapped: its longest line (the header's included)."""
        return [max(_width(line) for text in (column, *(_plain(row[i]) for row in self.rows))
                    for line in text.split("\n"))
                for i, column in enumerate(self.columns)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if _plain(self.title):
            # The title is a paragraph of its own: it wraps at the console's width, not the table's.
            yield Prose(self.title, "bold")
        kept, dropped = self.shown(width)
        least = self.least_widths()
        if dropped and not self._fits(kept, least, width) and self.stack:
            # Leaving columns out does not make one table of it: the parts show them all.
            kept, dropped = list(range(len(self.columns))), []
        parts = self.sections(kept, least, width)
        if parts is None:
            for block in self._stacked(width):
                yield from _trimmed(console, options, block)
            dropped = []
        for number, part in enumerate(parts or []):
            if number:
                yield Text("")
            columns = [self.columns[i] for i in part]
            rows = [[row[i] for i in part] for row in self.rows]
            table = self._table(columns, rows, fit_widths(columns, rows, width, [least[i] for i in part]))
            yield from _trimmed(console, options, table)
        if dropped:
            yield Prose(f"({len(dropped)} column{'s' if len(dropped) > 1 else ''} left out to fit "
                        f"{width} columns: {', '.join(dropped)}; {self.hint})", "dim")
        for note in self.notes:
            yield Prose(note, "dim")

    def _table(self, columns: list[str], rows: list[list[Cell]], widths: list[int]) -> Table:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0), show_edge=False)
        for column, width in zip(columns, widths, strict=True):
            table.add_column(wrapped(column, width), width=width, no_wrap=True,
                             justify="right" if column in self.right else "left")
        for row, style in zip(rows, self.styles, strict=True):
            table.add_row(*(wrapped(cell, width) for cell, width in zip(row, widths, strict=True)),
                          style=style or None)
        return table

    def _stacked(self, width: int) -> list[RenderableType]:
        """Each row as a block of "column  value" lines: a table too wide for any layout."""
        blocks: list[RenderableType] = []
        label = min(max(_width(column) for column in self.columns), width // 3)
        for row, style in zip(self.rows, self.styles, strict=True):
            block = Table.grid(padding=(0, 1))
            block.add_column(width=label, no_wrap=True)
            block.add_column(width=max(width - label - 1, 1), no_wrap=True)
            for column, cell in zip(self.columns, row, strict=True):
                if _plain(cell).strip():
                    block.add_row(wrapped(column, label, "bold"),
                                  wrapped(cell, max(width - label - 1, 1)), style=style or None)
            blocks += [block, Text("")]
        return blocks
