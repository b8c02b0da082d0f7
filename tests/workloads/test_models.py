"""Models by name: timm:, torchvision:, hf: (type or config folder) resolve, run at the tiny size
on the CPU (in worker processes and inline), and fail as one-line usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import accelbench
from accelbench.errors import UsageError
from accelbench.workloads.catalogue import match_models, resolve_model
from accelbench.workloads.named.shared import version_number


@pytest.fixture(scope="module")
def config_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config folder as `save_pretrained` writes it (no weights): what hf:FOLDER loads."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("hf-config")
    transformers.BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, architectures=["BertForMaskedLM"]).save_pretrained(folder)
    return folder


def test_input_shapes_and_classes_come_from_the_models_own_config() -> None:
    pytest.importorskip("timm")
    timm_resnet = resolve_model("timm:resnet18")
    assert timm_resnet.input_shape == (3, 224, 224) and timm_resnet.classes == 1000
    assert timm_resnet("tiny").image_shape() == (3, 64, 64)  # a CNN accepts a smaller image
    import timm

    assert timm_resnet.version == version_number(timm.__version__)
    assert resolve_model("timm:resnet10t").input_shape == (3, 176, 176)  # timm's own input_size
    vit = resolve_model("torchvision:vit_b_16")
    assert vit.input_shape == (3, 224, 224) and vit.classes == 1000
    assert vit("tiny").image_shape() == (3, 224, 224)  # fixed position embeddings: keeps 224
    assert resolve_model("torchvision:inception_v3").input_shape == (3, 299, 299)
    assert vit.torchvision_weights == "ViT_B_16_Weights.IMAGENET1K_V1"  # for `list`'s published GMACs


def test_hf_heads_follow_the_config(config_folder: Path) -> None:
    bert = resolve_model("hf:bert")
    assert (bert.task, bert.input_shape, bert.config.vocab_size) == ("sequence-classification", (128,), 30522)
    assert resolve_model("hf:gpt2").task == "causal-lm"
    assert resolve_model("hf:vit").task == "image-classification"
    folder = resolve_model(f"hf:{config_folder}")
    assert (folder.task, folder.architecture) == ("masked-lm", "BertForMaskedLM")
    assert folder.config.hidden_size == 32


def test_named_models_train_at_the_tiny_size_inline(config_folder: Path) -> None:
    pytest.importorskip("timm")
    names = ["torchvision:vit_b_16", "hf:bert", f"hf:{config_folder}"]
    record = accelbench.run(names, device="cpu", modes=["train"], steps=1, warmup=0, size="tiny",
                            isolation="none", save=False)
    assert [(c.workload, c.status, c.batch_size) for c in record.cases] == [(n, "ok", 2) for n in names]
    assert all(c.flops.per_sample > 0 for c in record.cases)  # counted for named models


def test_cli_runs_a_named_model_in_a_worker_process(cli, tmp_path: Path, config_folder: Path) -> None:
    pytest.importorskip("timm")
    out = tmp_path / "run.json"
    done = cli("run", "timm:resnet18", f"hf:{config_folder}", "--size", "tiny", "--device", "cpu",
               "--mode", "train", "--steps", "1", "--warmup", "0", "-o", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert [c["workload"] for c in cases] == ["timm:resnet18", f"hf:{config_folder}"]
    assert all(c["status"] == "ok" and c["workload_version"] > 1000 for c in cases)


def test_wildcards_expand_through_the_library() -> None:
    pytest.importorskip("timm")
    hits = match_models("timm:resnet1?")
    assert "timm:resnet18" in hits and "timm:resnet50" not in hits
    assert "torchvision:resnet18" in match_models("torchvision:resnet*")
    with pytest.raises(UsageError, match="no timm model matches"):
        match_models("timm:no_such_model_*")


@pytest.mark.parametrize("name, message", [
    ("timm:resnet_nope", "has no model 'resnet_nope'"),
    ("torchvision:fasterrcnn_resnet50_fpn", "has no classification model"),
    ("hf:not_a_model_type", "has no model type 'not_a_model_type'"),
    ("hf:", "names no model"),
])
def test_bad_names_are_usage_errors(name: str, message: str) -> None:
    pytest.importorskip("timm")
    with pytest.raises(UsageError, match=message):
        resolve_model(name)


def test_a_hub_config_that_cannot_be_had_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads the variable once, at import: where an earlier test imported it, only
    # the constant makes this test offline (else it waits ~20 s on a connection that cannot open).
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(UsageError, match="cannot load the config of 'no-org/no-model'.*config.json"):
        resolve_model("hf:no-org/no-model")


def test_a_missing_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm now raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'accelbench\[timm\]'"):
        resolve_model("timm:resnet18")


def test_cli_bad_model_name_is_one_line_exit_2(cli) -> None:
    done = cli("run", "torchvision:not_a_net", "--device", "cpu")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "has no classification model 'not_a_net'" in done.stderr


def test_list_shows_counted_flops_for_named_models(cli) -> None:
    done = cli("list", "timm:resnet18", "torchvision:resnet18", "--json")
    assert done.returncode == 0, done.stderr
    facts = {item["name"]: item for item in json.loads(done.stdout)}
    for name in ("timm:resnet18", "torchvision:resnet18"):
        assert facts[name]["parameters"] == 11_689_512
        # torchvision publishes 1.81 GMACs for ResNet-18: FLOPs = 2 x MACs
        assert facts[name]["forward_flops_per_sample"] == pytest.approx(2 * 1.81e9, rel=0.05)
    assert facts["torchvision:resnet18"]["torchvision"]["gmacs"] == pytest.approx(1.81, abs=0.01)


def test_an_unknown_plain_name_points_to_model_names() -> None:
    from accelbench.workloads import get_workload_class, match_workloads

    for call in (lambda: get_workload_class("resnet18"), lambda: match_workloads(["resnet18"])):
        with pytest.raises(UsageError, match="or a model name: timm:NAME, torchvision:NAME"):
            call()
