"""The feature matrix of a ``probe`` record: features as rows, devices as columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

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
        short = finding if len(finding) <= room else finding[:room - 1] + "…"
        text.append(f" {short}", style="dim")
    return text


def probe_table(record: RunRecord) -> Table:
    """Pure: the record's cells as a rich Table (features never probed on a device say so)."""
    columns = [(probe.device, probe.cells) for probe in record.probes]
    features = list(dict.fromkeys(name for _, cells in columns for name in cells))
    table = Table(title=f"accelbench probe {record.run_id}", title_justify="left",
                  caption="works | fails (the error) | wrong (error vs the float64 CPU reference "
                  "beyond the tolerance) | slower (than the CPU); full details with --json",
                  caption_justify="left")
    table.add_column("feature", no_wrap=True)
    for device, _ in columns:
        table.add_column(device, overflow="fold")
    for feature in features:
        table.add_row(feature, *(_cell_text(cells.get(feature)) for _, cells in columns))
    return table


def feature_list_table(features: list[Feature]) -> Table:
    table = Table(title="features accelbench probe tries", title_justify="left")
    for column in ("feature", "what", "devices"):
        table.add_column(column)
    for feature in features:
        table.add_row(feature.name, feature.summary, ", ".join(feature.kinds) or "all")
    return table
