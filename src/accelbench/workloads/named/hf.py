"""``hf:TYPE`` / ``hf:ORG/NAME`` / ``hf:FOLDER``: a Hugging Face transformers model with random
weights, built from its config alone; a folder that holds a saved checkpoint (``save_pretrained``:
``model.safetensors`` ...) is built with its weights (``weights_source``).

``hf:bert`` builds the type's default config offline (``AutoConfig.for_model``); ``hf:ORG/NAME``
and a local folder load just the config (``AutoConfig.from_pretrained``: the local cache or folder,
or a ~1 kB download when online). The head comes from the config's ``architectures`` when it names
one accelbench knows how to feed, else from the type: encoders (bert, roberta, ...) get sequence
classification over the config's labels, decoders (gpt2, llama, ...) causal language modelling,
vision models image classification. Text is synthetic tokens (no padding) of 128 tokens (fewer when
the model's positions are fewer) at the published size and 16 at the tiny size.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.errors import UsageError
from accelbench.workloads.base import RANDOM_WEIGHTS, Batch, Workload
from accelbench.workloads.builtin.bert import SST2_SIZES
from accelbench.workloads.builtin.imagenet import IMAGENET_SIZES
from accelbench.workloads.named.shared import (
    PUBLISHED_BATCH,
    TINY_BATCH,
    TINY_SAMPLES,
    import_library,
    version_number,
)
from accelbench.workloads.presets import Preset

#: Tokens per sequence at the published and the tiny size (fewer when the model has fewer positions).
PUBLISHED_SEQ_LEN, TINY_SEQ_LEN = 128, 16
#: Task -> (Auto class, class-name suffixes in ``config.architectures`` that mean this task).
TASKS = {
    "sequence-classification": ("AutoModelForSequenceClassification", ("ForSequenceClassification",)),
    "causal-lm": ("AutoModelForCausalLM", ("ForCausalLM", "LMHeadModel")),
    "masked-lm": ("AutoModelForMaskedLM", ("ForMaskedLM",)),
    "image-classification": ("AutoModelForImageClassification", ("ForImageClassification",)),
}


def _transformers() -> Any:
    return import_library("transformers", "hf", "transformers")


def load_config(spec: str) -> Any:
    transformers = _transformers()
    if "/" in spec or Path(spec).exists():
        try:
            return transformers.AutoConfig.from_pretrained(spec)
        except (OSError, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise UsageError(f"cannot load the config of {spec!r} ({first}); give a folder holding "
                             "its config.json, or run once online so the Hub caches it") from None
    try:
        return transformers.AutoConfig.for_model(spec)
    except ValueError:
        raise UsageError(f"transformers {transformers.__version__} has no model type {spec!r}; "
                         "use a type such as bert, gpt2, vit, or hf:ORG/NAME, or a config folder") from None


def choose_task(config: Any) -> tuple[str, str | None]:
    """(task, architecture class name or None for the Auto class)."""
    transformers = _transformers()
    for architecture in getattr(config, "architectures", None) or []:
        for task, (_, suffixes) in TASKS.items():
            if architecture.endswith(suffixes) and hasattr(transformers, architecture):
                return task, architecture
    from transformers.models.auto import modeling_auto as auto

    kind = config.model_type
    if kind in auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        return "image-classification", None
    encoder = kind in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if encoder and kind in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        return "sequence-classification", None
    if kind in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal-lm", None
    if kind in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        return "sequence-classification", None
    raise UsageError(f"hf model type {kind!r} has no head accelbench can train (sequence "
                     "classification, causal or masked LM, image classification)")


@dataclass(frozen=True)
class HFPreset(Preset):
    #: Tokens per sequence; 0 for an image model.
    seq_len: int


def hf_presets(dataset_size: dict[str, int], positions: int | None) -> dict[str, HFPreset]:
    """``positions``: the text model's position embeddings (None for an image model)."""
    def seq_len(wanted: int) -> int:
        return 0 if positions is None else min(wanted, positions)
    return {
        "published": HFPreset(batch_size=PUBLISHED_BATCH, dataset_size=dataset_size,
                              seq_len=seq_len(PUBLISHED_SEQ_LEN)),
        "tiny": HFPreset(batch_size=TINY_BATCH, dataset_size=TINY_SAMPLES,
                         seq_len=seq_len(TINY_SEQ_LEN)),
    }


