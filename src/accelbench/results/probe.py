"""What ``accelbench probe`` found: per device, one cell per feature (see probes/cells.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from accelbench.results.validate import Record, check_choice

#: In the order a cell's status is decided (probes/cells.py).
#: ``crashed`` and ``timeout``: the feature killed or overran the worker probing it (probes/work.py).
PROBE_STATUSES = ("fails", "wrong", "slower", "works", "crashed", "timeout")


@dataclass(frozen=True)
class ProbeCell(Record):
    """One feature on one device."""

    status: str
    #: The finding first (the error, the error size, the ratio), then notes, joined by "; ".
    detail: str = ""
    #: Device time / CPU time for the same op (above 1: the device is slower); None when untimed.
    ratio: float | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        check_choice(self.status, PROBE_STATUSES, "probe status")


@dataclass(frozen=True)
class DeviceProbe(Record):
    """Every feature probed on one device, in the order they ran."""

    device: str
    device_name: str = ""
    #: torch's CPU threads while probing (the CPU timings the ratios divide by depend on it).
    threads: int = 0
    cells: dict[str, ProbeCell] = field(default_factory=dict)
