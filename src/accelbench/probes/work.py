"""``probe``'s per-case work for the driver: a case is one device, probed in a worker process.

A feature that kills the worker (a segfault in a kernel) or overruns the timeout costs only its
own cell: the worker leaves the cells it finished in its partial result, the crashing feature's
cell becomes ``crashed`` (the signal named) or ``timeout``, and a fresh worker goes on with the
features after it (the process launcher's ``resume``: this work says what a worker finished and
what remains, :meth:`ProbeWork.resume`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.devices import Device, DeviceSet
from accelbench.devices.environment import collect_environment
from accelbench.engine.driver import drive
from accelbench.engine.launchers.base import Progress, Report
from accelbench.engine.launchers.choose import LaunchPlan
from accelbench.engine.progress import ItemProgress
from accelbench.engine.spec import CaseSpec
from accelbench.engine.work import CaseWork
from accelbench.errors import UsageError
from accelbench.options import DEFAULT_CASE_TIMEOUT_S
from accelbench.options.recorded import RecordedProbe
from accelbench.probes import Feature
from accelbench.probes.cells import Cell, References, device_probe, probe_device
from accelbench.results import DeviceProbe, ProbeCell, RunRecord
from accelbench.workloads.userfile import run_user_file


@dataclass(frozen=True)
class ProbeSettings:
    """What a probe worker runs: the features (by name) on one device (by name), the user's
    feature files to find their features again, and whether to show tracebacks."""

    device: str
    features: list[str]
    feature_files: list[str]
    debug: bool


class ProbeWork(CaseWork[Device]):
    worker = "accelbench.probes.work:probe_from_spec"

    def __init__(self, features: Sequence[Feature], cpu: Device, feature_files: Sequence[str] = (),
                 debug: bool = False) -> None:
        self.features, self.cpu, self.echo = list(features), cpu, debug
        self.feature_files = [str(Path(path).resolve()) for path in feature_files]
        self.references = References()  # inline, each reference is computed once for all devices

    def label(self, device: Device) -> str:
        return f"probe {device.name}"

    def skeleton(self, device: Device) -> DeviceProbe:  # type: ignore[override]  # not a CaseResult
        return device_probe(device, {})

    def interrupted(self, device: Device, error: str) -> None:
        return None  # a device's cells are kept only when its probing ended

    def collection(self, record: RunRecord) -> list[DeviceProbe]:
        return record.probes

    def inline(  # type: ignore[override]  # a probe's result is a DeviceProbe, not a CaseResult
            self, device: Device, progress: Progress | None) -> DeviceProbe:
        return device_probe(device, probe_on(device, self.features, self.cpu, progress,
                                             self.references, self._traceback_shower(device)))

    def spec(self, device: Device, features: Sequence[Feature] | None = None) -> CaseSpec:
        return CaseSpec(self.worker, settings=ProbeSettings(
            device.name, [f.name for f in features or self.features], self.feature_files,
            self.echo))

    def first_spec(self, device: Device) -> CaseSpec | None:
        """The features that apply to ``device``, for its first worker (none: no worker)."""
        applying = [f for f in self.features if f.applies_to(device.kind)]
        return self.spec(device, applying) if applying else None

    def resume(self, spec: CaseSpec, left: dict[str, Any] | None,
               ended: tuple[str, str] | None) -> tuple[DeviceProbe, CaseSpec | None]:
        """The cells a worker finished of ``spec``'s features; where it ended early, the
        feature it was in (the first it did not finish) gets its status, and the features after
        it are what remains."""
        settings = spec.settings_as(ProbeSettings)
        part = DeviceProbe.from_dict(left) if left is not None else DeviceProbe(settings.device)
        if ended is None:
            return part, None
        rest = [name for name in settings.features if name not in part.cells]
        if not rest:
            return part, None
        part.cells[rest[0]] = ProbeCell(*ended)
        after = replace(settings, features=rest[1:])
        return part, replace(spec, settings=after) if after.features else None

    def joined(self, device: Device, parts: list[DeviceProbe]) -> DeviceProbe:
        cells = {name: cell for part in parts for name, cell in part.cells.items()}
        return replace(device_probe(device, {}),
                       cells={f.name: cells[f.name] for f in self.features if f.name in cells})

    def _traceback_shower(self, device: Device) -> Callable[[str, Cell], None] | None:
        if not self.echo:
            return None

        def show(name: str, cell: Cell) -> None:
            if cell.traceback:
                sys.stderr.write(f"{name} on {device.name}:\n{cell.traceback}\n")
        return show


def load_feature_file(path: Path) -> list[str]:
    """Execute ``path`` and return the names of the features it registered (register_feature)."""
    from accelbench.probes import user_features
    from accelbench.probes.features import all_features

    before = {feature.name for feature in user_features()}
    run_user_file(Path(path), "feature file")
    added = [feature.name for feature in user_features() if feature.name not in before]
    if not added:
        raise UsageError(f"feature file {path} registers no feature; call "
                         "accelbench.probes.register_feature(Feature(...)) in it")
    names = [feature.name for feature in all_features()]
    taken = next((name for name in added if names.count(name) > 1), None)
    if taken:
        raise UsageError(f"feature file {path}: feature {taken!r} is already a feature of "
                         "accelbench probe; give it another name")
    return added


def probe_from_spec(worker_spec: CaseSpec, report: Report) -> DeviceProbe:
    """The worker's side of ProbeWork: the cells so far go to the parent after every feature."""
    from accelbench.probes.features import all_features

    spec = worker_spec.settings_as(ProbeSettings)
    for path in spec.feature_files:
        load_feature_file(Path(path))
    devices = DeviceSet.current()
    device, cpu = devices.select(spec.device)[0], devices.select("cpu")[0]
    known = {feature.name: feature for feature in all_features()}
    features = [known[name] for name in spec.features]
    work = ProbeWork(features, cpu, debug=spec.debug)
    done: dict[str, Cell] = {}
    shower = work._traceback_shower(device)

    def on_cell(name: str, cell: Cell) -> None:
        done[name] = cell
        report.partial(device_probe(device, done))
        if shower is not None:
            shower(name, cell)

    return device_probe(device, probe_on(device, features, cpu, report.progress, work.references,
                                         on_cell))