class HFModel(Workload):
    """Subclasses (one per name) set ``config``, ``task``, ``architecture`` and ``presets``."""

    preset: HFPreset
    config: ClassVar[Any]
    task: ClassVar[str]
    architecture: ClassVar[str | None]

    def build_model(self) -> nn.Module:
        transformers = _transformers()
        model_class = getattr(transformers, self.architecture or TASKS[self.task][0])
        if self.weights_source != RANDOM_WEIGHTS:  # a folder holding a checkpoint: its weights
            return model_class.from_pretrained(self.weights_source, config=self.config)
        if self.architecture:
            return model_class(self.config)
        return model_class.from_config(self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=2e-5)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        config, task, seq_len = self.config, self.task, self.preset.seq_len

        def make(generator: torch.Generator, size: int) -> Batch:
            if task == "image-classification":
                shape = (size, config.num_channels, config.image_size, config.image_size)
                return torch.randn(shape, generator=generator), self._labels(generator, size)
            ids = torch.randint(1, config.vocab_size, (size, seq_len), generator=generator)
            labels = ids if task.endswith("-lm") else self._labels(generator, size)
            return ids, labels
        return synthetic_epoch(make, self.samples_per_epoch(mode), batch_size, options.seed)

    def _labels(self, generator: torch.Generator, size: int) -> torch.Tensor:
        return torch.randint(0, self.config.num_labels, (size,), generator=generator)

    def _loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        inputs, labels = batch
        key = "pixel_values" if self.task == "image-classification" else "input_ids"
        return model(**{key: inputs}, labels=labels).loss

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return self._loss(model, batch)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return self._loss(model, batch)


