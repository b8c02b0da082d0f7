"""A record's options (options/recorded.py) are the kind's typed options, written as the flat
object result files have always held (issue 35): each kind's round trip through a real file gives
the same options back and the same keys, values and order as the hand-built dicts of before;
older files still load, an option key no field holds is counted, and no reader in src/ reads a
record's options by string key."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.measure.loop.stop import StopRule
from accelbench.options import RunOptions
from accelbench.options.recorded import (
    Recorded,
    RecordedCheck,
    RecordedProbe,
    RecordedRun,
    RecordedScale,
    RecordedSweep,
    SweepPlan,
)
from accelbench.options.scale import Rendezvous, ScaleOptions
from accelbench.results import RunRecord
from accelbench.store.jsonfile import load_record, save_record
from accelbench.sweeps.analysis import SATURATION_FRACTION

SRC = Path(__file__).resolve().parents[2] / "src" / "accelbench"
V1 = Path(__file__).resolve().parents[1] / "data" / "v1"

RUN = RunOptions(workloads=("mnist", "vae"), modes=("train", "eval"), size="tiny",
                 stop=StopRule("steps", 3), warmup_steps=1, precisions=("fp32", "bf16"),
                 workload_files=("/tmp/mine.py",), seed=7)
SCALE = ScaleOptions.of("mnist", (1, 2), size="tiny", stop=StopRule("steps", 3),
                        rendezvous=Rendezvous(2, 0, "host:29500"))
BATCH_SWEEP = {"batch_sizes": [2, 4], "saturation_fraction": SATURATION_FRACTION}


def _through_file(tmp_path: Path, kind: str, options: Recorded) -> tuple[RunRecord, dict[str, Any]]:
    record = RunRecord(run_id="r1", created_at="2026-01-01T00:00:00+00:00", accelbench_version="0",
                       command=["accelbench", kind], options=options, kind=kind)
    path = save_record(record, tmp_path / f"{kind}.json")
    return load_record(path), json.loads(path.read_text())["options"]


# Each kind's options as its writer built the dict by hand before they were typed.
KINDS = [
    ("run", RecordedRun(RUN), RUN.to_dict()),
    ("bench", RecordedRun(RUN, bench_isolation="inline: a lambda"),
     {**RUN.to_dict(), "bench_isolation": "inline: a lambda"}),
    ("check", RecordedCheck(RUN, reference="cpu", check_steps=7),
     {**RUN.to_dict(), "reference": "cpu", "check_steps": 7}),
    ("sweep", RecordedSweep(RUN, sweep=SweepPlan((2, 4), SATURATION_FRACTION)),
     {**RUN.to_dict(), "sweep": BATCH_SWEEP}),
    ("sweep-prompt", RecordedSweep(RUN, sweep=SweepPlan(axis="prompt_len", prompt_lens=(8, 16))),
     {**RUN.to_dict(), "sweep": {"axis": "prompt_len", "prompt_lens": [8, 16]}}),
    # bench() marks its record after the sweep wrote its plan.
    ("bench-sweep", RecordedSweep(RUN, bench_isolation="process",
                                  sweep=SweepPlan((2, 4), SATURATION_FRACTION)),
     {**RUN.to_dict(), "sweep": BATCH_SWEEP, "bench_isolation": "process"}),
    ("scale", RecordedScale(SCALE.run, scale=SCALE),
     {**SCALE.run.to_dict(), "scale": SCALE.to_dict()}),
    ("probe", RecordedProbe("cpu", ("fft", "conv2d"), True, "process"),
     {"device": "cpu", "features": ["fft", "conv2d"], "skip_compile": True, "isolation": "process"}),
]


@pytest.mark.parametrize(("name", "options", "before"), KINDS, ids=[k[0] for k in KINDS])
def test_each_kind_round_trips_with_the_file_unchanged(tmp_path: Path, name: str, options: Recorded,
                                                       before: dict[str, Any]) -> None:
    kind = {"bench": "run", "sweep-prompt": "sweep", "bench-sweep": "sweep"}.get(name, name)
    loaded, stored = _through_file(tmp_path, kind, options)
    assert list(stored.items()) == list(json.loads(json.dumps(before)).items())  # keys in order
    assert loaded.options == options and type(loaded.options) is type(options)
    assert loaded.unknown_keys == []


def test_a_record_that_kept_no_options_writes_and_reads_none(tmp_path: Path) -> None:
    loaded, stored = _through_file(tmp_path, "run", Recorded())
    assert stored == {} and type(loaded.options) is Recorded and loaded.options.run_options() is None


def test_version_1_files_load_as_their_kind(tmp_path: Path) -> None:
    kinds = {"run": RecordedRun, "check": RecordedCheck, "scale": RecordedScale,
             "probe": RecordedProbe}
    for kind, cls in kinds.items():
        record = load_record(V1 / f"{kind}.json")
        assert type(record.options) is cls and record.unknown_keys == []
    check = load_record(V1 / "check.json").options
    assert isinstance(check, RecordedCheck) and (check.reference, check.check_steps) == ("cpu-fp64", 3)
    assert check.run.precisions == ("fp32", "bf16") and check.run.stop == StopRule("steps", 3)
    # Version 1's scale section held the rank's options flat beside the process counts.
    scale = load_record(V1 / "scale.json").options
    assert isinstance(scale, RecordedScale) and scale.scale is not None
    assert scale.scale.workload == "mnist" and scale.scale.nproc == (1, 2)
    assert scale.scale.timeout == 600.0 and scale.scale.run.stop == StopRule("steps", 3)
    probe = load_record(V1 / "probe.json").options
    assert probe == RecordedProbe("cpu", ("fft",), False, None)


def test_an_unknown_option_key_is_skipped_and_counted(tmp_path: Path) -> None:
    data = json.loads((V1 / "check.json").read_text())
    data["options"]["from_the_future"] = True
    data["options"]["stop"]["jitter"] = 0.1
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(data))
    record = load_record(path)
    assert isinstance(record.options, RecordedCheck) and record.options.check_steps == 3
    assert record.unknown_keys == ["options.stop.jitter", "options.from_the_future"]


def test_a_value_no_longer_accepted_still_loads(tmp_path: Path) -> None:
    """A record says what ran: the options' own checks are not run on reading (another machine's
    data folder, a precision since renamed), the annotations still are."""
    data = json.loads((V1 / "run.json").read_text())
    data["options"].update(data="real", data_dir="/elsewhere/imagenet", precisions=["fp99"])
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    run = load_record(path).options.run_options()
    assert run is not None and run.data_dir == Path("/elsewhere/imagenet") and run.precisions == ("fp99",)
    data["options"]["seed"] = "seven"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="options.seed"):
        load_record(path)


def test_no_reader_reads_a_records_options_by_key() -> None:
    pattern = re.compile(r"\.options\s*\[|\.options\.get\(")
    found = [f"{path.relative_to(SRC)}:{number}"
             for path in sorted(SRC.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
