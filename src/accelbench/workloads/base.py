"""The workload contract, and ``@register``, by which a workload joins the registry where it is
defined (workloads/registry.py; names are resolved by workloads/catalogue.py).

A workload says what to build and how one step goes; it never times itself (the runner does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn

from accelbench.data.loader import epoch_batches, real_data_dir
from accelbench.data.options import DataOptions
from accelbench.errors import UsageError
from accelbench.workloads import registry
from accelbench.workloads.presets import MODES, SIZES, Preset, derived_presets, preset_problems

Batch = tuple[torch.Tensor, ...]


class Workload(ABC):
    """One model with its data, loss and optimiser, at a size.

    Subclasses set the class attributes and implement the abstract methods. Sizes are data:
    ``presets`` maps each name in SIZES to a :class:`Preset` (``"published"``, the default, as the
    reports ran it; ``"tiny"``, what tests run on CPU in seconds), and ``self.preset`` is the one
    chosen (see ``presets.py``).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    source: ClassVar[str] = ""
    #: Where the model's weights come from: RANDOM_WEIGHTS (a seed or a config; every built-in),
    #: or the checkpoint folder an ``hf:FOLDER`` model is loaded from.
    weights_source: ClassVar[str] = "random"
    #: Bump when the model, data or step changes: results of different versions never compare.
    version: ClassVar[int] = 1
    modes: ClassVar[tuple[str, ...]] = MODES
    input_shape: ClassVar[tuple[int, ...]] = ()
    #: One Preset per name in SIZES.
    presets: ClassVar[Mapping[str, Preset]] = {}
    #: The older contract, for workloads that declare no presets: sizes per mode, from which
    #: presets are derived (``presets.derived_presets``).
    default_batch_size: ClassVar[dict[str, int]] = {}
    dataset_size: ClassVar[dict[str, int]] = {}
    tiny_batch_size: ClassVar[dict[str, int]] = {}
    tiny_dataset_size: ClassVar[dict[str, int]] = {}
    data_kinds: ClassVar[tuple[str, ...]] = ("synthetic",)

    def __init__(self, size: str = "published") -> None:
        if size not in SIZES:
            raise UsageError(f"unknown workload size {size!r}; allowed: {', '.join(SIZES)}")
        self.size = size
        self.preset: Preset = self.size_presets()[size]

    @classmethod
    def size_presets(cls) -> Mapping[str, Preset]:
        """The declared presets, or those derived from the older contract's attributes."""
        return cls.presets or derived_presets(cls.default_batch_size, cls.dataset_size,
                                              cls.tiny_batch_size, cls.tiny_dataset_size)

    # --- facts -----------------------------------------------------------------------------
    def batch_size(self, mode: str) -> int:
        return self._per_mode(self.preset.batch_size, mode, "batch_size")

    def samples_per_epoch(self, mode: str) -> int:
        return self._per_mode(self.preset.dataset_size, mode, "dataset_size")

    def _per_mode(self, table: Mapping[str, int], mode: str, what: str) -> int:
        if mode not in table:
            raise WorkloadContractError(f"workload {self.name!r} declares no {what} for mode "
                                        f"{mode!r} at size {self.size!r}")
        return table[mode]

    def check_data(self, mode: str, options: DataOptions) -> None:
        """Raise UsageError before any case runs when ``options`` cannot give this mode's data
        (real data: ``check_real_data`` on the folder the run reads)."""
        if options.kind not in self.data_kinds:
            raise UsageError(f"workload {self.name!r} has no {options.kind} data; allowed: "
                             f"{', '.join(self.data_kinds)}")
        folder = real_data_dir(options)
        if folder is not None:
            self.check_real_data(folder, mode)

    # --- real data (a workload whose data_kinds holds "real") ----------------------------------
    def real_data(self, folder: Path, split: str) -> tuple[torch.Tensor, ...]:
        """The real data set's tensors of ``split`` ("train" or "eval") read from ``folder``: the
        one hook a workload with real data implements (``epoch`` and ``check_real_data`` use it)."""
        raise WorkloadContractError(f"workload {self.name!r} reads no real data")

    def check_real_data(self, folder: Path, mode: str) -> None:
        """Raise UsageError where ``folder`` cannot give ``mode``'s real data: by reading it
        (a workload with a cheaper check, or one that needs more splits, overrides this)."""
        self.real_data(folder, mode)

    def epoch(self, split: str, batch_size: int, options: DataOptions,
              synthetic: Callable[[torch.Generator, int], Batch], shuffle: bool | None = None,
              seed_offset: int = 0) -> Iterable[Batch]:
        """One epoch of ``split``: ``real_data``'s tensors where the run reads real data, else
        the preset's number of samples made by ``synthetic`` (data/loader.epoch_batches);
        shuffled when training unless ``shuffle`` says otherwise."""
        return epoch_batches(options, batch_size, real=lambda folder: self.real_data(folder, split),
                             synthetic=synthetic, dataset_size=self.samples_per_epoch(split),
                             shuffle=split == "train" if shuffle is None else shuffle,
                             seed_offset=seed_offset)

    def unavailable_reason(self) -> str | None:
        """None when the workload can run here, else why not and how to fix it."""
        return None

    # --- what to run -----------------------------------------------------------------------
    @abstractmethod
    def build_model(self) -> nn.Module:
        """A freshly initialised model on the CPU (the runner moves it)."""

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        raise NotImplementedError(f"workload {self.name!r} has no training mode")

    @abstractmethod
    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        """One epoch of CPU batches; iterating again gives the next epoch."""

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """The loss of one training step (the runner does zero_grad, backward and the step)."""
        raise NotImplementedError(f"workload {self.name!r} has no training mode")

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        raise NotImplementedError(f"workload {self.name!r} has no evaluation mode")

    def end_of_epoch(self, model: nn.Module, device: str, options: DataOptions) -> dict[str, float]:
        """Work that belongs to every training epoch after its steps (e.g. SimCLR's kNN
        evaluation). It is timed as part of the epoch; the metrics it returns are reported."""
        return {}

    def to_device(self, batch: Batch, device: str, non_blocking: bool = False) -> Batch:
        return tuple(t.to(device, non_blocking=non_blocking) for t in batch)

    # --- what a sample is ------------------------------------------------------------------
    def tokens_per_sample(self, mode: str) -> int | None:
        """Tokens one sample of ``mode`` carries (a language model's sequence length), so that
        samples/s reads as tokens/s and FLOPs per sample as FLOPs per token; None when a sample
        is not tokens."""
        return None

    def count_parameters(self, model: nn.Module) -> int:
        """The parameter count ``list`` shows: every parameter once (tied weights once). A
        workload whose published count leaves some out (nanoGPT does not count position
        embeddings) overrides this to match it."""
        return sum(p.numel() for p in model.parameters())

    # --- generation (optional) -------------------------------------------------------------
    # A workload that defines every method in GENERATION can be decoded greedily with a
    # key/value cache: the engine (never the workload) times the prefill and each decode step.
    # Token tensors are int64 on the model's device; logits are (B, vocab), one row a sequence.
    def context_length(self) -> int:
        """The longest sequence the model takes: prompt plus new tokens must fit in it."""
        raise NotImplementedError(f"workload {self.name!r} does not generate")

    def make_prompt(self, batch_size: int, prompt_len: int, seed: int) -> torch.Tensor:
        """Prompt token ids (batch_size, prompt_len) on the CPU, the same for the same seed."""
        raise NotImplementedError(f"workload {self.name!r} does not generate")

    def prefill(self, model: nn.Module, prompt: torch.Tensor,
                max_len: int) -> tuple[torch.Tensor, object]:
        """Run the prompt (B, P) through ``model`` into a fresh cache with room for ``max_len``
        positions in all; (the logits of the prompt's last position (B, vocab), the cache)."""
        raise NotImplementedError(f"workload {self.name!r} does not generate")

    def decode_step(self, model: nn.Module, tokens: torch.Tensor,
                    cache: object) -> tuple[torch.Tensor, object]:
        """One new token per sequence (B,) at the cache's next position; (its logits (B, vocab),
        the updated cache). A static cache may be updated in place and returned."""
        raise NotImplementedError(f"workload {self.name!r} does not generate")

    def kv_cache_bytes(self, batch_size: int, max_len: int, dtype: torch.dtype) -> int:
        """Bytes of the cache that prefill allocates for ``batch_size`` sequences of ``max_len``
        positions whose keys and values are ``dtype``: what every decode step reads besides the
        weights."""
        raise NotImplementedError(f"workload {self.name!r} does not generate")

    #: How the cache holds positions: "static" (allocated for the case's whole length and written
    #: in place, as gpt-fast's and transformers' ``StaticCache``: no shape grows, which CUDA
    #: graphs need) or "dynamic" (grows by a position a token, transformers' default).
    kv_cache_kind: ClassVar[str] = "dynamic"

    def keep_cache(self, model: nn.Module) -> None:
        """Reuse one cache for every generation of ``model`` from now on (its tensors keep their
        addresses, which a captured CUDA graph replays). A workload with a static cache that can
        be kept overrides it; others raise NotImplementedError (the case: unsupported)."""
        raise NotImplementedError(
            f"{self.name!r} generates with a {self.kv_cache_kind} key/value cache: CUDA graphs "
            "replay fixed shapes and addresses, which need a static cache kept across tokens")


