"""powermetrics on a Mac (issue 26): item 14, the energy window that hung every case (sudo drops a
signal sent from its own process group, and the waits were unbounded), against a real fake
``sudo`` and ``powermetrics`` on PATH; item 20, the GPU clock and thermal pressure read from the
same call (a recorded sample)."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from accelbench.measure.trackers.energy import EnergyMeter
from accelbench.measure.trackers.energy_powermetrics import (
    PowermetricsSource,
    parse_powermetrics,
    powermetrics_conditions,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "energy"
APPLE = (DATA / "powermetrics-apple-m1.txt").read_text()
THERMAL = (DATA / "powermetrics-apple-thermal.txt").read_text()

#: sudo as it treats signals (plugins/sudoers exec): the command runs as its child, and a signal
#: is relayed to it only when it comes from a process outside sudo's own process group (from
#: inside, the terminal sent it to the whole group, the command included). sigwaitinfo gives the
#: sender's pid, so this fake decides as sudo does.
FAKE_SUDO = """
    import os, signal, subprocess, sys
    args = sys.argv[1:]
    if args and args[0] == "-n":
        args = args[1:]
    relayed = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT}
    signal.pthread_sigmask(signal.SIG_BLOCK, relayed | {signal.SIGCHLD})
    child = subprocess.Popen(args, preexec_fn=lambda: signal.pthread_sigmask(
        signal.SIG_UNBLOCK, relayed | {signal.SIGCHLD}))
    while child.poll() is None:
        info = signal.sigtimedwait(relayed | {signal.SIGCHLD}, 0.5)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        try:
            inside = os.getpgid(info.si_pid) == os.getpgrp()
        except ProcessLookupError:
            inside = False
        with open(os.environ["FAKE_SUDO_LOG"], "a") as log:
            log.write(f"{'dropped' if inside else 'relayed'} {info.si_signo}\\n")
        if not inside:
            child.send_signal(info.si_signo)
    sys.exit(child.returncode)
"""

#: powermetrics: with ``-n 1`` (the probe) prints a sample and exits; otherwise prints its
#: samples when SIGINT stops it (``ignore``: it never stops by itself
#: and ignores SIGINT, as a wedged one would); it gives up after a minute, so a test of the old
#: code cannot leave it behind for ever.
FAKE_POWERMETRICS = """
    import os, signal, sys, time
    if "-n" in sys.argv:  # the probe: one sample, printed at once
        sys.stdout.write(open(os.environ["FAKE_POWERMETRICS_OUTPUT"]).read())
        sys.exit(0)
    ignore = os.environ.get("FAKE_POWERMETRICS_IGNORE") == "1"
    stopped = []
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignore else lambda *_: stopped.append(1))
    open(os.environ["FAKE_POWERMETRICS_READY"], "w").close()
    deadline = time.monotonic() + 60
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    sys.stdout.write(open(os.environ["FAKE_POWERMETRICS_OUTPUT"]).read())
"""


@pytest.fixture
def fake_mac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``sudo`` and ``powermetrics`` on PATH as above; returns the folder of their files."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("sudo", FAKE_SUDO), ("powermetrics", FAKE_POWERMETRICS)):
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
        script.chmod(0o755)
    (tmp_path / "output.txt").write_text(THERMAL)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SUDO_LOG", str(tmp_path / "sudo.log"))
    monkeypatch.setenv("FAKE_POWERMETRICS_READY", str(tmp_path / "ready"))
    monkeypatch.setenv("FAKE_POWERMETRICS_OUTPUT", str(tmp_path / "output.txt"))
    return tmp_path


def _started(source: PowermetricsSource, folder: Path) -> None:
    source.start()
    deadline = time.monotonic() + 30  # two Python processes starting on a busy machine
    while not (folder / "ready").exists():
        assert time.monotonic() < deadline, "the fake powermetrics never started"
        time.sleep(0.02)


def _stop_within(source: PowermetricsSource, seconds: float) -> dict[str, object]:
    """``source.stop()`` on a thread: its outcome, or a failure when it did not return (the old
    code waited for ever)."""
    outcome: dict[str, object] = {}

    def stop() -> None:
        try:
            outcome["joules"] = source.stop()
        except Exception as error:  # noqa: BLE001 - the outcome is what the test reads
            outcome["error"] = error

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"stopping powermetrics did not return within {seconds:g} s: it hangs")
    return outcome


def test_powermetrics_under_sudo_stops_on_its_sigint(fake_mac: Path) -> None:
    """Item 14: started in a session of its own, the SIGINT comes from outside sudo's group, so
    sudo relays it; powermetrics prints its samples and the window gets its joules at once."""
    source = PowermetricsSource(("CPU", "GPU"), system="Darwin")
    _started(source, fake_mac)
    began = time.monotonic()
    outcome = _stop_within(source, 30)
    assert "error" not in outcome, outcome
    assert outcome["joules"] > 0
    assert time.monotonic() - began < 5, "it waited out the SIGINT timeout: the signal was lost"
    log = (fake_mac / "sudo.log").read_text()
    assert "dropped" not in log, log
    # item 20: the same call's GPU clock and worst thermal pressure
    assert source.conditions["thermal_pressure"] == "Heavy"


def test_powermetrics_that_ignores_sigint_is_killed_within_a_bound(fake_mac: Path,
                                                                   monkeypatch) -> None:
    """Item 14: a powermetrics that never stops is killed (with its group) after a bounded wait,
    and the window's energy is n/a with the reason, not a case held until its timeout."""
    monkeypatch.setenv("FAKE_POWERMETRICS_IGNORE", "1")
    source = PowermetricsSource(("CPU", "GPU"), system="Darwin", stop_s=0.5)
    meter = EnergyMeter([source])
    meter.prepare()  # the probe (-n 1) runs through the fake sudo too
    assert meter.min_seconds > 0, meter._reasons
    meter.start()
    deadline = time.monotonic() + 30
    while not (fake_mac / "ready").exists():
        assert time.monotonic() < deadline, "the fake powermetrics never started"
        time.sleep(0.02)
    began = time.monotonic()
    outcome: dict[str, object] = {}
    thread = threading.Thread(target=lambda: outcome.update(reading=meter.stop()), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the meter's stop hangs"
    reading = outcome["reading"]
    assert reading.joules is None and "did not stop" in reading.reason, reading
    assert time.monotonic() - began < 10


def test_gpu_clock_and_thermal_pressure_come_from_the_same_call() -> None:
    """Item 20: the GPU's active clock (time-weighted over the samples) and the worst pressure."""
    conditions = powermetrics_conditions(THERMAL)
    mean = (1398 * 0.50211 + 1110 * 0.50087) / (0.50211 + 0.50087)
    assert conditions["gpu_active_mhz"] == pytest.approx(mean)
    assert conditions["thermal_pressure"] == "Heavy"
    assert [round(w["GPU"], 2) for _, w in parse_powermetrics(THERMAL)] == [14.21, 11.05]
    # No thermal sampler in the output: no pressure, never a made-up "Nominal".
    assert powermetrics_conditions(APPLE) == {"gpu_active_mhz": pytest.approx(1278.0)}
