"""Issue 30 (item E): the progress display says where the run is ("case 3 of 9", elapsed, an
estimate of what is left) and a queued case shows no clock; on a clock the test controls."""

from __future__ import annotations

import io
import re

from rich.console import Console

from accelbench.engine.progress import Tally, clock_text, progress_display


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_tally_counts_cases_and_estimates_from_the_finished_ones() -> None:
    clock = Clock()
    tally = Tally(9, clock)
    assert tally.line() == "case 1 of 9 · 0:00 elapsed"  # no estimate before a case has finished
    tally.update(0, "running")
    clock.now += 40
    tally.update(0, "measure")
    clock.now += 20
    tally.update(0, "ok")
    tally.update(1, "running")
    clock.now += 15
    tally.update(1, "warm-up")
    # 60 s a case: 8 more, less the 15 s the second has run
    assert tally.left() == 8 * 60 - 15
    assert tally.line() == "case 2 of 9 · 1:15 elapsed · about 7:45 left"
    tally.update(1, "crashed")  # a failed case ends too
    clock.now += 5
    tally.update(2, "running")
    assert tally.line().startswith("case 3 of 9 · 1:20 elapsed · about ")


def test_the_last_case_says_nothing_is_left_to_estimate() -> None:
    clock = Clock()
    tally = Tally(1, clock)
    tally.update(0, "running")
    clock.now += 3725
    tally.update(0, "ok")
    assert tally.line() == "case 1 of 1 · 1:02:05 elapsed"
    assert clock_text(59.6) == "1:00"


def test_a_queued_row_shows_no_clock_and_the_first_row_says_where_the_run_is() -> None:
    clock = Clock()
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with progress_display(["mnist train cpu", "vae train cpu", "gpt2 eval cpu"], console=console,
                          clock=clock) as update:
        assert update is not None
        update(0, "running", 0.0, None)
        clock.now += 60
        update(0, "ok", 1.0, 1.0)
        update(1, "running", 0.0, None)
        clock.now += 10
        update(1, "measure", 0.5, 1.0)
        console.print("")  # a refresh of the live display at this moment
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", console.file.getvalue())  # type: ignore[attr-defined]
    last = text[text.rindex("case 2 of 3"):].splitlines()
    assert "case 2 of 3 · 1:10 elapsed · about 1:50 left" in last[0]
    rows = {line.split()[0]: line for line in last[1:4]}
    assert rows["mnist"].rstrip().endswith("ok      1:00")
    assert rows["vae"].rstrip().endswith("0:10")
    assert rows["gpt2"].rstrip().endswith("queued")  # no time at all, not the run's clock
