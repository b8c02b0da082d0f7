"""The feature matrix of a ``probe`` record: features as rows, devices as columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from accelbench.render.fit import Cell, FittedTable
from accelbench.render.words import shorten
from accelbench.results import ProbeCell, RunRecord

if TYPE_CHECKING:
    from accelbench.probes import Feature

STYLES = {"works": "green", "fails": "red", "wrong": "bold magenta", "slower": "yellow",
          "crashed": "bold red", "timeout": "bold red"}
#: Room for the finding in a cell; an error message is the finding itself, so it gets more.
DETAIL_CHARS = {"fails": 120, "crashed": 120, "timeout": 120}
DEFAULT_DETAIL_CHARS = 60


def _cell_text(cell: ProbeCell | None) -> Text:
    if cell is None:
        return Text("not probed", style="dim")
    text = Text(cell.status, style=STYLES.get(cell.status, ""))
    # The first part of the detail is the finding (the error, the error size, the ratio); the
    # rest (notes, timings against a baseline) stays in the JSON.
    finding = cell.detail.split("; ")[0]
    if finding:
        room = DETAIL_CHARS.get(cell.status, DEFAULT_DETAIL_CHARS)
        text.append(f" {shorten(finding, room)}", style="dim")
    return text


CAPTION = ("works | fails (the error) | wrong (error vs the float64 CPU reference beyond the "
           "tolerance) | slower (than the CPU); full details with --json")


def probe_table(record: RunRecord) -> FittedTable:
    """Pure: the record's cells as a fitted table (features never probed on a device say so)."""
    columns = [(probe.device, probe.cells) for probe in record.probes]
    features = list(dict.fromkeys(name for _, cells in columns for name in cells))
    rows: list[list[Cell]] = [[feature, *(_cell_text(cells.get(feature)) for _, cells in columns)]
                              for feature in features]
    return FittedTable(f"accelbench probe {record.run_id}",
                       ["feature", *(device for device, _ in columns)], rows, whole=("feature",),
                       stack=("feature",), notes=[CAPTION])


def feature_list_table(features: list[Feature]) -> FittedTable:
    return FittedTable("features accelbench probe tries", ("feature", "what", "devices"),
                       [[feature.name, feature.summary, ", ".join(feature.kinds) or "all"]
                        for feature in features], stack=("feature",))
