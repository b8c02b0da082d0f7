"""Energy (and the GPU's clock and thermal pressure) on a Mac: ``sudo -n powermetrics`` in the
background over the measured window.

sudo relays a signal to the command it runs only when the signal comes from outside sudo's own
process group (a ^C at the terminal reaches the whole group, the command included, so sudo drops
its copy). Started in accelbench's group, the SIGINT meant to stop powermetrics was dropped and an
unbounded wait held every case with an energy window until the case timeout. So powermetrics runs
in a session of its own, the signal goes to that group, and every wait is bounded.

The same call's GPU sampler prints the GPU's active clock and the thermal sampler macOS's thermal
pressure level: the sustained measurement reads both beside the power (``conditions``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.measure.trackers.energy_source import EnergySource, EnergyUnavailable, mean_power_joules

POWERMETRICS_INTERVAL_MS = 500
#: How long powermetrics may take to print its last sample and exit after SIGINT, and to go
#: after SIGKILL: every wait on it is bounded, so a sensor never holds the case it measures.
POWERMETRICS_STOP_S = 5.0
POWERMETRICS_KILL_S = 2.0


_SAMPLE_HEADER = re.compile(r"\*\*\* Sampled system activity .*\(([\d.]+)ms elapsed\) \*\*\*")
_POWER_LINE = re.compile(r"^(CPU|GPU|ANE|Combined) Power(?: \([^)]*\))?:\s*([\d.]+)\s*mW", re.M)
#: The GPU's clock while it was active ("GPU HW active frequency" on macOS 13+, "GPU active
#: frequency" before), and the thermal sampler's level.
_GPU_FREQUENCY = re.compile(r"^GPU (?:HW )?active frequency:\s*([\d.]+)\s*MHz", re.M)
_THERMAL_PRESSURE = re.compile(r"^Current pressure level:\s*(\w+)", re.M)
#: macOS's thermal pressure levels, mildest first (powermetrics' thermal sampler prints one).
THERMAL_LEVELS = ("Nominal", "Moderate", "Heavy", "Trapping", "Sleeping")


def _samples(text: str) -> list[tuple[float, str]]:
    """(seconds, text) of each sample in powermetrics' output (the last may be cut off)."""
    headers = list(_SAMPLE_HEADER.finditer(text))
    return [(float(header.group(1)) / 1000.0,
             text[header.end():headers[i + 1].start() if i + 1 < len(headers) else len(text)])
            for i, header in enumerate(headers)]


def parse_powermetrics(text: str) -> list[tuple[float, dict[str, float]]]:
    """(seconds, {"CPU": W, "GPU": W, ...}) for each complete sample in powermetrics' output."""
    samples = []
    for seconds, body in _samples(text):
        watts = {m.group(1): float(m.group(2)) / 1000.0 for m in _POWER_LINE.finditer(body)}
        if watts:
            samples.append((seconds, watts))
    return samples


def powermetrics_conditions(text: str) -> dict[str, Any]:
    """What the same powermetrics call says besides power: the GPU's active clock (MHz, the
    time-weighted mean over the samples that print it) and the worst thermal pressure level any
    sample printed. A key is absent where no sample printed it (an Intel Mac, no thermal
    sampler)."""
    conditions: dict[str, Any] = {}
    clocks = [(seconds, float(found.group(1))) for seconds, body in _samples(text)
              if (found := _GPU_FREQUENCY.search(body))]
    if clocks and sum(seconds for seconds, _ in clocks) > 0:
        conditions["gpu_active_mhz"] = (sum(s * mhz for s, mhz in clocks)
                                        / sum(s for s, _ in clocks))
    levels = [found.group(1).capitalize() for _, body in _samples(text)
              if (found := _THERMAL_PRESSURE.search(body))]
    if levels:
        conditions["thermal_pressure"] = max(
            levels, key=lambda level: THERMAL_LEVELS.index(level) if level in THERMAL_LEVELS
            else len(THERMAL_LEVELS))
    return conditions


