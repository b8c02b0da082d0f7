"""Typed, versioned result records: what a run measured, and its JSON form.

The shape of a record (``RunRecord.to_dict()``, schema version ``SCHEMA_VERSION``)::

    RunRecord   schema_version, kind (run | check | probe | scale | sweep), run_id, created_at,
                accelbench_version, command, options, environment,
                cases:  [CaseResult]     every kind but probe
                probes: [DeviceProbe]    probe runs only: device, device_name, threads,
                                         cells {feature: ProbeCell(status, detail, ratio, seconds)}
    CaseResult  the case's identity (its CaseKey: workload, mode, precision, compile, size ...;
                and its device),
                status and error, raw samples (step_times, epoch_times), timing figures, and
                typed figures, each None where the case has none:
                  parity  Parity        check: verdict, loss curves, tolerance, first bad step
                  energy  Energy        joules and per-step/epoch figures, or the reason for none
                  flops   Flops         achieved FLOP/s and the peak it is held against
                  sensors Sensors       clocks and temperatures at the start and end
                  scale   ScaleFigures  scale: world size, throughputs, efficiency, ranks
                repeats: [ProcessRun], one per --repeat process (its samples and figures)
                  profile Profile       --profile: figures and ceilings, or the error
                plus backend_flags, memory_is_lower_bound, oom_batch_sizes, nonfinite_step,
                traceback, stderr_tail, isolation and skipped; and ``derived`` statistics in the
                file (written for readers, recomputed on load).

Loading checks every field against its annotation (results/validate.py) and upgrades older
versions first (results/schema.py, which keeps the format history).
"""

from accelbench.measure.trackers.profile_figures import Ceilings, Profile, ProfileFigures
from accelbench.results.case_key import CaseKey
from accelbench.results.figures import (
    PARITY_VERDICTS,
    Energy,
    Flops,
    Parity,
    ParityTolerance,
    ProcessRun,
    ScaleFigures,
    ScaleRank,
    SensorReading,
    Sensors,
)
from accelbench.results.probe import PROBE_STATUSES, DeviceProbe, ProbeCell
from accelbench.results.records import INPUT_BOUND_FRACTION, STATUSES, CaseResult, RunRecord, rate_unit
from accelbench.results.schema import SCHEMA_VERSION

__all__ = [
    "INPUT_BOUND_FRACTION", "PARITY_VERDICTS", "PROBE_STATUSES", "SCHEMA_VERSION", "STATUSES",
    "CaseKey", "CaseResult", "Ceilings", "DeviceProbe", "Energy", "Flops", "Parity", "ParityTolerance",
    "ProbeCell", "ProcessRun", "Profile", "ProfileFigures", "RunRecord", "ScaleFigures", "ScaleRank",
    "SensorReading", "Sensors", "rate_unit",
]
