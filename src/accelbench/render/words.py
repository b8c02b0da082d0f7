"""Where a line of terminal text may break: between words, never inside a figure.

A "chunk" is what is never split across lines: a word (an id, a date, a path, a flag: anything
without a space), a number with the unit after it ("42.6 ms", "8.18 GFLOPs", "1.2 GiB)"), a sign
with its number ("≥ 3.0 GiB"), a label with the number after it ("TTFT 169.0 ms", "batch 1",
"max of 30: 52.0 ms"; only where the two fit one line: a label wider than the line with its value
breaks before the value, never inside it), and words a renderer joins with ``GLUE``. A
paragraph's continuation lines may hang (``hanging_breaks``). rich breaks at every
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
_NUMBER = re.compile(r".*(?<![A-Za-z_])[-+−±~≈]?\d(?:[\d.,]*\d)?(?:e[-+]?\d+)?$")
#: A unit or a short counted word after a number: "ms", "GiB)", "tok/s", "GFLOPs,", "%", "x".
_UNIT = re.compile(r"[A-Za-zµ°%²]{1,9}(?:/[A-Za-z]{1,7})?[,;:.)\]]*$")
#: Short words that follow a number without counting it ("1.00e-03 at 2048x2048", "512 or 1024"):
#: never its unit, so a label they begin keeps its own value.
_NOT_UNITS = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "is", "of", "on",
                        "or", "per", "the", "to", "vs", "with"})
#: A sign that belongs to the number after it.
_SIGNS = frozenset({"≤", "≥", "±", "~", "≈", "<", ">", "=", "+", "-", "−"})
#: A label a value follows: a word ("TTFT", "batch", "(floor") or anything ending in a colon
#: ("p99:", "30:").
_LABEL = re.compile(r"[(\[]?[A-Za-z][A-Za-z_-]*|\S*:")
#: A value after a label: a number, signed or not ("169.0", "±2.1%", "1/16/16").
_VALUE = re.compile(r"[-+−±~≈]?\d")


def glued(left: str, right: str) -> bool:
    """Whether the space between two tokens may not be a line break."""
    return (left in _SIGNS and right[:1].isdigit()) or (
        bool(_NUMBER.match(left)) and bool(_UNIT.match(right)) and right not in _NOT_UNITS)


def labelled(left: str, right: str) -> bool:
    """Whether ``left`` labels the number ``right`` begins: kept on one line where they fit it."""
    return bool(_LABEL.fullmatch(left)) and bool(_VALUE.match(right))


def chunks(text: str, labels: bool = True) -> Iterator[tuple[int, int]]:
    """(start, end) of each unbreakable chunk of one paragraph (no newlines in ``text``); with
    ``labels``, a label is held with the value after it (no chains: the label must be the chunk's
    first token so far, or end in a colon: "max of 30: 52.0 ms")."""
    start = end = -1
    previous = ""
    alone = False  # the current chunk is one token so far
    for match in _TOKEN.finditer(text):
        token = match.group()
        spaced = start >= 0 and text[end:match.start()] == " "
        held = labels and (alone or previous.endswith(":")) and labelled(previous, token)
        if spaced and (held or glued(previous, token)):
            end, alone = match.end(), False
        else:
            if start >= 0:
                yield start, end
            (start, end), alone = match.span(), True
        previous = token
    if start >= 0:
        yield start, end


def longest_chunk(text: str) -> int:
    """The narrowest width ``text`` can wrap to without splitting a chunk (a label kept with its
    value included)."""
    return max((cell_len(line[a:b]) for line in text.split("\n") for a, b in chunks(line)),
               default=0)


def _fitted_chunks(paragraph: str, width: int) -> Iterator[tuple[int, int]]:
    """``chunks``, a label and its value apart where the two are wider than ``width``."""
    for start, end in chunks(paragraph):
        if cell_len(paragraph[start:end]) > width:
            yield from ((start + a, start + b) for a, b in chunks(paragraph[start:end], labels=False))
        else:
            yield start, end


def _paragraph_breaks(paragraph: str, width: int, rest: int) -> list[tuple[int, int]]:
    """(start, end) of each line of one paragraph: the first ``width`` cells wide, the others
    ``rest``; greedy, between chunks, inside one only where it alone is wider than its line."""
    lines: list[tuple[int, int]] = []
    line: tuple[int, int] | None = None
    for start, end in _fitted_chunks(paragraph, min(width, rest)):
        if line is None:
            line = (0 if cell_len(paragraph[:end]) <= width else start, start)
        elif cell_len(paragraph[line[0]:end]) > (rest if lines else width):
            lines.append(line)
            line = (start, start)
        room = rest if lines else width
        begin = line[0]
        while cell_len(paragraph[begin:end]) > room:  # a chunk wider than the line
            cut = begin + _fitting(paragraph[begin:end], room)
            lines.append((begin, cut))
            begin, room = cut, rest
        line = (begin, end)
    lines.append(line if line else (0, 0))
    return lines


def line_breaks(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` wrapped greedily at ``width`` cells: breaks only
    between chunks, and inside one only where the chunk alone is wider than the line (the last
    resort, never reached by a fitted table's figure). A paragraph's indentation is kept."""
    return [line for line, _ in hanging_breaks(text, width, 0)]


