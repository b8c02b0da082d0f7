"""Issue 30 (item A): the one line-break rule (render/words.py) and the one table fitter
(render/fit.py): what they never split, and how a table too wide for the terminal drops, splits
into parts or stacks its rows."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from accelbench.render.fit import FittedTable, Prose
from accelbench.render.words import GLUE, longest_chunk, shorten, wrap


def _render(renderable: object, width: int) -> list[str]:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def test_rich_breaks_at_a_no_break_space_so_the_glue_is_ours() -> None:
    """Why the wrapping is done here: rich's word pattern treats U+00A0 as a space."""
    assert _render(Text(f"xxxx 42.6{GLUE}ms"), 9) == ["xxxx 42.6", "ms"]
    assert _render(Prose(f"xxxx 42.6{GLUE}ms"), 9) == ["xxxx", "  42.6 ms"]  # a hanging indent
    assert _render(Prose("xxxx 42.6 ms"), 9) == ["xxxx", "  42.6 ms"]  # a unit is glued anyway


def test_numbers_keep_their_units_and_signs_their_numbers() -> None:
    text = ("read 42.6 ms and ≥ 3.0 GiB (set-up 5.8 GiB) at 8.18 GFLOPs, --prompt-len "
            "2026-11-26T01:39:03+00:00")
    for width in range(12, 40):
        joined = "\n".join(wrap(text, width))
        for whole in ("42.6 ms", "≥ 3.0 GiB", "5.8 GiB)", "8.18 GFLOPs,", "--prompt-len"):
            assert whole in joined, (width, joined)
        # only a chunk longer than the line (the date, below 25) is ever cut, as a last resort
        assert all(len(line) <= width for line in wrap(text, width))
    assert longest_chunk(text) == len("2026-11-26T01:39:03+00:00")
    assert wrap(f"a b{GLUE}c", 3) == ["a", "b c"]  # the glue is shown as a space


def test_a_value_stays_with_its_label_where_the_two_fit_a_line() -> None:
    """Issue 36: "TTFT" / "169.0 ms", "batch" / "1", "RAM" / "23.5 GiB" split at 100 columns."""
    text = ("overall: TTFT 169.0 ms, rate 42 tokens/s; fp32 tiny batch 1, RAM 23.5 GiB, 408 µs / max of "
            "30: 52.0 ms")
    for width in range(len("rate 42 tokens/s;"), 60):
        joined = "\n".join(wrap(text, width))
        for whole in ("TTFT 169.0 ms,", "rate 42 tokens/s;", "batch 1,", "RAM 23.5 GiB,", "of 30: 52.0 ms"):
            assert whole in joined, (width, joined)
    # narrower than a label with its value: the two part, the value stays whole
    assert wrap("TTFT 169.0 ms", 9) == ["TTFT", "169.0 ms"]
    # no chains: a label holds one value ("step 3 of" / "5", not "batch 1, 2 physical ...")
    assert longest_chunk("batch 1, 2 physical / 2 logical cores, step 3 of 5") == len("2 physical")
    assert wrap("a b c d e f g h", 3) == ["a b", "c d", "e f", "g h"]  # no label: unchanged


def test_a_paragraph_hangs_its_continuation_lines() -> None:
    lines = _render(Prose("energy n/a on cpu: rapl: no RAPL interface (/sys/class/powercap is missing)\n"
                          "  nanogpt-char cpu fp32: cache static; prefill eager; decode eager"), 40)
    assert lines == ["energy n/a on cpu: rapl: no RAPL", "  interface (/sys/class/powercap is",
                     "  missing)", "  nanogpt-char cpu fp32: cache static;",
                     "    prefill eager; decode eager"]


def test_a_shortened_error_is_cut_between_words_and_says_so_apart() -> None:
    assert shorten("CUDA out of memory: tried 2.00 GiB more", 30) == "CUDA out of memory: …"
    assert shorten("CUDA out of memory: tried 2.00 GiB more", 36) == "CUDA out of memory: tried 2.00 GiB …"
    assert shorten("short", 30) == "short"


ROWS = [["transformer-small", "train", "cuda:0", "20,699 ±0.8%", "launch-bound noisy", "3.25 s proj."],
        ["vae", "eval", "cpu", "2,560 ±54.5%", "", "32.81 s proj."]]
COLUMNS = ("workload", "mode", "device", "samples/s", "notes", "epoch")


def test_a_table_leaves_out_its_declared_columns_first_and_says_which() -> None:
    table = FittedTable("t", COLUMNS, ROWS, whole=("samples/s",), drop=("epoch",))
    lines = _render(table, 62)
    assert "epoch" not in lines[1] and any("1 column left out to fit 62 columns: epoch" in line
                                          for line in lines)
    assert all(len(line) <= 62 for line in lines)


def test_a_table_that_cannot_fit_by_dropping_is_split_into_parts_naming_each_row() -> None:
    table = FittedTable("t", COLUMNS, ROWS, whole=("samples/s",), drop=("epoch",),
                        stack=("workload", "mode", "device"))
    lines = _render(table, 45)
    headers = [line for line in lines if line.startswith("workload")]
    assert len(headers) >= 2  # each part repeats the row's name
    text = "\n".join(lines)
    assert "20,699 ±0.8%" in text and "3.25 s proj." in text  # nothing left out, nothing split
    assert "left out" not in text and all(len(line) <= 45 for line in lines)


def test_a_table_with_no_row_name_stacks_its_rows_as_blocks() -> None:
    table = FittedTable("t", COLUMNS, ROWS, whole=("samples/s",))
    lines = _render(table, 30)
    assert any(line.startswith("workload") and "transformer-small" in line for line in lines)
    assert any("20,699 ±0.8%" in line for line in lines)
    assert all(len(line) <= 30 for line in lines)


def test_a_saved_path_is_never_folded_and_leaves_no_trailing_blank(monkeypatch: pytest.MonkeyPatch) -> None:
    """'Saved to PATH' at 80 columns once broke as 'Saved to ' (a trailing blank) and folded the
    path mid-name: the label now goes alone and the path whole on the next line."""
    from accelbench.cli.console import make_console, print_path

    monkeypatch.setenv("COLUMNS", "60")
    console = make_console()
    console.file = io.StringIO()
    long_path = "/tmp/home/results/20261127T183328Z-run-e581ef090018.json"
    print_path(console, "Saved to", long_path)
    print_path(console, "Saved to", "/tmp/r.json")
    print_path(console, "Saved to", "/x" * 40)  # wider than a line itself: folded at the width
    lines = console.file.getvalue().splitlines()
    assert lines[:3] == ["Saved to", long_path, "Saved to /tmp/r.json"]
    assert lines[3:] == ["Saved to", "/x" * 30, "/x" * 10]
