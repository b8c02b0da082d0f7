"""What the launcher a case runs under changes about measuring it.

``measure_case`` asks :func:`current` at each point where a launcher may differ: on its own
(inline or a worker process) nothing changes; as a torchrun rank (``rank.py``) the model is
wrapped for data parallelism, the data seeded per rank, the measured steps held between barriers,
the stop rule settled into a step count every rank agrees on, and a no-sync phase follows. The
rank entry sets it around the work it runs, so the work itself (``run``'s, ``check``'s) needs no
code of its own to run as a rank.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from torch import nn

    from accelbench.engine.case import Case
    from accelbench.measure.loop.step_loop import StepLoop
    from accelbench.measure.loop.stop import StopRule
    from accelbench.measure.loop.timing import Timing
    from accelbench.measure.trackers.region import Tracker

S = TypeVar("S", bound="Surroundings")


class Surroundings:
    """A case measured on its own: every hook leaves the measurement as it is."""

    #: Figures beyond the timed steps that a case measures once it ran (FLOP/s against the
    #: measured peak, the workload's end-of-epoch work).
    extras: bool = True

    def wrap_model(self, model: nn.Module, case: Case) -> nn.Module:
        """The model the steps run (after it is on the device, before compiling)."""
        return model

    def data_seed(self, seed: int) -> int:
        """The seed of this process's batches."""
        return seed

    def epoch_share(self, samples: int) -> int:
        """The samples of an epoch this process works through."""
        return samples

    def trackers(self, own: list[Tracker]) -> list[Tracker]:
        """The trackers around the measured steps, given the case's own (sensors, energy)."""
        return own

    def measure(self, loop: StepLoop, stop: StopRule, warmup_steps: int) -> Timing:
        """Warm up and measure with ``loop``."""
        return loop.run(stop, warmup_steps)


ALONE = Surroundings()
_current: ContextVar[Surroundings] = ContextVar("accelbench_surroundings", default=ALONE)


def current() -> Surroundings:
    return _current.get()


@contextlib.contextmanager
def surrounded_by(surroundings: S) -> Iterator[S]:
    """Cases measured inside this block are measured in ``surroundings``."""
    token = _current.set(surroundings)
    try:
        yield surroundings
    finally:
        _current.reset(token)

