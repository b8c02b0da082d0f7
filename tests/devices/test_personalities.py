"""The hardware personalities themselves (tests/personalities): each fails the way its device
does, at the dispatch level (backward and compiled code included), in this process and in every
process a command starts. The commands run under them end to end in test_personality_commands.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings

import pytest
import torch
import torch.nn.functional as F
from accelbench_personalities import journal as journal_module
from accelbench_personalities.mps import MPS_FLOAT64_ERROR as PERSONALITY_FLOAT64_ERROR
from accelbench_personalities.tf32 import round_to_tf32
from fakes import MPS_FLOAT64_ERROR

from accelbench.devices import DeviceSet


def _inputs(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- Ampere: TF32 where the flags allow it, read at each op ------------------------------------
def test_ampere_products_are_fp32_until_the_matmul_precision_allows_tf32(personality) -> None:
    a, b = _inputs(64, 64, seed=1), _inputs(64, 64, seed=2)
    exact = a @ b
    tf32 = round_to_tf32(a) @ round_to_tf32(b)
    with personality("ampere") as journal:
        da, db = a.to("cuda"), b.to("cuda")
        assert (da.device.type, da.is_cuda) == ("cuda", True)
        assert torch.equal((da @ db).cpu(), exact)  # torch's default: "highest"
        torch.set_float32_matmul_precision("high")
        product = (da @ db).cpu()
        assert not torch.equal(product, exact)
        assert torch.equal(product, tf32)
        assert torch.equal(F.linear(da, db).cpu(), round_to_tf32(a) @ round_to_tf32(b).T)
        torch.backends.cuda.matmul.allow_tf32 = False  # the legacy switch, read at call time
        assert torch.equal((da @ db).cpu(), exact)
    assert [entry["op"] for entry in journal.rounded()] == ["aten.mm.default", "aten.mm.default"]


def test_ampere_convolutions_round_by_default_forward_and_backward(personality) -> None:
    """cuDNN's TF32 switch is on by default: an fp32 convolution is TF32 unless it is turned off,
    through the legacy switch or the newer per-op fp32_precision."""
    x, w = _inputs(2, 4, 9, 9, seed=3), _inputs(8, 4, 3, 3, seed=4)

    def conv(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = w.detach().requires_grad_()
        out = F.conv2d(x, w)
        out.square().sum().backward()
        return out.detach().cpu(), w.grad.cpu()

    exact_out, exact_grad = conv(x, w)
    with personality("ampere") as journal:
        out, grad = conv(x.to("cuda"), w.to("cuda"))
        assert not torch.equal(out, exact_out)
        assert torch.equal(out, F.conv2d(round_to_tf32(x), round_to_tf32(w)))
        assert not torch.equal(grad, exact_grad)  # convolution_backward is cuDNN too
        torch.backends.cudnn.allow_tf32 = False
        out, grad = conv(x.to("cuda"), w.to("cuda"))
        assert torch.equal(out, exact_out) and torch.equal(grad, exact_grad)
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.conv.fp32_precision = "ieee"  # the new API, convolutions only
        assert torch.equal(conv(x.to("cuda"), w.to("cuda"))[0], exact_out)
    ops = {entry["op"] for entry in journal.rounded()}
    assert ops == {"aten.convolution.default", "aten.convolution_backward.default"}
    assert all(entry["flags"]["cuda.matmul"] != "tf32" for entry in journal.rounded())


def test_ampere_refuses_mixed_legacy_and_new_matmul_flags_as_cublas_does(personality) -> None:
    a = _inputs(8, 8)
    with personality("ampere"):
        da = a.to("cuda")
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # the legacy precision still "highest"
        with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
            da @ da


def test_ampere_rounds_compiled_code(personality) -> None:
    a, b = _inputs(32, 32, seed=5), _inputs(32, 32, seed=6)
    with personality("ampere") as journal:
        compiled = torch.compile(lambda x, y: (x @ y).relu())
        torch.set_float32_matmul_precision("high")
        out = compiled(a.to("cuda"), b.to("cuda"))
    assert out.device.type == "cuda"
    assert torch.equal(out.cpu(), (round_to_tf32(a) @ round_to_tf32(b)).relu())
    assert journal.rounded()


def test_ampere_device_api_autocast_and_training_pieces(personality) -> None:
    """What a training step touches: module moves, autocast, GradScaler, a foreach optimiser,
    deepcopy, host copies; and CUDA's refusals (numpy of a device tensor, mixed devices)."""
    with personality("ampere"):
        devices = DeviceSet.current()
        assert devices.availability["cuda"].available and devices.availability["cuda"].count == 2
        assert devices.select("cuda:1")[0].info()["compute_capability"] == "8.0"
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                    torch.nn.Linear(64, 2)).to("cuda")
        assert {str(p.device) for p in model.parameters()} == {"cuda:0"}
        assert all(isinstance(p, torch.nn.Parameter) for p in model.parameters())
        optimizer = torch.optim.Adam(model.parameters())
        scaler = torch.amp.GradScaler("cuda")
        batch = _inputs(2, 3, 6, 6).to("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(batch)
        assert (out.dtype, out.device.type) == (torch.float16, "cuda")
        scaler.scale(out.float().sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        assert next(model.parameters()).grad.device.type == "cuda"
        host = out.cpu()
        assert type(host) is torch.Tensor and host.device.type == "cpu"
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            out.detach().numpy()
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            out + torch.ones(2, 2)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.ones(2, device="cuda:0") + torch.ones(2, device="cuda:1")


def test_an_event_records_on_the_current_device_as_torch_event_does(personality) -> None:
    """torch.Event keeps only the device type: an event made for cuda:1 records on the current
    device's stream (GPU 0) unless cuda:1 was made current."""
    with personality("ampere") as journal:
        event = torch.Event(device=torch.device("cuda:1"), enable_timing=True)
        event.record()
        torch.cuda.set_device(1)
        event.record()
    assert [entry["device"] for entry in journal.entries("event_record")] == ["cuda:0", "cuda:1"]


def test_selftest_on_the_second_gpu_times_that_gpu(personality, monkeypatch) -> None:
    """One quick timing check through the real suite: its events must record on cuda:1, and the
    current device must be what it was before (no leak into the next device's checks)."""
    from accelbench.selftest import suite, timing
    from accelbench.selftest.work import DeviceBoundWork

    # Small products: the default work doubles its side up to 4096 looking for device-bound
    # products, which on the CPU underneath took a minute of this test for nothing it checks.
    monkeypatch.setattr(timing, "timing_checks", lambda device, quick=False: [
        lambda: timing.check_windowed_agrees(device, step_s=0.0005, window=2, rounds=1,
                                             work=DeviceBoundWork(device, 64))])
    with personality("ampere") as journal:
        devices = DeviceSet.current()
        suite.run_selftest(devices, devices.select("cuda:1"), groups=("timing",), quick=True)
        current = torch.cuda.current_device()
    recorded = {entry["device"] for entry in journal.entries("event_record")}
    assert recorded == {"cuda:1"}, recorded
    assert current == 0


# --- MPS: no float64, events, memory, fallback -------------------------------------------------
def test_mps_has_no_float64_on_the_device(personality) -> None:
    assert PERSONALITY_FLOAT64_ERROR == MPS_FLOAT64_ERROR
    with personality("mps"):
        x = torch.randn(3, device="mps")
        assert x.device.type == "mps"
        for convert in (lambda: x.double(), lambda: x.to(torch.float64),
                        lambda: torch.zeros(2, dtype=torch.float64, device="mps"),
                        lambda: torch.ones(2, dtype=torch.float64).to("mps")):
            with pytest.raises(TypeError, match="MPS framework doesn't support float64"):
                convert()
        assert x.cpu().double().dtype == torch.float64


def test_mps_events_commit_on_record_and_fail_as_mps_does(personality) -> None:
    with personality("mps"):
        x = torch.randn(16, 16, device="mps")

        def event() -> torch.Event:
            return torch.Event(device=torch.device("mps:0"), enable_timing=True)

        start, end = event(), event()
        torch.mps.synchronize()
        start.record()
        end.record()  # on an idle device: in order
        assert start.elapsed_time(end) > 0
        start, end = event(), event()
        x @ x  # a product keeps the device busy until the host waits
        start.record()
        end.record()  # back to back on a busy device: both signal when the product ends
        torch.mps.synchronize()
        with pytest.raises(RuntimeError, match="End event .* was not recorded after start event"):
            start.elapsed_time(end)
        start, end = event(), event()
        start.record()
        x @ x
        end.record()
        first = start.elapsed_time(end)  # work between them: a gap
        time.sleep(0.05)
        torch.mps.synchronize()
        start.record()  # recycled: its new stamp is not delivered before the first reading
        x @ x
        end.record()
        assert start.elapsed_time(end) > first + 40  # the previous window's start: inflated
        commits = journal_module.counts[("commit", "event_record")]
    assert commits == 8


def test_mps_memory_counter_with_and_without_a_peak(personality) -> None:
    with personality("mps"):
        device = DeviceSet.current().select("mps")[0]
        device.reset_peak_memory()
        held = torch.zeros(1024, device="mps")
        assert device.peak_memory_bytes() >= held.numel() * 4
        assert not device.memory_is_lower_bound  # torch.accelerator's peak
    with personality("mps-nopeak"):
        assert not hasattr(torch.accelerator, "memory_stats")
        device = DeviceSet.current().select("mps")[0]
        device.reset_peak_memory()
        held = torch.zeros(1024, device="mps")
        device.synchronize()
        assert device.peak_memory_bytes() >= held.numel() * 4
        assert device.memory_is_lower_bound  # sampled: labelled a lower bound
    assert hasattr(torch.accelerator, "memory_stats")  # put back


def test_mps_cpu_fallback_refuses_or_warns_once_per_process(personality, monkeypatch) -> None:
    with personality("mps"), pytest.raises(NotImplementedError, match="aten::linalg_eig"):
        torch.linalg.eig(torch.eye(3, device="mps"))
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    with personality("mps"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.linalg.eig(torch.eye(3, device="mps"))
            torch.linalg.eig(torch.eye(3, device="mps"))
            F.grid_sample(torch.ones(1, 1, 2, 2, 2, device="mps"),
                          torch.zeros(1, 1, 1, 1, 3, device="mps"), align_corners=False)
        assert [str(w.message).split(" is ")[0] for w in caught] == ["The operator 'aten::linalg_eig'"]
        torch.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.linalg.eig(torch.eye(3, device="mps"))
        finally:
            torch.set_warn_always(False)
        assert len(caught) == 1


def test_mps_is_an_arm64_mac_to_the_adapter(personality) -> None:
    with personality("mps"):
        devices = DeviceSet.current()
        assert devices.availability["mps"].available
        assert not devices.availability["cuda"].available
        assert devices.select("mps")[0].info()["macos_version"] == "14.5"


# --- slow sync ----------------------------------------------------------------------------------
def test_slow_sync_costs_milliseconds_and_the_clock_ticks_coarsely(personality, monkeypatch) -> None:
    monkeypatch.setenv("ACCELBENCH_PERSONALITY_TICK_MS", "4")
    real_clock = time.perf_counter
    with personality("slow-sync"):
        readings = {time.perf_counter_ns() % 4_000_000 for _ in range(50)}
        start = real_clock()
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").item()  # a read to the host waits as long
        cost = real_clock() - start
    assert readings == {0}
    assert cost >= 2 * 0.005  # ACCELBENCH_PERSONALITY_SYNC_MS, default 5
    assert time.perf_counter is real_clock


# --- reaching every process ---------------------------------------------------------------------
def test_sitecustomize_installs_the_personality_in_child_processes(personality_env) -> None:
    """A plain child python: the personality is installed before its first line (so accelbench's
    workers and torchrun's ranks get it too), and nothing is imported without the variable."""
    code = ("import sys; seen = 'torch' in sys.modules; import torch; "
            "print(seen, torch.randn(2, device='cuda').device)")
    env, journal = personality_env("ampere")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    assert out.stdout.split() == ["True", "cuda:0"], out.stderr
    assert len(journal.processes()) == 1
    bare = {**os.environ, **env, "ACCELBENCH_TEST_PERSONALITY": ""}
    out = subprocess.run([sys.executable, "-c", "import sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, env=bare, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_the_sitecustomize_it_shadows_still_runs(personality_env, tmp_path) -> None:
    """Debian's python keeps a sitecustomize in its standard library folder: ours comes first
    on the path and must run that one too."""
    shadowed = tmp_path / "later"
    shadowed.mkdir()
    (shadowed / "sitecustomize.py").write_text("import builtins; builtins.SHADOWED_RAN = True\n")
    env, _ = personality_env("ampere")
    env = {**os.environ, **env, "ACCELBENCH_TEST_PERSONALITY": "",
           "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], str(shadowed)])}
    out = subprocess.run([sys.executable, "-c", "print(SHADOWED_RAN)"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


def test_a_personality_that_cannot_install_stops_the_process(personality_env) -> None:
    env, _ = personality_env("no-such-device")
    out = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=60)
    assert out.returncode == 70 and "ran" not in out.stdout
    assert "unknown personality 'no-such-device'" in out.stderr


def test_journal_entries_are_json_lines(personality) -> None:
    with personality("ampere") as journal:
        torch.set_float32_matmul_precision("high")
        x = torch.ones(4, 4, device="cuda")
        x @ x
    [entry] = journal.rounded()
    assert entry["flags"]["cuda.matmul"] == "tf32"
    assert entry["pid"] == os.getpid() and entry["where"] == []  # no accelbench frame called it
