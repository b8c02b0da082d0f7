"""Inter-token latency with and without reading each token to the host (issue 26, item 19): on
CUDA and XPU the unstreamed figure is the device's cadence (no token read until the round ends),
optimistic against a loop that reads each token as generate() and a streaming server do;
``--stream`` reads each token as it is made, and the figures say which was measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fakes import FakeAsyncAdapter, HostSyncCounter

from accelbench.devices import Device, DeviceSet
from accelbench.measure.generation import rounds as gen
from accelbench.results import RunRecord
from accelbench.workloads import get_workload_class
from accelbench.workloads.builtin.decoder import Decoder
from accelbench.workloads.builtin.language_model import DecoderLM

#: Decoder steps are small: torch's two intra-op threads would wait on each other (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny() -> tuple[DecoderLM, Decoder]:
    workload = get_workload_class("nanogpt-char")("tiny")
    assert isinstance(workload, DecoderLM)
    torch.manual_seed(0)
    model = workload.build_model()
    assert isinstance(model, Decoder)
    return workload, model.eval()


class CudaLike(FakeAsyncAdapter):
    """Timing events safe per step, as CUDA's; each one made is counted."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def timing_event(self, index: int):
        self.events += 1

        class Event:
            def record(self) -> None:
                return None

            def elapsed_time(self, end: object) -> float:
                return 1.0

        return Event()


def test_unstreamed_events_are_named_the_devices_cadence() -> None:
    """Item 19: the events' inter-token latency reads no token per step: the method says so."""
    workload, model = tiny()
    figures = gen.measure_generation(workload, model, Device(CudaLike(), "fake"), prompt_len=4,
                                     new_tokens=5, rounds=1, warmup_rounds=0)
    assert figures.timing_method == gen.EVENTS and not figures.streamed
    assert "device's cadence" in figures.timing_method and "optimistic" in figures.timing_method
    assert "--stream" in figures.timing_method


def test_a_streamed_round_reads_every_token_and_times_it_on_the_host() -> None:
    """Item 19: --stream reads each token to the host as it is made (the first one inside the
    time to first token), on a device with per-step events too; no event is made, the host
    clock times each step with its read, and the figures say streamed."""
    workload, model = tiny()
    adapter = CudaLike()
    new, rounds = 6, 2
    with HostSyncCounter() as reads:
        figures = gen.measure_generation(workload, model, Device(adapter, "fake"), prompt_len=4,
                                         new_tokens=new, rounds=rounds, warmup_rounds=1, stream=True)
    assert figures.timing_method == gen.STREAMED and figures.streamed
    assert adapter.events == 0
    assert reads.count >= (rounds + 1) * new  # every token of every round, warm-up included
    assert all(len(r.token_times_s) == new - 1 for r in figures.rounds)
    assert figures.itl_median_s is not None and figures.itl_p99_s is not None
    assert gen.GenerationFigures.from_dict(figures.to_dict()).streamed
    assert gen.GenerationFigures.from_dict({**figures.to_dict(), "streamed": None}).streamed is False


def test_on_the_slow_sync_personality_a_streamed_token_holds_its_read(personality) -> None:
    """A read to the host costs 5 ms there: every streamed inter-token time holds one, which the
    device's cadence leaves out."""
    workload, model = tiny()
    with personality("slow-sync"):
        device = DeviceSet.current().select("cuda:0")[0]
        on_device = model.to(device.torch_device)
        streamed = gen.measure_generation(workload, on_device, device, prompt_len=4, new_tokens=4,
                                          rounds=1, warmup_rounds=0, stream=True)
        cadence = gen.measure_generation(workload, on_device, device, prompt_len=4, new_tokens=4,
                                         rounds=1, warmup_rounds=0)
    assert streamed.timing_method == gen.STREAMED and cadence.timing_method == gen.EVENTS
    assert min(streamed.rounds[0].token_times_s) >= 0.005
    assert streamed.ttft_s >= 0.005


def test_run_stream_end_to_end_in_a_worker(cli, tmp_path: Path) -> None:
    """``run --mode generate --stream`` reaches the worker process; the result and the table say
    the case was streamed."""
    out = tmp_path / "stream.json"
    done = cli("run", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode", "generate",
               "--prompt-len", "8", "--new-tokens", "5", "--steps", "2", "--stream", "--quiet",
               "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["generation"]["streamed"] is True
    assert case["generation"]["timing_method"] == gen.STREAMED
    assert "streamed" in done.stdout
    from accelbench.render.generation_table import generation_rows

    (row,) = generation_rows(RunRecord.from_dict(json.loads(out.read_text())))
    assert row[0].endswith("streamed")


@pytest.mark.parametrize("command", [("run", "mnist"), ("sweep", "mnist", "--batch-size", "2,4")])
def test_stream_without_a_generation_case_is_one_line(inline_cli, command: tuple[str, ...]) -> None:
    done = inline_cli(*command, "--size", "tiny", "--device", "cpu", "--mode", "train", "--stream")
    assert done.returncode == 2, done.stderr
    assert "--stream" in done.stderr and "--mode generate" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
