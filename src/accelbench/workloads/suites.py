"""Named sets of workloads that ``accelbench run`` runs when no workload is named."""

from __future__ import annotations

from accelbench.errors import UsageError

SUITES: dict[str, tuple[str, ...]] = {
    # A convolutional network, the VAE, a transformer encoder and a decoder language model: nine
    # cases (the decoder also generates) within about two minutes on a 2-core CPU. The transformer is a
    # BERT-Tiny-shaped model in plain torch, not BERT-base, whose training step at batch 64 x 128
    # tokens alone takes minutes on such a CPU.
    "quick": ("mnist", "vae", "transformer-small", "nanogpt-char"),
}
#: The largest batch a suite runs a workload at, per mode, where its published batch is too slow
#: for the suite (a case is at least 3 warm-up and 5 measured steps): on the 2-core development
#: machine, busy, nanogpt-char's training step took 1.1 s at 8 x 256 characters and 7-10 s at 16,
#: so at its published 64 it would take most of a minute. With its generation case, the suite's
#: nine cases took 121 s and 112 s on that machine, quiet. ``--batch-size`` overrides the cap,
#: and a smaller batch (the tiny size's) is kept.
SUITE_BATCH_CAPS: dict[str, dict[str, dict[str, int]]] = {
    "quick": {"nanogpt-char": {"train": 8, "eval": 8}},
}
#: Modes a suite adds for a workload wherever it runs that workload's evaluation (the default
#: ``train,eval``; not ``--mode train``, and not ``--sustained``, whose long runs time steps):
#: the quick suite's decoder also generates (a 128-character prompt, 128 new ones, batch 1).
SUITE_EXTRA_MODES: dict[str, dict[str, tuple[str, ...]]] = {
    "quick": {"nanogpt-char": ("generate",)},
}
DEFAULT_SUITE = "quick"


def suite_modes(suite: str | None, workload: str, modes: tuple[str, ...],
                sustained: bool = False) -> tuple[str, ...]:
    """The modes ``suite`` runs ``workload`` in, given the run's ``modes``."""
    extra = SUITE_EXTRA_MODES.get(suite or "", {}).get(workload, ())
    if "eval" not in modes or sustained:
        return modes
    return (*modes, *(mode for mode in extra if mode not in modes))


def suite_workloads(name: str) -> tuple[str, ...]:
    if name == "full":
        from accelbench.workloads.registry import known_names

        return tuple(known_names())
    try:
        return SUITES[name]
    except KeyError:
        raise UsageError(
            f"unknown suite {name!r}; allowed: {', '.join([*SUITES, 'full'])}"
        ) from None


def suite_batch_size(suite: str | None, workload: str, mode: str, batch_size: int) -> int:
    """The batch ``suite`` runs ``workload`` at in ``mode``, given the workload's own
    ``batch_size`` (which a run of named workloads, ``suite=None``, keeps)."""
    cap = SUITE_BATCH_CAPS.get(suite or "", {}).get(workload, {}).get(mode)
    return batch_size if cap is None else min(cap, batch_size)
