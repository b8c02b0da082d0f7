"""No device timing event is created (its first ``record()``) inside a timed window: the device
check's event-creation trace (issue 34; first run as docs/hardware/2026-11-27-h100-issue-34-
peaks-events/event_trace.py).

``torch.Event`` is replaced by a wrapper around a real one that logs the frames of each record()
and of each event's first (where torch creates the CUDA event); a tiny generation (3 rounds of 16
tokens) and 30 steps of the timed loop then run on ``--device``. It prints the versions first
(Python, the host CPU, torch, CUDA, cuDNN, the device's properties). Exit code 1 if an event was
created inside a decode step or an input fetch, or if the device times with events and none was
recorded there at all; 0 on a device without timing events (the CPU: host clock, nothing to
create), where the same work runs and the counts are printed.

    python scripts/event_trace.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import traceback
from typing import Any

import torch

created: list[list[str]] = []
records: list[list[str]] = []
_real_event = torch.Event


def frames() -> list[str]:
    return [f"{f.filename.split('src/')[-1]}:{f.lineno} in {f.name}"
            for f in traceback.extract_stack()[:-2] if "accelbench" in f.filename]


class Traced:
    """A real torch.Event whose first record() (where torch creates the device's event) is
    logged. A wrapper, not a subclass: ``elapsed_time`` of a subclass refuses a plain event."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.event, self.recorded = _real_event(*args, **kwargs), 0

    def record(self, *args: Any) -> None:
        where = frames()
        if not self.recorded:
            created.append(where)
        records.append(where)
        self.recorded += 1
        self.event.record(*args)

    def __getattr__(self, name: str) -> Any:  # the rest (query, synchronize): the real event's
        return getattr(self.event, name)

    def elapsed_time(self, other: Any) -> float:
        return self.event.elapsed_time(other.event if isinstance(other, Traced) else other)


torch.Event = Traced  # type: ignore[misc,assignment]

import accelbench.devices.events as ev  # noqa: E402 - after the replacement, as accelbench sees it
from accelbench.devices import DeviceSet  # noqa: E402
from accelbench.measure.generation import rounds as gen  # noqa: E402
from accelbench.measure.loop.step_loop import StepLoop  # noqa: E402
from accelbench.options import StopRule  # noqa: E402
from accelbench.workloads.catalogue import get_workload_class  # noqa: E402


def in_window(where: list[str]) -> bool:
    """Called from a decode step's record or an input fetch's (inside a timed window)."""
    return any(frame.endswith(" in step") and "generation_clocks" in frame or " in _event" in frame
               for frame in where[-3:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0", help="accelbench's device name")
    args = parser.parse_args()
    # The versions first (the device check's log opens with them): a step of their own would
    # cost another start of torch and of the device.
    from accelbench.devices.cpuinfo import cpu_model

    print(sys.version)
    print("host CPU", cpu_model(), platform.machine())
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
    print(torch.cuda.get_device_properties(0) if torch.cuda.is_available() else "no cuda")
    device = DeviceSet.current().select(args.device)[0]
    factory = ev.timing_event_factory(device)
    print("device:", device.name, "timing events:", "yes" if factory else "none (host clock)")
    if factory is not None:
        print("re-recorded event reads its new record:", ev.reads_a_new_record(device, factory))
    # A tiny decoder whose greedy tokens vary (its matrices widened, as tests/measure's tiny()).
    workload = get_workload_class("nanogpt-char")("tiny")
    torch.manual_seed(0)
    model = workload.build_model()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, 0.5)
    model = model.eval().to(device.torch_device)
    figures = gen.measure_generation(workload, model, device, prompt_len=8, new_tokens=16, rounds=3,
                                     warmup_rounds=1)
    batch = torch.zeros(2, 8, dtype=torch.long, device=device.torch_device)
    measured = StepLoop(lambda b: model(batch)[0].sum(), [(batch,)] * 200, device).run(
        StopRule("steps", 30), warmup_steps=2)
    inside = [where for where in created if in_window(where)]
    windowed = sum(map(in_window, records))
    print(json.dumps({"timing_method": figures.timing_method,
                      "input_wait_method": measured.input_wait_method,
                      "events_created": len(created), "records": len(records),
                      "records_in_windows": windowed, "created_in_windows": len(inside),
                      "examples": inside[:3]}, indent=1))
    if factory is None:
        print("no timing events on this device: nothing to create in a window")
        return 0
    print("events created inside timed windows:", len(inside), "(want 0); records there:", windowed)
    return 1 if inside or not windowed else 0


if __name__ == "__main__":
    sys.exit(main())
