"""``accelbench.bench(model, batch)``: a model object and an example batch as a workload.

The example batch is ``inputs`` or ``(inputs..., target)``; batches of any size are drawn from its
rows (with replacement, seeded), so a sweep over batch sizes works too. The loss is
``loss_fn(model(*inputs), target)``; without ``loss_fn``, cross-entropy for an integer target, mean
squared error for a float one, and the mean square of the output when the batch has no target.

Worker processes cannot see the caller's objects, so the spec (model, batch, loss, optimiser) is
pickled into a private temporary file while the bench call runs; the path rides in each case's
worker spec (``engine/spec.py``), and the worker loads it (``load_shared``) before resolving
``bench:NAME``. That file is written and read only by this machinery, never by loading results.
Anything that cannot be pickled and imported in a fresh process (a lambda, a class defined in a
notebook's ``__main__``) makes bench run inline instead, and says so.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import pickle
import pickletools
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.errors import UsageError
from accelbench.workloads.base import Batch, Workload
from accelbench.workloads.named.images import logits_of
from accelbench.workloads.presets import SIZES, Preset

#: Without ``samples_per_epoch``, an epoch is this many example-sized batches (for the projection).
DEFAULT_EPOCH_BATCHES = 100
DEFAULT_LR = 0.01


@dataclass
class BenchSpec:
    model: nn.Module
    batch: Batch
    loss_fn: Callable[..., torch.Tensor] | None
    #: (optimizer class, keyword arguments) or a callable from parameters to an optimiser.
    optimizer: tuple[type, dict[str, Any]] | Callable[..., torch.optim.Optimizer]
    samples_per_epoch: int


def as_batch(example: Any) -> Batch:
    batch = (example,) if isinstance(example, torch.Tensor) else tuple(example) if isinstance(
        example, list | tuple) else None
    if not batch or not all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in batch):
        raise UsageError("example_batch must be a tensor or a tuple/list of tensors (inputs..., "
                         f"target), each with a batch dimension; got {type(example).__name__}")
    sizes = {t.shape[0] for t in batch}
    if len(sizes) != 1 or 0 in sizes:
        raise UsageError(f"example_batch tensors must share a non-empty first (batch) dimension; "
                         f"got sizes {sorted(sizes)}")
    return tuple(t.detach().cpu() for t in batch)


def optimizer_factory(optimizer: Any) -> tuple[type, dict[str, Any]] | Callable[..., Any]:
    """None (SGD lr 0.01), an optimiser class, an optimiser instance (its class and settings are
    reused for each case's fresh model) or a callable ``f(parameters) -> optimiser``."""
    if optimizer is None:
        return torch.optim.SGD, {"lr": DEFAULT_LR}
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        return optimizer, {}
    if isinstance(optimizer, torch.optim.Optimizer):
        return type(optimizer), dict(optimizer.defaults)
    if callable(optimizer):
        return optimizer
    raise UsageError(f"optimizer must be None, a torch.optim class or instance, or a callable from "
                     f"parameters to an optimiser; got {type(optimizer).__name__}")


def default_loss(output: Any, target: torch.Tensor | None = None) -> torch.Tensor:
    scores = logits_of(output)
    if target is None:
        return scores.float().square().mean()
    if not target.is_floating_point():
        return nn.functional.cross_entropy(scores, target)
    return nn.functional.mse_loss(scores, target)


class ObjectWorkload(Workload):
    """One subclass per bench() call carries its spec."""

    description = "a model object given to accelbench.bench()"
    source = "accelbench.bench(model, example_batch)"
    spec: ClassVar[BenchSpec]

    def build_model(self) -> nn.Module:
        return copy.deepcopy(self.spec.model).cpu()  # a fresh copy: training changes the weights

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        factory = self.spec.optimizer
        if isinstance(factory, tuple):
            cls, settings = factory
            return cls(model.parameters(), **settings)
        return factory(model.parameters())

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        example = self.spec.batch
        rows = example[0].shape[0]

        def make(generator: torch.Generator, size: int) -> Batch:
            index = torch.randint(0, rows, (size,), generator=generator)
            return tuple(t[index] for t in example)
        return synthetic_epoch(make, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        inputs, target = (batch, None) if len(batch) == 1 else (batch[:-1], batch[-1])
        output = model(*inputs)
        loss_fn = self.spec.loss_fn or default_loss
        return loss_fn(output) if target is None else loss_fn(output, target)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return self.training_loss(model, batch)


def spec_version(spec: BenchSpec) -> int:
    """A version from the architecture and batch layout: different models never compare."""
    layout = repr(spec.model) + "".join(f"{tuple(t.shape)}{t.dtype}" for t in spec.batch)
    return int(hashlib.sha1(layout.encode()).hexdigest()[:7], 16)


def object_class(name: str, spec: BenchSpec) -> type[ObjectWorkload]:
    # One size only: the example batch's rows per step, at either --size.
    rows, samples = int(spec.batch[0].shape[0]), spec.samples_per_epoch
    preset = Preset(batch_size={"train": rows, "eval": rows},
                    dataset_size={"train": samples, "eval": samples})
    return type(f"Bench_{name}", (ObjectWorkload,), {
        "name": f"bench:{name}", "spec": spec, "version": spec_version(spec),
        "presets": {size: preset for size in SIZES}})


def why_not_picklable(spec: BenchSpec) -> str | None:
    """None when a worker process can rebuild the spec, else why not."""
    try:
        data = pickle.dumps(spec)
    except Exception as error:
        return f"it cannot be pickled ({type(error).__name__}: {error})"
    for _, argument, _ in pickletools.genops(data):
        if isinstance(argument, str) and (argument == "__main__" or argument.startswith("__main__ ")):
            return ("it uses classes or functions defined in __main__ (a notebook or script), which "
                    "a worker process cannot import")
    return None


#: In the calling process: the pickle file of each bench name shared while its bench call runs.
_shared: dict[str, Path] = {}
#: In a worker: the specs of the files its case spec named.
_loaded: dict[str, BenchSpec] = {}


@contextlib.contextmanager
def shared_with_workers(name: str, spec: BenchSpec) -> Iterator[Path]:
    """Write ``bench:NAME``'s spec to a private file for the length of this block; the specs of
    worker processes started inside it name that file (``shared_file``)."""
    previous = _shared.get(name)
    with tempfile.TemporaryDirectory(prefix="accelbench-bench-") as folder:
        path = Path(folder) / "models.pickle"
        path.write_bytes(pickle.dumps({name: spec}))
        _shared[name] = path
        try:
            yield path
        finally:
            if previous is None:
                _shared.pop(name, None)
            else:
                _shared[name] = previous


def shared_file(workload: str) -> str | None:
    """The file that makes ``workload`` (``bench:NAME``) resolvable in a worker; None for any
    other workload, or a bench model not shared now."""
    path = _shared.get(workload.removeprefix("bench:")) if workload.startswith("bench:") else None
    return str(path) if path is not None else None


def load_shared(path: str) -> None:
    """In a worker: the bench models of ``path`` (a file ``shared_with_workers`` wrote)."""
    _loaded.update(pickle.loads(Path(path).read_bytes()))


def resolve(name: str) -> type[ObjectWorkload]:
    """In a worker: the spec its parent shared; elsewhere a bench name means nothing."""
    specs = _loaded
    if name not in specs:
        raise UsageError(f"bench:{name} is a model object given to accelbench.bench(); it exists "
                         "only inside that Python call")
    return object_class(name, specs[name])


def list_names(pattern: str) -> list[str]:
    return []
