"""What ``accelbench check`` takes, without torch (the command line parses it before any heavy
import, so bad usage is reported at once)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelbench.codec import Codec
from accelbench.errors import UsageError
from accelbench.options import RunOptions

#: What the candidate is held against: the CPU in float64 (default) or in float32.
REFERENCES = ("cpu-fp64", "cpu")
DEFAULT_CHECK_STEPS = 50
#: At --size tiny, a first look as quick as a tiny run: ten steps each side, before MNIST's
#: training amplifies rounding past the pass tolerance (about step 26 of 50), so every step and
#: the trained output are judged and no noise-floor run is needed where the device is right.
TINY_CHECK_STEPS = 10


def default_check_steps(size: str) -> int:
    """The training steps a check takes on each side when ``--steps`` is left out."""
    return TINY_CHECK_STEPS if size == "tiny" else DEFAULT_CHECK_STEPS


@dataclass(frozen=True)
class CheckOptions(Codec):
    run: RunOptions
    reference: str = "cpu-fp64"
    steps: int = DEFAULT_CHECK_STEPS

    def __post_init__(self) -> None:
        if self.reference not in REFERENCES:
            raise UsageError(f"--reference {self.reference!r} is unknown; allowed: "
                             f"{', '.join(REFERENCES)}")
        if self.steps <= 0:
            raise UsageError(f"--steps must be positive, got {self.steps}")
        # Parity judges numbers, not speed: the candidate runs with cudnn.benchmark off, and the
        # record's options say so.
        if self.run.cudnn_benchmark:
            object.__setattr__(self, "run", replace(self.run, cudnn_benchmark=False))
