"""How busy the machine was while something was measured: other processes' CPU time, and the
time the hypervisor gave to other guests (stolen), over the measured window.

A ceiling measured beside other work reads low (a CPU matmul peak beside two busy loops read a
third of itself), and a low ceiling inflates every ``% peak`` held against it. The load average
cannot tell: it trails by a minute (it stays high for a minute after the other work stopped,
and rises only slowly when it starts) and counts this process too. So the window's own CPU
accounting is read: the machine's busy time (``/proc/stat`` through psutil) less this process's
own, as a share of the window's CPU capacity, and the stolen share. The 1-minute load per CPU is
kept beside them, for the record only.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import psutil

#: Other processes using this share of the machine's CPU time make a CPU measurement "busy".
BUSY_OTHERS_SHARE = 0.15
#: Stolen time above this share of the window makes it "busy" (a VM whose host is oversubscribed).
BUSY_STEAL_SHARE = 0.10
#: How long :func:`now` watches an idle moment to say whether the machine is busy now.
PROBE_S = 0.2


@dataclass(frozen=True)
class Conditions:
    """What else ran during a measured window."""

    seconds: float
    #: Other processes' CPU time over the window's capacity (wall time x logical CPUs).
    others_cpu_share: float | None = None
    #: Time the hypervisor ran other guests, over the same capacity (Linux VMs; None elsewhere).
    steal_share: float | None = None
    #: The 1-minute load average per logical CPU at the window's end (it lags: not judged).
    load_per_cpu: float | None = None

    def load_share(self) -> float:
        """The share of the machine's CPU time others took (other processes and other guests)."""
        return (self.others_cpu_share or 0.0) + (self.steal_share or 0.0)

    def busy(self) -> str:
        """Why the machine was busy for a CPU measurement ("" when it was not)."""
        reasons = []
        if self.others_cpu_share is not None and self.others_cpu_share >= BUSY_OTHERS_SHARE:
            reasons.append(f"other processes used {self.others_cpu_share:.0%} of the CPUs")
        if self.steal_share is not None and self.steal_share >= BUSY_STEAL_SHARE:
            reasons.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU time")
        return "; ".join(reasons)

    def to_dict(self) -> dict[str, Any]:
        return {name: (round(value, 4) if isinstance(value, float) else value)
                for name, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Any) -> Conditions | None:
        if not isinstance(data, dict) or not isinstance(data.get("seconds"), int | float):
            return None
        values: dict[str, Any] = {name: data.get(name) for name in cls.__dataclass_fields__}
        return cls(**values)


def _busy_seconds(times: Any) -> tuple[float, float]:
    """(busy, stolen) seconds of a psutil cpu_times() total (guest time is inside user time)."""
    busy = sum(float(getattr(times, name, 0.0) or 0.0)
               for name in ("user", "nice", "system", "irq", "softirq"))
    return busy, float(getattr(times, "steal", 0.0) or 0.0)


def _own_seconds(times: Any) -> float:
    return float(times.user) + float(times.system)


class ContentionWatch:
    """``start`` before a measured window, ``stop`` after it: the window's :class:`Conditions`.
    Every reader can be replaced (tests hand in their own clocks and counters)."""

    def __init__(self, machine: Callable[[], Any] = psutil.cpu_times,
                 own: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 cpus: int | None = None,
                 load: Callable[[], tuple[float, float, float]] | None = None) -> None:
        self._machine, self._clock = machine, clock
        self._own = own or (lambda: psutil.Process().cpu_times())
        self._cpus = cpus or os.cpu_count() or 1
        self._load = load if load is not None else getattr(os, "getloadavg", None)
        self._start: tuple[float, float, float, float] | None = None

    def _read(self) -> tuple[float, float, float, float]:
        busy, stolen = _busy_seconds(self._machine())
        return self._clock(), busy, stolen, _own_seconds(self._own())

    def start(self) -> None:
        try:
            self._start = self._read()
        except Exception:  # a machine that does not say: no conditions, never a failed measurement
            self._start = None

    def stop(self) -> Conditions:
        load = None
        with contextlib.suppress(OSError):  # a load average the OS cannot give is no fact
            load = round(self._load()[0] / self._cpus, 2) if self._load is not None else None
        if self._start is None:
            return Conditions(0.0, load_per_cpu=load)
        try:
            end = self._read()
        except Exception:
            return Conditions(0.0, load_per_cpu=load)
        wall = end[0] - self._start[0]
        if wall <= 0:
            return Conditions(0.0, load_per_cpu=load)
        capacity = wall * self._cpus
        others = max(0.0, (end[1] - self._start[1]) - (end[3] - self._start[3]))
        stolen = max(0.0, end[2] - self._start[2])
        return Conditions(wall, min(1.0, others / capacity), min(1.0, stolen / capacity), load)


def now(seconds: float = PROBE_S, watch: ContentionWatch | None = None,
        sleep: Callable[[float], None] = time.sleep) -> Conditions:
    """The machine's conditions over a short idle moment of this process: whether others keep
    it busy right now."""
    watch = watch or ContentionWatch()
    watch.start()
    sleep(seconds)
    return watch.stop()