def hanging_breaks(text: str, width: int, hang: int) -> list[tuple[tuple[int, int], int]]:
    """Each line of ``text`` at ``width`` cells as ((start, end), indent): a paragraph's first line
    keeps its own indentation, its continuation lines are indented by it and ``hang`` more (and
    are that much narrower), where at least a third of the width is left for their text."""
    width = max(width, 1)
    found: list[tuple[tuple[int, int], int]] = []
    offset = 0
    for paragraph in text.split("\n"):
        lead = len(paragraph) - len(paragraph.lstrip(" "))
        indent = lead + hang if lead + hang <= width * 2 // 3 else 0
        for number, (start, end) in enumerate(_paragraph_breaks(paragraph, width, width - indent)):
            found.append(((offset + start, offset + end), indent if number else 0))
        offset += len(paragraph) + 1
    return found


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


#: A paragraph measured once: per chunk (cells of the gap before it, its cells, and where it is a
#: label with its value, the same for its parts, which a line too narrow for the two takes apart).
Piece = tuple[int, int, tuple[tuple[int, int], ...]]
Measured = list[list[Piece]]


def _gaps_and_sizes(text: str, spans: list[tuple[int, int]], last: int = 0) -> list[tuple[int, int]]:
    found = []
    for start, end in spans:
        found.append((cell_len(text[last:start]), cell_len(text[start:end])))
        last = end
    return found


def measure(text: str) -> Measured:
    """``text``'s chunks by paragraph, as widths, for counting lines at many widths quickly."""
    measured = []
    for paragraph in text.split("\n"):
        pieces: list[Piece] = []
        spans = list(chunks(paragraph))
        for (gap, size), (start, end) in zip(_gaps_and_sizes(paragraph, spans), spans, strict=True):
            strict = [(start + a, start + b) for a, b in chunks(paragraph[start:end], labels=False)]
            parts = tuple(_gaps_and_sizes(paragraph, strict, start)) if len(strict) > 1 else ()
            pieces.append((gap, size, parts))
        measured.append(pieces)
    return measured


def lines_at(measured: Measured, width: int) -> int:
    """How many lines a measured text takes at ``width`` (as ``line_breaks`` wraps it)."""
    total = 0
    for pieces in measured:
        lines, used = 1, -1
        for gap, size, parts in pieces:
            for part_gap, part_size in (((gap, size),) if size <= width or not parts
                                        else ((gap, parts[0][1]), *parts[1:])):
                if used < 0:
                    used = part_size + (part_gap if part_gap + part_size <= width else 0)
                elif used + part_gap + part_size > width:
                    lines, used = lines + 1, part_size
                else:
                    used += part_gap + part_size
                while used > width:  # a chunk wider than the line is cut (the last resort)
                    lines, used = lines + 1, used - width
        total += lines
    return total
