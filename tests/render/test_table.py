"""The end-of-run table fits a 100-column terminal with the essentials; --wide has the rest."""

from __future__ import annotations

from conftest_report import case, record
from rich.console import Console

from accelbench.cli import main
from accelbench.render.table import COLUMNS, ESSENTIAL_COLUMNS, WIDE_COLUMNS, diagnosis_lines, run_table
from accelbench.results import Ceilings, Profile, ProfileFigures, RunRecord

PROFILE = Profile(ProfileFigures(steps=5, source="device", step_s=4.3e-4, busy_fraction=0.2,
                                 kernels_per_step=20, median_kernel_s=4e-6,
                                 top_ops=[("gemv2T_kernel_val", 4e-5)], allocated_bytes_per_step=2e6,
                                 parameter_bytes=1000),
                  Ceilings(launch_latency_s=4e-6))


def _widest_record() -> RunRecord:
    """The longest cells a quick-suite run on a machine with a GPU produces."""
    noisy = [0.05, 0.05, 0.09, 0.05, 0.11, 0.05, 0.05, 0.08, 0.05, 0.12]
    return record("r1", [
        case(workload="transformer-small", median=0.43, batch_size=64, dataset_size=67349,
             stop_reason="precision reached", target_ci_pct=2.0),
        case(workload="transformer-small", device="cuda:0", median=0.0031, batch_size=64,
             dataset_size=67349, precision="amp-bf16", compile_backend="inductor", channels_last=True,
             data="synthetic-device", profile=PROFILE),
        case(workload="vae", mode="eval", device="cuda:0", median=0.000233, batch_size=128,
             step_times=noisy, input_wait_s=0.5, measured_time_s=1.0, memory_source="lower bound",
             peak_memory_bytes=3 * 2**30),
        case(workload="simclr-resnet18", device="mps:0", batch_size=1000, status="oom", step_times=[],
             error="RuntimeError: MPS backend out of memory (MPS allocated: 17.2 GB, other "
                   "allocations: 1.3 GB, max allowed: 18.1 GB). Tried to allocate 2.0 GB"),
        case(workload="mnist", median=52.0, batch_size=64, size="tiny", data="real"),
        case(workload="vae", median=0.05, batch_size=128),
        case(workload="vae", device="cuda:0", median=0.004, batch_size=128),
    ])


def _render(table_record: RunRecord, width: int, wide: bool = False) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(run_table(table_record, wide))
    return console.export_text()


def test_the_table_fits_100_columns_without_truncating_a_cell() -> None:
    text = _render(_widest_record(), 100)
    assert "…" not in text and "..." not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 100
    for column in ("workload", "mode", "device", "config", "batch", "samples/s", "epoch", "vs CPU"):
        assert column in text
    for cell in ("transformer-small", "simclr-resnet18", "amp-bf16", "compile:inductor",
                 "channels-last", "data:synthetic-device", "data:real", "tiny", "cuda:0", "mps:0", "oom",
                 "149 ±", "proj.", "launch-bound", "input-bound", "noisy", "RuntimeError:"):
        assert cell in text, cell


def test_vs_cpu_comes_from_the_comparison_rule() -> None:
    text = _render(_widest_record(), 100)
    # vae train: 50 ms on the CPU vs 4 ms on cuda:0, one process a side: "can't tell" by the rule
    # of compare, so the ratio carries a "?"; the transformer on cuda:0 differs in precision,
    # compile and data from the CPU case, so it has no vs-CPU figure at all.
    assert "12.50x?" in text and text.count("x?") == 1


def test_the_wide_table_has_every_column_uncut() -> None:
    text = _render(_widest_record(), 400, wide=True)  # --wide is for wide terminals
    assert "…" not in text
    for column, _ in WIDE_COLUMNS:
        assert column in text
    assert "≥ 3.0 GiB" in text  # a lower-bound memory figure says so
    assert "20% busy, 20/step" in text and "50%" in text  # profile and input wait
    assert "precision reached (median ±" in text  # adaptive stopping says what it reached
    assert set(ESSENTIAL_COLUMNS) <= set(COLUMNS)


def test_diagnosis_lines_go_under_the_table() -> None:
    lines = diagnosis_lines(_widest_record())
    assert len(lines) == 1
    assert lines[0].startswith("launch-bound transformer-small train cuda:0: device busy 20%")
    assert "top: gemv2T_kernel_val 40 µs/step" in lines[0]


