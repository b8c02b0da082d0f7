"""``accelbench list``'s table: what each workload is, its size and FLOPs, and the notes below it."""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text

from accelbench.render.fit import Cell, FittedTable
from accelbench.workloads.facts_record import ModelFacts


def _si(value: float | None) -> str:
    """Compact engineering notation: 25.6M, 8.18G, 873M."""
    if value is None:
        return "n/a"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.3g}"


def _per_mode(values: dict[str, int], compact: bool = False) -> str:
    shown = [(_si(values[m]) if compact else str(values[m])) for m in ("train", "eval") if m in values]
    return "/".join(shown)


COLUMNS = ("workload", "modes", "params", "fwd", "train", "batch", "input", "samples")
CAPTION = ("modes: t train, e eval, g generate. fwd, train: FLOPs per sample counted with torch's "
           "FlopCounterMode (multiply-add = 2; train = forward + backward). batch, samples: per "
           "epoch, train/eval. A name marked (missing) cannot run here: why is below.")


def facts_table(facts: list[ModelFacts]) -> FittedTable:
    """Narrow enough for an 80-column terminal; descriptions, torchvision's published figures and
    caveats follow as notes."""
    rows: list[list[Cell]] = [
        [Text(item.name) if item.available else Text(f"{item.name} (missing)", style="yellow"),
         "".join(mode[0] for mode in item.modes), _si(item.parameters),
         _si(item.forward_flops_per_sample), _si(item.flops_per_sample.get("train")),
         _per_mode(item.default_batch_size), "x".join(map(str, item.input_shape)),
         _per_mode(item.dataset_size, compact=True)] for item in facts]
    return FittedTable("accelbench workloads", COLUMNS, rows, right=COLUMNS[2:], whole=COLUMNS[1:],
                       stack=("workload",), notes=[CAPTION])


def notes(facts: list[ModelFacts]) -> list[str]:
    """What does not fit in the table: descriptions, unavailability reasons, reference caveats.

    Texts are escaped: rich would take "accelbench[transformers]" in an install hint for markup.
    """
    lines = [f"[bold]{item.name}[/bold]: {escape(item.description)}" for item in facts]
    for item in facts:
        if not item.available:
            lines.append(f"[yellow]{item.name} cannot run here[/yellow]: "
                         f"{escape(item.unavailable_reason or '')}")
        if item.count_error:
            lines.append(f"[yellow]{item.name} FLOPs not counted[/yellow]: {escape(item.count_error)}")
        if item.torchvision is not None:
            figure = item.torchvision
            where = f" for the {escape(figure.note)}" if figure.note else ""
            lines.append(f"{item.name}: {figure.label}{where}: {figure.gmacs:.2f} GMACs at 224x224 "
                         f"(= {2 * figure.gmacs:.3g} GFLOPs), {figure.parameters:,} parameters")
    return lines
