"""Where a line of terminal text may break: between words, never inside a figure.

A "chunk" is what is never split across lines: a word (an id, a date, a path, a flag: anything
without a space), a number with the unit after it ("42.6 ms", "8.18 GFLOPs", "1.2 GiB)"), a sign
with its number ("≥ 3.0 GiB"), and words a renderer joins with ``GLUE``. rich breaks at every
Unicode space, the no-break ones included (its word pattern is ``\\s*\\S+\\s*``, and U+00A0,
U+202F and U+2007 are all ``\\s`` to Python), so the terminal's text is wrapped here, with this
rule, and handed to rich in lines that already fit. Pure and torch-free: the help formatter uses
it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.cells import cell_len

#: Joins two words that must stay on one line; shown as a plain space.
GLUE = "\u00a0"

_TOKEN = re.compile(r"[^ \n]+")
#: A token that ends in a number: "42.6", "(8.18", "±1.2", "1,234", "8.52e-03", "-3".
_NUMBER = re.compile(r".*(?<![A-Za-z_])[-+−±~≈]?\d[\d.,]*(?:e[-+]?\d+)?$")
#: A unit or a short counted word after a number: "ms", "GiB)", "tok/s", "GFLOPs,", "%", "x".
_UNIT = re.compile(r"[A-Za-zµ°%²]{1,9}(?:/[A-Za-z]{1,7})?[,;:.)\]]*$")
#: A sign that belongs to the number after it.
_SIGNS = frozenset({"≤", "≥", "±", "~", "≈", "<", ">", "=", "+", "-", "−"})


def glued(left: str, right: str) -> bool:
    """Whether the space between two tokens may not be a line break."""
    return (left in _SIGNS and right[:1].isdigit()) or (
        bool(_NUMBER.match(left)) and bool(_UNIT.match(right)))


def chunks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each unbreakable chunk of one paragraph (no newlines in ``text``)."""
    start = end = -1
    previous = ""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if start >= 0 and text[end:match.start()] == " " and glued(previous, token):
            end = match.end()
        else:
            if start >= 0:
                yield start, end
            start, end = match.span()
        previous = token
    if start >= 0:
        yield start, end


def longest_chunk(text: str) -> int:
    """The narrowest width ``text`` can wrap to without splitting a chunk."""
    return max((cell_len(line[a:b]) for line in text.split("\n") for a, b in chunks(line)),
               default=0)


def line_breaks(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` wrapped greedily at ``width`` cells: breaks only
    between chunks, and inside one only where the chunk alone is wider than the line (the last
    resort, never reached by a fitted table's figure). A paragraph's indentation is kept."""
    width = max(width, 1)
    lines: list[tuple[int, int]] = []
    offset = 0
    for paragraph in text.split("\n"):
        line: tuple[int, int] | None = None
        for start, end in chunks(paragraph):
            if line is None:
                line = (0 if cell_len(paragraph[:end]) <= width else start, start)
            elif cell_len(paragraph[line[0]:end]) > width:
                lines.append((offset + line[0], offset + line[1]))
                line = (start, start)
            begin = line[0]
            while cell_len(paragraph[begin:end]) > width:  # a chunk wider than the line
                cut = begin + _fitting(paragraph[begin:end], width)
                lines.append((offset + begin, offset + cut))
                begin = cut
            line = (begin, end)
        lines.append((offset + line[0], offset + line[1]) if line else (offset, offset))
        offset += len(paragraph) + 1
    return lines


def _fitting(text: str, width: int) -> int:
    """How many characters of ``text`` fit ``width`` cells (at least one)."""
    count = 0
    while count < len(text) and cell_len(text[:count + 1]) <= width:
        count += 1
    return max(count, 1)


def shorten(text: str, width: int) -> str:
    """The first line of ``text`` in at most ``width`` characters, cut only between chunks and
    then marked " …" (an error's start in a cell; the whole text stays in the result): the mark
    stands apart, so it is never read as the end of a figure."""
    line = text.splitlines()[0] if text else ""
    if len(line) <= width:
        return line
    ends = [end for _, end in chunks(line) if end <= width - 2]
    return (line[:ends[-1]] + " …") if ends else line[:width - 1] + "…"


def wrap(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells, GLUE shown as a space."""
    return [text[a:b].replace(GLUE, " ") for a, b in line_breaks(text, width)]


def line_count(text: str, width: int) -> int:
    return len(line_breaks(text, width))


#: A paragraph measured once: (cells of the gap before the chunk, cells of the chunk) per chunk.
Measured = list[list[tuple[int, int]]]


def measure(text: str) -> Measured:
    """``text``'s chunks by paragraph, as widths, for counting lines at many widths quickly."""
    measured = []
    for paragraph in text.split("\n"):
        pieces, last = [], 0
        for start, end in chunks(paragraph):
            pieces.append((cell_len(paragraph[last:start]), cell_len(paragraph[start:end])))
            last = end
        measured.append(pieces)
    return measured


def lines_at(measured: Measured, width: int) -> int:
    """How many lines a measured text takes at ``width`` (as ``line_breaks`` wraps it)."""
    total = 0
    for pieces in measured:
        lines, used = 1, -1
        for gap, size in pieces:
            if used < 0:
                used = size + (gap if gap + size <= width else 0)
            elif used + gap + size > width:
                lines, used = lines + 1, size
            else:
                used += gap + size
            while used > width:  # a chunk wider than the line is cut (the last resort)
                lines, used = lines + 1, used - width
        total += lines
    return total