class HFCausalLM(HFModel):
    """A causal language model also generates (the workload contract's generation methods), with
    transformers' own key/value cache (``past_key_values``: a cache that grows by one position a
    token, as ``generate()`` uses by default), or its ``StaticCache`` once the execution recipe
    keeps one (``keep_cache``: a graph mode of ``--compile``)."""

    positions: ClassVar[int]

    def tokens_per_sample(self, mode: str) -> int:
        return self.preset.seq_len

    def context_length(self) -> int:
        return self.positions

    def make_prompt(self, batch_size: int, prompt_len: int, seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(1, self.config.vocab_size, (batch_size, prompt_len), generator=generator)

    def prefill(self, model: nn.Module, prompt: torch.Tensor,
                max_len: int) -> tuple[torch.Tensor, object]:
        # Only the last position's logits, as generate() asks for them where the model takes
        # ``logits_to_keep``: the vocabulary projection of every prompt position is not prefill.
        keep = {"logits_to_keep": 1} if _takes(model, "logits_to_keep") else {}
        static = self._kept_static(model, prompt, max_len)
        if static is None:
            out = model(input_ids=prompt, use_cache=True, **keep)
            return out.logits[:, -1, :], out.past_key_values
        position = torch.arange(prompt.shape[1], device=prompt.device)
        out = model(input_ids=prompt, past_key_values=static.cache, cache_position=position,
                    use_cache=True, **keep)
        static.position = position[-1:] + 1
        return out.logits[:, -1, :], static

    def decode_step(self, model: nn.Module, tokens: torch.Tensor,
                    cache: object) -> tuple[torch.Tensor, object]:
        if isinstance(cache, KeptStaticCache):
            assert cache.position is not None  # the prefill set it
            out = model(input_ids=tokens[:, None], past_key_values=cache.cache,
                        cache_position=cache.position, use_cache=True)
            cache.position = cache.position + 1  # a new tensor: the captured graph copies it in
            return out.logits[:, -1, :], cache
        out = model(input_ids=tokens[:, None], past_key_values=cache, use_cache=True)
        return out.logits[:, -1, :], out.past_key_values

    def keep_cache(self, model: nn.Module) -> None:
        """transformers' ``StaticCache`` from now on (``generate(cache_implementation="static")``'s):
        allocated for the case's length at the first prefill, reset and reused after, its tensors
        marked static by transformers; decoding passes ``cache_position``, as generate() does."""
        if not hasattr(_transformers(), "StaticCache"):
            super().keep_cache(model)
        self.kv_cache_kind = "static"  # type: ignore[misc]  # this instance's, from keep_cache on
        self._static: dict[tuple[int, int], KeptStaticCache] = {}

    def _kept_static(self, model: nn.Module, prompt: torch.Tensor, max_len: int) -> KeptStaticCache | None:
        kept = getattr(self, "_static", None)
        if kept is None:
            return None
        key = (prompt.shape[0], max_len)
        if key not in kept:
            kept[key] = KeptStaticCache(_static_cache(getattr(model, "_orig_mod", model), prompt, max_len))
        else:
            kept[key].cache.reset()
        return kept[key]

    def kv_cache_bytes(self, batch_size: int, max_len: int, dtype: torch.dtype) -> int:
        config = self.config
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        item = torch.empty((), dtype=dtype).element_size()
        return 2 * config.num_hidden_layers * batch_size * max_len * heads * head_dim * item

    def decoder_shape(self) -> dict[str, int]:
        """As the built-in decoders give it (language_model.DecoderLM.decoder_shape), from the
        config; a field the config lacks is 0."""
        config = self.config
        heads = int(getattr(config, "num_attention_heads", 0) or 0)
        return {"layers": int(getattr(config, "num_hidden_layers", 0) or 0),
                "width": int(getattr(config, "hidden_size", 0) or 0), "heads": heads,
                "kv_heads": int(getattr(config, "num_key_value_heads", None) or heads),
                "ffn": int(getattr(config, "intermediate_size", None) or 0),
                "vocab": int(getattr(config, "vocab_size", 0) or 0)}


#: The files a saved checkpoint's weights are in (``save_pretrained``), one whole or sharded.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def checkpoint_folder(spec: str) -> str | None:
    """The folder ``spec`` names where it holds a checkpoint's weights (the model is then built
    with them, ``from_pretrained``); None for a config alone, a type or a Hub name (random
    weights: nothing is downloaded)."""
    folder = Path(spec)
    if folder.is_dir() and any((folder / name).is_file() for name in WEIGHT_FILES):
        return str(folder.resolve())
    return None


@dataclass
class KeptStaticCache:
    """A kept ``StaticCache`` and the next position to write (a device tensor: no host sync)."""

    cache: Any
    position: torch.Tensor | None = None


def _static_cache(model: nn.Module, prompt: torch.Tensor, max_len: int) -> Any:
    """transformers' StaticCache for ``max_len`` positions of ``prompt``'s batch: its signature
    since 4.56 (config, max_cache_len; laid out at the first write), else the earlier one."""
    transformers = _transformers()
    config = getattr(model, "config", None)
    try:
        return transformers.StaticCache(config=config, max_cache_len=max_len)
    except TypeError:
        dtype = next(model.parameters()).dtype
        return transformers.StaticCache(config=config, max_batch_size=prompt.shape[0],
                                        max_cache_len=max_len, device=prompt.device, dtype=dtype)


def resolve(spec: str) -> type[HFModel]:
    transformers = _transformers()
    config = load_config(spec)
    checkpoint = checkpoint_folder(spec)
    task, architecture = choose_task(config)
    if task == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = 0  # decoders pool the last non-pad token; tokens are drawn from 1 up
    image = task == "image-classification"
    positions = int(getattr(config, "max_position_embeddings", None)
                    or getattr(config, "n_positions", None) or PUBLISHED_SEQ_LEN)
    shape = (config.num_channels, config.image_size, config.image_size) if image else (
        min(PUBLISHED_SEQ_LEN, positions),)
    base = HFCausalLM if task == "causal-lm" else HFModel
    return type(f"HF_{spec}", (base,), dict(
        config=config, task=task, architecture=architecture, input_shape=shape, positions=positions,
        presets=hf_presets(IMAGENET_SIZES if image else SST2_SIZES, None if image else positions),
        version=version_number(transformers.__version__),
        description=f"transformers {architecture or config.model_type} {task} from "
        f"{'its default config' if spec == config.model_type else spec} "
        f"({'its checkpoint' if checkpoint else 'random'} weights, "
        f"transformers {transformers.__version__}), AdamW 2e-5",
        weights_source=checkpoint or RANDOM_WEIGHTS,
        source=f"https://huggingface.co/docs/transformers/model_doc/{config.model_type}",
    ))


def list_names(pattern: str) -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


def _takes(model: nn.Module, keyword: str) -> bool:
    """Whether ``model``'s forward accepts ``keyword`` (older transformers lack some)."""
    try:
        # torch.compile wraps the module: its own forward takes whatever the original takes.
        return keyword in inspect.signature(getattr(model, "_orig_mod", model).forward).parameters
    except (TypeError, ValueError):  # a compiled or wrapped forward without a signature
        return False
