"""What the peak behind a case's ``% peak`` was, in words: the one wording of a peak's mark, read
from the case's stored ``flops`` record, for every surface that shows ``% peak`` or
``fraction_of_peak`` (the run table's ``--wide`` cell, the ``--profile`` diagnosis, ``--json``,
the CSV, Markdown and HUD exports, the HTML report).

A peak is marked when it was timed while something held the device's clock back (**capped**:
``peak_limited_by`` and ``peak_clock_mhz``, worded by ``peak_clocks.cap_words`` as the roofline
and selftest word it), when it was measured beside other work (**busy**: ``peak_busy``), or when
it is a good figure whose latest re-check ran on a busy machine (**re-checked**:
``peak_recheck_busy``; measure/ceilings/peak.py). Nothing here measures or recomputes: a result
whose record carries none of them (older results included) has no mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.measure.ceilings.peak_clocks import cap_words
from accelbench.render.format import format_rate
from accelbench.results import CaseResult
from accelbench.results.figures import Flops
from accelbench.results.key import config_label


@dataclass(frozen=True)
class PeakMark:
    #: What the peak was: "capped peak", "busy peak", "capped and busy peak", "peak re-checked on
    #: a busy machine".
    noun: str
    #: Why: what held the clock and the clock then; why the machine was busy.
    detail: str

    @property
    def words(self) -> str:
        """"capped peak (software power cap at 1,380 MHz)"."""
        return f"{self.noun} ({self.detail})"


def peak_mark(flops: Flops | None) -> PeakMark | None:
    """The mark of the peak a case's ``fraction_of_peak`` was divided by; None for a peak nothing
    marks (or a case without one)."""
    if flops is None or flops.peak_flops is None:
        return None
    cap = cap_words(flops.peak_limited_by, flops.peak_clock_mhz)
    rechecked = "" if flops.peak_busy else flops.peak_recheck_busy
    kinds = " and ".join(word for flag, word in ((cap, "capped"), (flops.peak_busy, "busy")) if flag)
    if not kinds and not rechecked:
        return None
    noun = " ".join(part for part in (kinds, "peak", "re-checked on a busy machine" if rechecked else "")
                    if part)
    return PeakMark(noun, "; ".join(part for part in (cap, flops.peak_busy, rechecked) if part))


def mark_words(flops: Flops | None) -> str:
    """The mark in full ("" for none): the CSV's ``peak_mark``, --json's, the HUD's."""
    mark = peak_mark(flops)
    return mark.words if mark else ""


def flops_text(case: CaseResult) -> str:
    """The run table's ``GFLOP/s (% peak)`` cell: "12.3 (45% of a capped peak, 52% sust.)"."""
    flops = case.flops
    if flops is None or flops.achieved_flops is None:
        return "n/a"
    text = format_rate(flops.achieved_flops / 1e9)
    mark = peak_mark(flops)
    shares = [f"{share * 100:.0f}%{word}" for share, word in (
        (flops.fraction_of_peak, f" of a {mark.noun}" if mark else ""),
        (flops.fraction_of_sustained_peak, " sust.")) if share is not None]
    return f"{text} ({', '.join(shares)})" if shares else text


#: The report's and the Markdown export's table of each case's FLOP/s and the peak behind it.
PEAK_COLUMNS = ("workload", "mode", "device", "config", "GFLOP/s (% peak)", "peak GFLOP/s", "peak mark")


def peak_rows(cases: Sequence[CaseResult]) -> list[tuple[str, ...]]:
    """A row per finished case with achieved FLOP/s: the cell the run table shows, the peak it
    was held against, and that peak's mark in full ("" where nothing marks it)."""
    return [(case.workload, case.mode, case.device, config_label(case), flops_text(case),
             format_rate(case.flops.peak_flops / 1e9) if case.flops.peak_flops else "n/a",
             mark_words(case.flops))
            for case in cases if case.ok and case.flops is not None and case.flops.achieved_flops is not None]