def _signal_group(process: Any, signum: int) -> None:
    """``signum`` to the process group ``process`` leads (its own session): sudo relays a signal
    only when it comes from outside its own process group, so signalling sudo from accelbench's
    group was dropped. A process without a pid (a test's stand-in) gets it directly."""
    pid = getattr(process, "pid", None)
    # A root powermetrics may refuse a user's signal (EPERM) while sudo, the group's leader,
    # takes it and relays it; a group already gone needs none.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if isinstance(pid, int):
            os.killpg(pid, signum)
        else:
            process.send_signal(signum)


def stop_powermetrics(process: Any, stop_s: float = POWERMETRICS_STOP_S,
                      kill_s: float = POWERMETRICS_KILL_S) -> str:
    """SIGINT to the group (powermetrics prints what it has and exits), then SIGKILL, every wait
    bounded: the output read, or EnergyUnavailable when it would not stop (a root powermetrics
    that ignores SIGINT and that no signal of ours can kill still holds the pipe: it is left)."""
    _signal_group(process, signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=stop_s)
        return output or ""
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process, signal.SIGKILL)
    try:
        process.communicate(timeout=kill_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError, AttributeError):
            process.stdout.close()
    raise EnergyUnavailable(f"powermetrics did not stop within {stop_s:g} s of SIGINT; it was "
                            "killed and its samples dropped")


class PowermetricsSource(EnergySource):
    """``sudo -n powermetrics`` sampling ``parts`` (e.g. CPU, or CPU and GPU) over the interval;
    the same call's GPU clock and thermal pressure are kept in ``conditions``."""

    method = "power sampled by powermetrics x interval"
    resolution = f"one power sample every {POWERMETRICS_INTERVAL_MS} ms"
    min_seconds = 3 * POWERMETRICS_INTERVAL_MS / 1000  # a few samples

    def __init__(self, parts: tuple[str, ...], popen: Callable[..., Any] = subprocess.Popen,
                 run: Callable[..., Any] = subprocess.run, system: str | None = None,
                 stop_s: float = POWERMETRICS_STOP_S) -> None:
        self.parts = parts
        self.name = "powermetrics-" + "-".join(p.lower() for p in parts)
        self._popen, self._run = popen, run
        self._system = system or platform.system()
        self._stop_s = stop_s
        self._process: Any = None
        self._started = 0.0

    def _command(self, extra: Sequence[str] = ()) -> list[str]:
        return ["sudo", "-n", "powermetrics", "--samplers", "cpu_power,gpu_power,thermal", "-i",
                str(POWERMETRICS_INTERVAL_MS), *extra]

    def available(self) -> tuple[bool, str]:
        if self._system != "Darwin":
            return False, f"powermetrics exists only on macOS; this is {self._system}"
        try:
            probe = self._run(self._command(["-n", "1"]), capture_output=True, text=True,
                              timeout=10, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            return False, f"powermetrics did not run: {error}"
        if probe.returncode != 0:
            said = next((line for line in (probe.stderr or "").splitlines() if line.strip()), "")
            return False, (f"sudo -n powermetrics failed ({said or f'exit code {probe.returncode}'})"
                           "; it needs root: run accelbench with sudo, or allow powermetrics "
                           "without a password in sudoers")
        try:
            self._watts(parse_powermetrics(probe.stdout))
        except EnergyUnavailable as error:
            return False, str(error)
        return True, ""

    def _watts(self, samples: list[tuple[float, dict[str, float]]]) -> list[tuple[float, float]]:
        missing = {part for part in self.parts for _, watts in samples if part not in watts}
        if missing or not samples:
            raise EnergyUnavailable(f"powermetrics printed no {'/'.join(sorted(missing or self.parts))}"
                                    " Power line (Apple silicon only)")
        return [(seconds, sum(watts[part] for part in self.parts)) for seconds, watts in samples]

    def start(self) -> None:
        self.conditions = {}
        # A session of its own: sudo then relays our signals (see _signal_group), and a ^C at
        # the terminal reaches accelbench, which stops it, rather than both at once.
        self._process = self._popen(self._command(), stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        self._started = time.perf_counter()

    def stop(self) -> float:
        seconds = time.perf_counter() - self._started
        process, self._process = self._process, None
        output = stop_powermetrics(process, self._stop_s)
        self.conditions = powermetrics_conditions(output)
        return mean_power_joules(self._watts(parse_powermetrics(output)), seconds)
