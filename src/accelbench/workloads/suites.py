"""Named sets of workloads that ``accelbench run`` runs when no workload is named."""

from __future__ import annotations

from accelbench.errors import UsageError

SUITES: dict[str, tuple[str, ...]] = {
    # A convolutional network, the VAE and a transformer: six cases that finish within three
    # minutes on a 2-core CPU. The transformer is a BERT-Tiny-shaped model in plain torch, not
    # BERT-base, whose training step at batch 64 x 128 tokens alone takes minutes on such a CPU.
    "quick": ("mnist", "vae", "transformer-small"),
}
DEFAULT_SUITE = "quick"


def suite_workloads(name: str) -> tuple[str, ...]:
    if name == "full":
        from accelbench.workloads import workload_names

        return tuple(workload_names())
    try:
        return SUITES[name]
    except KeyError:
        raise UsageError(
            f"unknown suite {name!r}; allowed: {', '.join([*SUITES, 'full'])}"
        ) from None