def test_run_wide_flag_prints_the_wide_table(capsys, tmp_path) -> None:
    out = tmp_path / "r.json"
    assert main(["run", "mnist", "--size", "tiny", "--steps", "2", "--warmup", "0", "--mode", "eval",
                 "--device", "cpu", "--isolation", "none", "--quiet", "--wide", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    # headers may wrap at the 160 columns of a pipe; "profile" is empty (not profiled): left out
    for header_word in ("samples/s", "IQR/med", "GFLOP/s", "repeats", "stop"):
        assert header_word in printed
    assert "…" not in printed


def test_a_failed_profile_is_said_not_diagnosed() -> None:
    # A malformed stored profile never gets this far: loading the file refuses it
    # (test_diagnosis, test_results_schema).
    failed = record("r2", [case(profile=Profile(error="RuntimeError: profiler busy"))])
    assert diagnosis_lines(failed) == ["profile mnist train cpu: RuntimeError: profiler busy"]
    assert "failed" in _render(failed, 200, wide=True)


def test_a_lower_bound_recorded_by_the_runner_is_marked() -> None:
    """The runner records the bound in memory_is_lower_bound (MPS without a peak counter),
    whatever the memory source's wording."""
    from accelbench.render.table import memory_cell
    from accelbench.results import CaseResult

    case = CaseResult(workload="w", mode="train", device="mps:0", batch_size=1,
                      peak_memory_bytes=2**30, memory_source="MPS allocator, sampled",
                      memory_is_lower_bound=True)
    assert memory_cell(case) == "≥ 1.0 GiB sampled"
    case.memory_source, case.memory_is_lower_bound = "MPS allocator peak", False
    assert memory_cell(case) == "1.0 GiB allocator"


def _adapters() -> list[tuple[object, str]]:
    """Every device adapter, in the state the runner reads its memory source in, and its tag."""
    from fakes import MAC_FACTS_ARM, fake_cuda_torch, fake_torch

    from accelbench.devices.cpu import CpuAdapter
    from accelbench.devices.cuda import CudaAdapter
    from accelbench.devices.generic import GenericAcceleratorAdapter
    from accelbench.devices.mps import MpsAdapter
    from accelbench.devices.xpu import XpuAdapter

    counted, sampled = (MpsAdapter(fake_torch(), MAC_FACTS_ARM) for _ in range(2))
    counted._counted, sampled._counted = True, False  # what peak_memory_bytes() found out
    unread = MpsAdapter(fake_torch(), MAC_FACTS_ARM)
    generic = GenericAcceleratorAdapter("privateuseone", fake_torch())
    return [(CpuAdapter(), "RSS"), (CudaAdapter(fake_cuda_torch(1)), "allocator"),
            (XpuAdapter(fake_torch()), "allocator"), (generic, "allocator"),
            (counted, "allocator"), (sampled, "sampled"), (unread, "sampled")]


def test_each_devices_memory_source_gets_its_tag() -> None:
    """The tag (issue 19): the CPU's whole-process peak RSS and an accelerator allocator's peak of
    live tensors are different quantities, so the column says which each row is."""
    from accelbench.render.table import memory_cell, memory_tag
    from accelbench.results import CaseResult

    for adapter, tag in _adapters():
        case = CaseResult(workload="w", mode="train", device="x", batch_size=1, peak_memory_bytes=2**30,
                          memory_source=adapter.memory_source,
                          memory_is_lower_bound=adapter.memory_is_lower_bound)
        assert memory_tag(case) == tag, adapter.memory_source
        assert memory_cell(case).endswith(f"GiB {tag}")
    old = CaseResult(workload="w", mode="train", device="cpu", batch_size=1, peak_memory_bytes=2**30)
    assert memory_cell(old) == "1.0 GiB"  # a result that recorded no source gets no tag


def test_the_wide_table_tags_every_rows_memory_with_its_devices_source() -> None:
    rows = record("r3", [
        case(workload="mnist", peak_memory_bytes=900 * 2**20, memory_source="process peak RSS"),
        case(workload="vae", device="cuda:0", peak_memory_bytes=3 * 2**30,
             memory_source="CUDA caching allocator peak (torch.cuda.max_memory_allocated: live tensors)"),
        case(workload="bert", device="mps:0", peak_memory_bytes=2**30, memory_is_lower_bound=True,
             memory_source="MPS live tensors sampled at step boundaries (a lower bound)"),
    ])
    text = _render(rows, 300, wide=True)
    lines = {name: next(line for line in text.splitlines() if line.lstrip().startswith(name))
             for name in ("mnist", "vae", "bert")}
    assert "900.0 MiB RSS" in lines["mnist"]
    assert "3.0 GiB allocator" in lines["vae"]
    assert "≥ 1.0 GiB sampled" in lines["bert"]
    # The 100-column table has no memory column; with the tags it still fits, uncut.
    narrow = _render(rows, 100)
    assert "…" not in narrow and max(len(line.rstrip()) for line in narrow.splitlines()) <= 100


def test_an_upper_bound_input_wait_is_marked_and_never_called_input_bound() -> None:
    """On MPS the input wait is the host's fetch time, an upper bound (measure/loop/input_wait.py): the
    column marks it "≤" as lower-bound memory is marked "≥", and the notes give the bound, not
    the input-bound verdict."""
    from fakes import FakeAsyncAdapter

    from accelbench.devices import Device
    from accelbench.measure.loop.input_wait import InputWait
    from accelbench.render.table import input_cell, notes_cell

    adapter = FakeAsyncAdapter()
    adapter.step_events_safe = False  # as MPS says
    method = InputWait(Device(adapter, "mps")).method
    mps = case(device="mps:0", median=0.01, input_wait_s=0.5, measured_time_s=1.0,
               input_wait_method=method)
    cpu = case(median=0.01, input_wait_s=0.5, measured_time_s=1.0,
               input_wait_method="host fetch time (synchronous device)")
    assert input_cell(mps) == "≤ 50%" and input_cell(cpu) == "50%"
    assert "input-bound" not in notes_cell(mps) and "input wait ≤ 50%" in notes_cell(mps)
    assert "input-bound" in notes_cell(cpu)
    small = case(device="mps:0", median=0.01, input_wait_s=0.1, measured_time_s=1.0,
                 input_wait_method=method)
    assert notes_cell(small) == "" and input_cell(small) == "≤ 10%"
    text = _render(record("r4", [mps, cpu]), 300, wide=True)
    mps_line = next(line for line in text.splitlines() if "mps:0" in line)
    assert "≤ 50%" in mps_line and "input-bound" not in mps_line
