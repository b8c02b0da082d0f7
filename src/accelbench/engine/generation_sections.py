"""What a generation case's result carries beside its timed figures, assembled once when the
result is made: the protocol's figures (``--protocol``), the weight-only quantization and the
memory the weights take, the tokens' hash and whether it is the fp64 reference's, and MLPerf
Inference's interactive budget where a Llama-3.1-8B-shaped model ran."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from accelbench.devices.precisions import TOLERANCES
from accelbench.engine.case import Case
from accelbench.measure.generation.protocols import interactive_budget, protocol_figures
from accelbench.measure.generation.quantization import Quantization
from accelbench.measure.generation.quantized_layers import tensor_bytes
from accelbench.measure.generation.rounds import GenerationFigures
from accelbench.options import RunOptions
from accelbench.reference.expected_tokens import TokenKey, token_check
from accelbench.workloads.base import Workload
from accelbench.workloads.protocols import protocol_test_for


def generation_sections(case: Case, options: RunOptions, workload: Workload, model: nn.Module,
                        figures: GenerationFigures,
                        quantization: Quantization | None) -> dict[str, Any]:
    """The sections added to ``result.generation`` (each absent where it does not apply)."""
    sections: dict[str, Any] = {"weights_memory_bytes": tensor_bytes(getattr(model, "_orig_mod", model))}
    if quantization is not None:
        sections["quantization"] = quantization.to_dict()
    if options.protocol:
        test = protocol_test_for(options.protocol, workload.context_length(), case.prompt_len,
                                 case.new_tokens)
        if test is not None:
            sections["protocol"] = protocol_figures(options.protocol, test, figures)
    if figures.tokens:
        sections.update(_token_sections(case, options, workload, figures.tokens))
    shape = getattr(workload, "decoder_shape", None)
    budget = interactive_budget(shape() if callable(shape) else None, figures)
    if budget is not None:
        sections["mlperf_interactive"] = budget
    return sections


def _token_sections(case: Case, options: RunOptions, workload: Workload,
                    tokens: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The ``tokens`` section, and its facts flat, as a shared line carries them
    (sharing/build.py TOKEN_FACTS): a reader re-judges the first difference against the margin
    accelbench ships (sharing/plausible.py)."""
    key = TokenKey(case.workload, type(workload).version, options.size, options.seed,
                   case.batch_size, case.prompt_len, case.new_tokens)
    tolerance = TOLERANCES.get(case.precision)
    check = token_check(key, tokens, case.precision, tolerance.passed if tolerance else None)
    sections: dict[str, Any] = {"tokens": check, "tokens_hash": check["hash"]}
    if check["expected_hash"] is not None:
        sections.update(tokens_reference_hash=check["expected_hash"],
                        tokens_match=check["match"] == "exact", tokens_verdict=check["verdict"])
    if check["first_difference"] is not None:
        sections.update(tokens_first_difference=check["first_difference"],
                        tokens_reference_margin=check["reference_margin"])
    return sections
