""""Is my machine normal?": one compact table per user case against its peers (compare/peers.py).

The first row is the user's own device model: its peers' count, median, 10th-90th percentile and
best, then the user's figure, percentile, ratio to the median and a short verdict with a mark;
then the other device models that did the same work, fastest first (published ones marked). What
the verdict rests on (likely reasons, or too few peers) is a footnote, each text once, and the
rule is said once under all the tables.

A run's figures across cases (MLPerf Client's overall geometric means, as its record stores them)
get a table of the same shape after them (``overall_renderable``): each device model's shared runs
of the same work, the user's stored figures, percentile, ratio to the median and verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text

from accelbench.compare.collection import OverallGroup
from accelbench.compare.overall_place import OverallPlacement
from accelbench.compare.peers import (
    ABOVE,
    BELOW,
    HIGH_PERCENTILE,
    LOW_PERCENTILE,
    MIN_PEERS,
    NORMAL,
    TOO_FEW,
    ModelGroup,
    PeerComparison,
    Placement,
)
from accelbench.reference.published import PUBLISHED_LABEL
from accelbench.render.compare_table import PlainTable
from accelbench.render.fit import FittedTable, Footnotes, Prose
from accelbench.render.format import format_rate, format_seconds
from accelbench.results import rate_unit
from accelbench.results.key import KEY_FIELDS, config_label

COLUMNS = ("device model", "results", "median/s", f"p{LOW_PERCENTILE}–p{HIGH_PERCENTILE}", "best/s",
           "you/s", "pct", "x median", "verdict")
RIGHT = ("results", "median/s", f"p{LOW_PERCENTILE}–p{HIGH_PERCENTILE}", "best/s", "you/s", "pct",
         "x median")
#: Other device models shown per table; the rest are counted in one row.
MAX_OTHER_MODELS = 8
_WORD = {NORMAL: "normal", BELOW: "below", ABOVE: "above", TOO_FEW: "too few"}
RULE = (f"verdict: among results of the same work on the same device model; normal = within the "
        f"peers' {LOW_PERCENTILE}th-{HIGH_PERCENTILE}th percentile; below/above its peers otherwise, "
        f"with the recorded settings in which yours differs from most of theirs as likely reasons; "
        f"fewer than {MIN_PEERS} machines: too few to judge. Peers are machines: each machine's median "
        f"result is one value, and this machine's own shared results are not its peers (an aggregate "
        f"band's counts excepted: see its note). Where either "
        f"decode is overhead-bound (host launches), only lines driven by the same host CPU model are "
        f"compared. Figures: each title's rate (samples/s at the median step; decode tokens/s over the "
        f"batch for generation)")


def _title(comparison: PeerComparison) -> str:
    mine = comparison.placement.mine
    key = dict(zip(KEY_FIELDS, mine.key, strict=True))
    placement = comparison.placement
    # A generation line says the bound its decode hit (and the host CPU of an overhead-bound one).
    bound = f"; yours {mine.decode.bound_words}" if mine.decode and mine.decode.bound_words else ""
    return (f"{key['workload']} · {key['mode']} · {config_label(key)} on {mine.device_model} "
            f"({comparison.device}, {comparison.run_label}): {rate_unit(str(key['mode']))}, against "
            f"{placement.peer_count} shared result(s) from {placement.machine_count} machine(s){bound}")


def _group_cells(group: ModelGroup, notes: Footnotes) -> list[str]:
    name = group.device_model
    if group.published:
        name += " (published)" + notes.add(f"{PUBLISHED_LABEL}: {group.published}")
    count = f"{group.count}" if group.published or group.machines == group.count else \
        f"{group.count} ({group.machines} machines)"
    return [name, count, format_rate(group.median), f"{format_rate(group.low)}–{format_rate(group.high)}",
            format_rate(group.best)]


#: Reasons named in one footnote; the rest are counted.
MAX_NAMED_REASONS = 3


def _few(reasons: Sequence[str]) -> str:
    named = "; ".join(reasons[:MAX_NAMED_REASONS])
    more = len(reasons) - MAX_NAMED_REASONS
    return named + (f"; and {more} more reason(s)" if more > 0 else "")


def _verdict_cell(placement: Placement, notes: Footnotes) -> str:
    word = _WORD[placement.verdict]
    if placement.note:
        word += notes.add(placement.note)
    if placement.invalid:
        word += notes.add(f"{placement.invalid} result(s) of this work flagged invalid (implausible on "
                          "their own machine) and left out: " + _few(placement.invalid_reasons))
    if placement.outliers:
        word += notes.add(f"{placement.outliers} result(s) of this work quarantined and left out: "
                          + _few(placement.outlier_reasons))
    if placement.set_aside:
        word += notes.add(f"{placement.set_aside} result(s) of this work set aside, not comparable: "
                          + _few(placement.set_aside_reasons))
    if placement.verdict == TOO_FEW:
        have = placement.own.machines if placement.own else 0
        whose = "in this band" if placement.note else "of this device model"
        return word + notes.add(f"too few peers: {have} machine(s) {whose} did the same "
                                f"work; {MIN_PEERS} are needed to judge")
    if placement.reasons:
        return word + notes.add(f"{placement.verdict}; likely reasons: " + " | ".join(placement.reasons))
    if placement.verdict != NORMAL and not placement.note:
        return word + notes.add(f"{placement.verdict}; no recorded setting differs from most peers'")
    return word


def peers_layout(comparisons: Sequence[PeerComparison]) -> tuple[list[PlainTable], list[str]]:
    notes = Footnotes()
    tables = []
    for comparison in comparisons:
        placement = comparison.placement
        own = placement.own
        mine = placement.mine
        first = (_group_cells(own, notes) if own else [mine.device_model, "0", "", "", ""])
        first += [format_rate(mine.throughput),
                  f"{placement.percentile:.0f}" if placement.percentile is not None else "",
                  f"{placement.ratio_to_median:.2f}x" if placement.ratio_to_median is not None else "",
                  _verdict_cell(placement, notes)]
        rows, published = [first], [False]
        others = [g for g in placement.groups if g is not own]
        for group in others[:MAX_OTHER_MODELS]:
            rows.append([*_group_cells(group, notes), "", "", "", ""])
            published.append(bool(group.published))
        if len(others) > MAX_OTHER_MODELS:
            rest = others[MAX_OTHER_MODELS:]
            rows.append([f"{len(rest)} more device models", str(sum(g.count for g in rest)), "", "", "",
                         "", "", "", ""])
            published.append(False)
        tables.append(PlainTable(_title(comparison), list(COLUMNS), rows, published))
    return tables, [*notes.lines(), RULE]


def peers_renderable(comparisons: Sequence[PeerComparison]) -> Group:
    tables, notes = peers_layout(comparisons)
    parts: list[FittedTable | Text | Prose] = []
    for table in tables:
        styles = ["bold", *("dim italic" if p else "" for p in table.published[1:])]
        parts += [FittedTable(table.title, table.columns, table.rows, styles, RIGHT,
                              stack=("device model",)), Text("")]
    parts += [Prose(line, "dim") for line in notes]
    return Group(*parts)


OVERALL_COLUMNS = ("device model", "runs", "median TTFT", "median/s", f"p{LOW_PERCENTILE}–p{HIGH_PERCENTILE}",
                   "your TTFT", "you/s", "pct", "x median", "verdict")
OVERALL_RIGHT = OVERALL_COLUMNS[1:-1]
OVERALL_RULE = (f"overall verdict: your run's stored 2nd+ token rate (MLPerf Client's overall, the "
                f"geometric mean over its categories) among the runs of the same work on the same device "
                f"model that shared theirs, by the rule above: normal = within their machines' "
                f"{LOW_PERCENTILE}th-{HIGH_PERCENTILE}th percentile; fewer than {MIN_PEERS} machines: too "
                f"few to judge; each machine's median run is one value, and this machine's own runs are "
                f"not its peers. x median: your rate over their median (TTFT: --json's "
                f"ttft_ratio_to_median). Figures as each run stored them, never recomputed")


def _overall_title(placement: OverallPlacement) -> str:
    key = dict(zip(KEY_FIELDS, placement.key, strict=True))
    return (f"{key['workload']} · {key['mode']} · {config_label(key)} on {placement.device_model} "
            f"({placement.device}, {placement.run_label}): MLPerf Client overall, over "
            f"{len(placement.overall.categories)} categories, against {placement.peer_count} shared "
            f"run(s) from {placement.machine_count} machine(s)")


def _overall_cells(group: OverallGroup) -> list[str]:
    band = group.band()
    count = (str(group.groups) if group.machines == group.groups
             else f"{group.groups} ({group.machines} machines)")
    return [group.device_model, count, format_seconds(group.ttft_s), format_rate(group.token_rate),
            f"{format_rate(band[0])}–{format_rate(band[1])}" if band else ""]


def _overall_verdict(placement: OverallPlacement, notes: Footnotes) -> str:
    word = _WORD[placement.verdict]
    if placement.verdict == TOO_FEW:
        have = placement.own.machines if placement.own else 0
        return word + notes.add(f"too few peers: {have} machine(s) of this device model shared overall "
                                f"figures of the same work; {MIN_PEERS} are needed to judge")
    return word


def overall_layout(placements: Sequence[OverallPlacement]) -> tuple[list[PlainTable], list[str]]:
    """A table per placed overall group: the user's device model first, with the user's figures."""
    notes = Footnotes()
    tables = []
    for placement in placements:
        own, overall = placement.own, placement.overall
        first = _overall_cells(own) if own else [placement.device_model, "0", "", "", ""]
        first += [format_seconds(overall.ttft_s), format_rate(overall.token_rate),
                  f"{placement.percentile:.0f}" if placement.percentile is not None else "",
                  f"{placement.ratio_to_median:.2f}x" if placement.ratio_to_median is not None else "",
                  _overall_verdict(placement, notes)]
        rows = [first] + [[*_overall_cells(g), "", "", "", "", ""] for g in placement.groups if g is not own]
        tables.append(PlainTable(_overall_title(placement), list(OVERALL_COLUMNS), rows, [False] * len(rows)))
    return tables, [*notes.lines(), OVERALL_RULE]


def overall_renderable(placements: Sequence[OverallPlacement]) -> Group | None:
    """``overall_layout`` for the terminal; None where no stored overall group was placed."""
    if not placements:
        return None
    tables, notes = overall_layout(placements)
    parts: list[FittedTable | Text | Prose] = [Text("")]  # apart from the cases' rule above
    for table in tables:
        parts += [FittedTable(table.title, table.columns, table.rows,
                              ["bold", *[""] * (len(table.rows) - 1)], OVERALL_RIGHT,
                              stack=("device model",)), Text("")]
    parts += [Prose(line, "dim") for line in notes]
    return Group(*parts)