class Noise(nn.Module):
    """The source of a model's own random noise (e.g. a VAE's reparameterisation).

    Models call ``self.noise.randn_like(t)`` instead of ``torch.randn_like(t)``: normally the
    same thing, but a parity check sets ``generator`` so both sides draw identical noise on the
    CPU whatever device they run on.
    """

    def __init__(self) -> None:
        super().__init__()
        self.generator: torch.Generator | None = None

    def randn_like(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.generator is None:
            return torch.randn_like(tensor)
        noise = torch.randn(tensor.shape, generator=self.generator, dtype=torch.float64)
        return noise.to(device=tensor.device, dtype=tensor.dtype)


#: A workload whose weights are random (drawn from a seed, or a config's initialisation).
RANDOM_WEIGHTS = "random"

#: What every workload defines, and what each mode it declares needs on top.
REQUIRED = ("build_model", "make_batches")
REQUIRED_BY_MODE = {"train": ("make_optimizer", "training_loss"), "eval": ("eval_step",)}
#: What a workload defines to generate (the generation contract; see Workload.prefill).
GENERATION = ("context_length", "make_prompt", "prefill", "decode_step", "kv_cache_bytes")


class WorkloadContractError(UsageError, TypeError):
    """A workload class breaks the contract: a programming error, reported before anything runs
    (never as a case status such as "unsupported")."""


def _undefined(cls: type[Workload], method: str) -> bool:
    """True when ``cls`` does not define ``method`` itself or through a subclass of Workload."""
    found = getattr(cls, method, None)
    return (found is None or getattr(found, "__isabstractmethod__", False)
            or found is getattr(Workload, method, None))


def generates(cls: type[Workload]) -> bool:
    """True when ``cls`` defines every method of the generation contract."""
    return not any(_undefined(cls, method) for method in GENERATION)


def check_contract(cls: type) -> None:
    """Raise WorkloadContractError naming the class and every method it lacks for its modes."""
    if not isinstance(cls, type) or not issubclass(cls, Workload):
        raise WorkloadContractError(f"@register decorates a subclass of accelbench.Workload, "
                                    f"not {cls!r}")
    if not cls.name:
        raise WorkloadContractError(f"workload class {cls.__name__} has no name (set name = '...')")
    bad_modes = [m for m in cls.modes if m not in MODES]
    if bad_modes:
        raise WorkloadContractError(f"workload {cls.name!r} has unknown modes {bad_modes}; "
                                    f"allowed: {MODES}")
    unknown = [size for size in cls.presets if size not in SIZES]
    if unknown:
        raise WorkloadContractError(f"workload class {cls.__name__} ({cls.name!r}) has presets for "
                                    f"unknown sizes {unknown}; allowed: {', '.join(SIZES)}")
    missing = [m for m in REQUIRED if _undefined(cls, m)]
    for mode in cls.modes:
        missing += [f"{m} (for mode {mode!r})" for m in REQUIRED_BY_MODE[mode] if _undefined(cls, m)]
    partial = [m for m in GENERATION if _undefined(cls, m)]
    if len(partial) < len(GENERATION):  # it began the generation contract: all of it, then
        missing += [f"{m} (to generate)" for m in partial]
    if cls.presets:
        missing += preset_problems(cls.presets, cls.modes)
    if missing:
        raise WorkloadContractError(f"workload class {cls.__name__} ({cls.name!r}) does not define "
                                    f"{', '.join(missing)}")


def register(cls: type[Workload]) -> type[Workload]:
    """Class decorator: ``@register`` adds a workload to the registry under ``cls.name``, after
    checking that it defines every method its modes need."""
    check_contract(cls)
    builtin = registry.BUILTIN.get(cls.name)
    # Built-ins load one module at a time: a class of another module under a built-in's name would
    # be replaced whenever that module loads, so a parent and its workers could differ.
    if builtin is not None and cls.__module__ != builtin:
        raise WorkloadContractError(f"workload class {cls.__name__} takes the name {cls.name!r} of a "
                                    "built-in workload; choose another name")
    return registry.add(cls)
