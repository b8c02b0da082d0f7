"""Workload sizes as data: each workload class declares one preset per named size.

``--size published`` is the workload as the published results ran it; ``--size tiny`` is the same
code at dimensions a 2-core CPU runs in seconds (the tests run every workload that way). What
differs between the two is data on the class, never a branch on the size's name::

    presets = {
        "published": ImagePreset(batch_size={"train": 128, "eval": 128},
                                 dataset_size=IMAGENET_SIZES, side=224, classes=1000),
        "tiny": ImagePreset(batch_size={"train": 4, "eval": 4},
                            dataset_size={"train": 8, "eval": 8}, side=32, classes=10),
    }

The base class picks ``self.preset = presets[size]``; model and batch builders read its fields.
A workload adds the fields it needs by subclassing :class:`Preset` (a frozen dataclass: every
field without a default must be given, so a preset is complete by construction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelbench.errors import UsageError

#: The named sizes every workload has, the default first.
SIZES = ("published", "tiny")
#: The modes a workload can run in (here, beside SIZES, so option parsing needs no torch).
MODES = ("train", "eval")
#: A decoder (a workload with the generation contract, base.GENERATION) also generates: greedy
#: decoding with a key/value cache, timed as prefill then per-token decode.
GENERATE = "generate"
#: What ``--mode`` takes.
RUN_MODES = (*MODES, GENERATE)
#: A generation case's prompt (or the model's context minus the new tokens, when shorter) and
#: its new tokens, when not given.
DEFAULT_PROMPT_LEN = 512
DEFAULT_NEW_TOKENS = 128


@dataclass(frozen=True)
class Preset:
    """One size of a workload: batch size and samples per epoch, per mode."""

    batch_size: Mapping[str, int]
    dataset_size: Mapping[str, int]

    def __post_init__(self) -> None:
        for name in ("batch_size", "dataset_size"):
            for mode, value in getattr(self, name).items():
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise UsageError(f"preset {name}[{mode!r}] must be a positive integer; "
                                     f"got {value!r}")


def derived_presets(batch_size: Mapping[str, int], dataset_size: Mapping[str, int],
                    tiny_batch_size: Mapping[str, int],
                    tiny_dataset_size: Mapping[str, int]) -> dict[str, Preset]:
    """Presets for a workload written against the older contract, which declares its sizes as
    the class attributes ``default_batch_size`` / ``dataset_size`` (and optionally the ``tiny_``
    ones). Without tiny sizes, ``--size tiny`` runs the published ones."""
    return {
        "published": Preset(dict(batch_size), dict(dataset_size)),
        "tiny": Preset(dict(tiny_batch_size or batch_size), dict(tiny_dataset_size or dataset_size)),
    }


def preset_problems(presets: Mapping[str, Preset], modes: tuple[str, ...]) -> list[str]:
    """What a declared ``presets`` table lacks: a size, or a mode's batch or data set size."""
    problems = [f"presets[{size!r}]" for size in SIZES if size not in presets]
    problems += [f"a Preset at presets[{size!r}] (got {type(preset).__name__})"
                 for size, preset in presets.items() if not isinstance(preset, Preset)]
    for size, preset in presets.items():
        if isinstance(preset, Preset):
            problems += [f"presets[{size!r}].{table}[{mode!r}]" for mode in modes
                         for table in ("batch_size", "dataset_size")
                         if mode not in getattr(preset, table)]
    return problems