def probe_on(device: Device, features: Sequence[Feature], cpu: Device, progress: Progress | None,
             references: References, on_cell: Callable[[str, Cell], None] | None) -> dict[str, Cell]:
    """The features on ``device`` made current for them, the previous device current again after:
    work that names no device (a timing event's record, a stream) goes to the current one, and
    an inline probe of cuda:1 must not leave cuda:1 current for whatever runs next."""
    with device.current():
        return probe_device(device, list(features), cpu, progress, references, on_cell)


def probe_record(devices: DeviceSet, chosen: list[Device], features: list[Feature],
                 command: list[str], options: RecordedProbe,
                 progress: ItemProgress | None = None,
                 on_case: Callable[[RunRecord], None] | None = None, *,
                 isolation: str = "none", timeout: float = DEFAULT_CASE_TIMEOUT_S,
                 feature_files: Sequence[str] = (), debug: bool = False, live: bool = False
                 ) -> RunRecord:
    """Probe every chosen device through the driver, each in a worker process with
    ``isolation="process"`` (which finds a user's features again in ``feature_files``); the CPU,
    always available, serves as the timing reference. SIGINT and SIGTERM raise ``Interrupted``
    carrying the devices probed so far; ``live`` shows the progress display."""
    record = RunRecord(
        run_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        accelbench_version=__version__, command=command, options=options,
        environment=collect_environment(devices), kind="probe",
    )
    work = ProbeWork(features, devices.select("cpu")[0], feature_files, debug)
    launch = LaunchPlan(isolation, timeout, debug, resume=True)
    return drive(work, chosen, record, launch=launch, progress=progress, on_case=on_case, live=live)
