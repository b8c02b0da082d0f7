"""Every registered workload end to end on the CPU at its tiny size, and the pieces that define them."""

from __future__ import annotations

import importlib
import math
import sys

import pytest
import torch
import torch.nn.functional as F
from idx import write_tiny_mnist

from accelbench.data.options import DataOptions
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case, plan
from accelbench.engine.measure_case import run_case
from accelbench.options import RunOptions, StopRule
from accelbench.options.values import build_run_options
from accelbench.workloads import get_workload_class, workload_names
from accelbench.workloads.base import Workload
from accelbench.workloads.builtin.bert import INSTALL_HINT, transformers_missing
from accelbench.workloads.builtin.simclr import SimCLRNet, knn_predict, nt_xent_loss
from accelbench.workloads.builtin.vae import VAE, vae_loss
from accelbench.workloads.suites import SUITES

CASES = [(name, mode) for name in workload_names() for mode in get_workload_class(name).modes]


#: Tiny steps are hundreds of small kernels: on a busy machine OpenMP threads waiting for each
#: other at every kernel's barrier make them 5-20x slower than one thread (seen: 13 s vs 0.8 s).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def cpu():
    return DeviceSet.current().select("cpu")[0]


def tiny_options(name: str, mode: str) -> RunOptions:
    return RunOptions(workloads=(name,), modes=(mode,), size="tiny", stop=StopRule("steps", 2),
                      warmup_steps=1, device="cpu")


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_every_workload_runs_tiny_on_cpu(name: str, mode: str, cpu) -> None:
    workload = get_workload_class(name)("tiny")
    if workload.unavailable_reason():
        pytest.skip(workload.unavailable_reason())
    batch = workload.batch_size(mode)
    result = run_case(Case(workload=name, mode=mode, device=cpu, batch_size=batch), tiny_options(name, mode))
    assert result.status == "ok", result.error + result.traceback
    assert len(result.step_times) == 2
    assert all(math.isfinite(t) and t > 0 for t in result.step_times)
    assert result.batch_size == batch
    assert result.dataset_size == workload.samples_per_epoch(mode)
    assert result.steps_per_epoch == -(-workload.samples_per_epoch(mode) // batch)
    has_epoch_work = type(workload).end_of_epoch is not Workload.end_of_epoch
    if mode == "train" and has_epoch_work:
        assert set(result.metrics) == EPOCH_METRICS[name]
        assert all(0.0 <= value <= 1.0 for value in result.metrics.values())
        assert result.epoch_end_s is not None and result.epoch_end_s > 0
    else:
        assert not result.metrics


#: What each workload's per-epoch work reports (every metric here is an accuracy in [0, 1]).
EPOCH_METRICS = {"simclr-resnet18": {"knn_top1"}}


def test_published_sizes_are_the_documented_ones() -> None:
    facts = {name: get_workload_class(name)() for name in workload_names()}
    assert facts["vae"].batch_size("train") == 128 and facts["vae"].samples_per_epoch("train") == 60_000
    assert facts["simclr-resnet18"].batch_size("train") == 128
    assert facts["simclr-resnet18"].samples_per_epoch("train") == 50_000
    assert facts["simclr-resnet18"].samples_per_epoch("eval") == 10_000
    assert facts["resnet50"].batch_size("train") == 128
    assert facts["resnet50"].samples_per_epoch("train") == 1_281_167
    assert facts["vgg16"].batch_size("train") == 64 and facts["bert-base"].batch_size("train") == 64
    assert facts["bert-base"].samples_per_epoch("train") == 67_349
    assert facts["nanogpt-char"].batch_size("train") == 64 and facts["gpt2"].batch_size("train") == 12
    assert facts["llama-1b"].batch_size("train") == 8


def test_quick_suite_has_a_cnn_the_vae_a_transformer_and_a_decoder_that_need_nothing_optional() -> None:
    assert SUITES["quick"] == ("mnist", "vae", "transformer-small", "nanogpt-char")
    for name in SUITES["quick"]:
        assert get_workload_class(name)().unavailable_reason() is None


def test_the_quick_suite_runs_nanogpt_char_at_its_capped_batch() -> None:
    devices = DeviceSet.current()

    def batches(workloads, **keywords) -> dict[tuple[str, str], int]:
        options = build_run_options(workloads, "cpu", ("train", "eval"), **keywords)
        assert RunOptions.from_dict(options.to_dict()) == options  # the suite travels to workers
        return {(case.workload, case.mode): case.batch_size for case in plan(options, devices)}

    suite = batches(None)
    assert suite[("nanogpt-char", "train")] == suite[("nanogpt-char", "eval")] == 8
    assert suite[("mnist", "train")] == 64 and suite[("transformer-small", "train")] == 64
    assert batches(["nanogpt-char"])[("nanogpt-char", "train")] == 64  # named: the published batch
    assert batches(None, batch_size=32)[("nanogpt-char", "train")] == 32  # --batch-size wins
    assert batches(None, size="tiny")[("nanogpt-char", "train")] == 4  # the tiny batch is smaller


def test_the_quick_suite_adds_nanogpt_char_generation_where_it_runs_eval() -> None:
    devices = DeviceSet.current()

    def generated(modes, **keywords) -> list[tuple[str, int, int, int]]:
        options = build_run_options(None, "cpu", modes, **keywords)
        return [(c.workload, c.batch_size, c.prompt_len, c.new_tokens)
                for c in plan(options, devices) if c.mode == "generate"]

    # Its context of 256 characters less the 128 new ones: a 128-character prompt, batch 1.
    assert generated(("train", "eval")) == [("nanogpt-char", 1, 128, 128)]
    assert generated(("train",)) == []  # --mode train asked for training only
    assert generated(("train", "eval"), sustained=2) == []  # --sustained times steps
    assert generated(("generate",)) == [("nanogpt-char", 1, 128, 128)]  # no other decoder
    assert generated(("train", "eval"), size="tiny") == [("nanogpt-char", 1, 16, 16)]  # fits 32
    named = build_run_options(["nanogpt-char"], "cpu", ("train", "eval"))
    assert {c.mode for c in plan(named, devices)} == {"train", "eval"}  # named: as asked


# --- VAE -------------------------------------------------------------------------------------
def test_vae_loss_matches_a_hand_computation() -> None:
    torch.manual_seed(0)
    model = VAE()
    model.noise.randn_like = torch.zeros_like  # z = mu: the loss is then a function of the weights only
    x = torch.rand(3, 1, 28, 28)
    flat = x.view(3, 784)
    h = torch.relu(flat @ model.fc1.weight.T + model.fc1.bias)
    mu = h @ model.fc21.weight.T + model.fc21.bias
    logvar = h @ model.fc22.weight.T + model.fc22.bias
    recon = torch.sigmoid(torch.relu(mu @ model.fc3.weight.T + model.fc3.bias) @ model.fc4.weight.T
                          + model.fc4.bias)
    bce = -(flat * recon.log() + (1 - flat) * (1 - recon).log()).sum()
    kld = -0.5 * (1 + logvar - mu**2 - logvar.exp()).sum()
    workload = get_workload_class("vae")()
    got = workload.training_loss(model, (x, torch.zeros(3, dtype=torch.long)))
    assert torch.allclose(got, bce + kld, rtol=1e-5)
    assert torch.allclose(vae_loss(recon, x, mu, logvar), bce + kld, rtol=1e-5)


def test_vae_noise_comes_from_torchs_rng() -> None:
    workload = get_workload_class("vae")()
    model = workload.build_model()
    x = torch.rand(4, 1, 28, 28)
    torch.manual_seed(1)
    first = model(x)[0]
    torch.manual_seed(1)
    again = model(x)[0]
    second = model(x)[0]
    assert torch.equal(first, again)  # same seed, same noise
    assert not torch.equal(first, second)  # fresh noise each forward


def test_vae_real_data_is_raw_pixels_in_unit_range(tmp_path) -> None:
    write_tiny_mnist(tmp_path, n_train=10, n_eval=6)
    workload = get_workload_class("vae")()
    images, _ = next(iter(workload.make_batches("eval", 6, DataOptions(kind="real", data_dir=tmp_path))))
    assert images.shape == (6, 1, 28, 28)
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    # de-normalising MNIST's mean/std gives back k/255 for integer k
    assert torch.allclose(images * 255, (images * 255).round(), atol=1e-3)


# --- SimCLR ----------------------------------------------------------------------------------
def test_knn_predict_votes_by_weighted_similarity() -> None:
    e = torch.eye(3)
    bank = F.normalize(torch.stack([e[0], e[0] + 0.1 * e[2], e[1], e[1] + 0.1 * e[2]]), dim=1)
    labels = torch.tensor([0, 0, 1, 1])
    queries = F.normalize(torch.stack([e[0] + 0.2 * e[1], e[1] + 0.2 * e[0]]), dim=1)
    ranked = knn_predict(queries, bank.T, labels, num_classes=2, knn_k=4, knn_t=0.1)
    assert ranked[:, 0].tolist() == [0, 1]
    # One very close neighbour outweighs two farther ones at temperature 0.1 (exp(10) > 2 exp(8)).
    close = torch.tensor([[1.0, 0.0]])
    far = torch.tensor([0.8, 0.6])
    bank = torch.stack([close[0], far, far])
    ranked = knn_predict(close, bank.T, torch.tensor([0, 1, 1]), num_classes=2, knn_k=3, knn_t=0.1)
    assert ranked[0, 0] == 0
    # ... but not at a high temperature, where it is nearly a majority vote.
    ranked = knn_predict(close, bank.T, torch.tensor([0, 1, 1]), num_classes=2, knn_k=3, knn_t=10.0)
    assert ranked[0, 0] == 1


def test_nt_xent_matches_a_hand_computation() -> None:
    torch.manual_seed(0)
    z0, z1 = torch.randn(3, 5), torch.randn(3, 5)
    z = F.normalize(torch.cat([z0, z1]), dim=1)
    n, t = 3, 0.5
    total = 0.0
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        others = [j for j in range(2 * n) if j != i]
        denominator = sum(math.exp(float(z[i] @ z[j]) / t) for j in others)
        total += -math.log(math.exp(float(z[i] @ z[partner]) / t) / denominator)
    assert float(nt_xent_loss(z0, z1, t)) == pytest.approx(total / (2 * n), rel=1e-5)


def test_simclr_epoch_end_reports_knn_accuracy_and_restores_train_mode() -> None:
    workload = get_workload_class("simclr-resnet18")("tiny")
    model = workload.build_model()
    model.train()
    metrics = workload.end_of_epoch(model, "cpu", DataOptions())
    assert set(metrics) == {"knn_top1"}
    assert 0.0 <= metrics["knn_top1"] <= 1.0
    assert model.training and all(m.training for m in model.modules())


def test_simclr_model_is_resnet18_with_a_cifar_stem() -> None:
    model = SimCLRNet()
    assert model.backbone.conv1.kernel_size == (3, 3) and model.backbone.conv1.stride == (1, 1)
    assert isinstance(model.backbone.maxpool, torch.nn.Identity)
    assert model.backbone(torch.randn(2, 3, 32, 32)).shape == (2, 512)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 128)
    workload = get_workload_class("simclr-resnet18")()
    optimizer = workload.make_optimizer(model)
    assert optimizer.defaults["lr"] == pytest.approx(6e-2) and optimizer.defaults["weight_decay"] == 5e-4


# --- BERT without transformers ----------------------------------------------------------------
def test_bert_base_is_registered_but_unavailable_without_transformers(monkeypatch, cpu) -> None:
    import accelbench.workloads.builtin.bert as bert

    try:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, "transformers", None)  # "import transformers" now fails
            importlib.reload(bert)  # importing the module must not need transformers
            assert "bert-base" in workload_names()
            reason = get_workload_class("bert-base")().unavailable_reason()
            assert reason is not None and INSTALL_HINT in reason
            assert INSTALL_HINT == "pip install 'accelbench[transformers]'"
            result = run_case(Case(workload="bert-base", mode="eval", device=cpu, batch_size=4),
                                   tiny_options("bert-base", "eval"))
            assert result.status == "unavailable" and INSTALL_HINT in result.error
            assert transformers_missing() is not None
    finally:
        importlib.reload(bert)  # the registry gets classes that see the real package again
