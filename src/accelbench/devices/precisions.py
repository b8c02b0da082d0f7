"""The numeric precisions a case can run in, as plain data (no torch): what option parsing and the
CLI validate and list, what parity's tolerances are; ``devices/numerics.py`` turns a row into
torch dtypes and switches.

| name      | parameters and inputs | fp32 matmul and convolution             | autocast | gradient scaler |
|-----------|-----------------------|-----------------------------------------|----------|-----------------|
| fp32      | float32               | full fp32 (every TF32 switch off)       | no       | no              |
| tf32      | float32               | TF32 where the device has it            | no       | no              |
| bf16      | bfloat16              | full fp32                               | no       | no              |
| fp16      | float16               | full fp32                               | no       | no              |
| amp-bf16  | float32               | full fp32 (ops autocast leaves in fp32) | bfloat16 | no              |
| amp-fp16  | float32               | full fp32 (ops autocast leaves in fp32) | float16  | yes             |
| int8-wo   | bfloat16, weights int8  | full fp32                               | no       | no              |
| int4-wo   | bfloat16, weights 4-bit | full fp32                               | no       | no              |

``int8-wo`` and ``int4-wo`` are weight-only quantization for generation (``--mode generate``):
int8 with one bf16 scale per output channel, int4 in groups of 128 input channels with a bf16
scale and zero point each; activations, norms, embeddings and biases stay bfloat16, and each
product reads its weight packed (``measure/generation/quantize.py``, through PyTorch's own kernels:
``_weight_int8pack_mm``, ``_weight_int4pack_mm``); they are inference precisions, never trained.
``int8-wo-torchao`` and ``int4-wo-torchao`` are the same schemes through torchao's ``quantize_``
and the configs torchao documents for them (``Int8WeightOnlyConfig()``,
``Int4WeightOnlyConfig(group_size=128)`` in tinygemm's layout; measure/generation/torchao_quant.py),
where torchao is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.errors import UsageError


@dataclass(frozen=True)
class Tolerance:
    """Relative tolerances of parity against the reference (README: "Parity tolerances")."""

    passed: float
    drift: float


@dataclass(frozen=True)
class PrecisionSpec:
    name: str
    #: Names of torch dtypes (``torch.<name>``), kept as text so that reading the table needs no
    #: torch.
    param_dtype: str = "float32"
    autocast_dtype: str | None = None
    grad_scaler: bool = False
    #: torch's fp32 matmul precision: "highest" is full fp32, "high" allows TF32.
    matmul: str = "highest"
    tolerance: Tolerance = Tolerance(1e-3, 1e-2)
    #: The relative size of one rounding in this precision (its unit roundoff: 2^-(mantissa bits
    #: + 1)): the perturbation parity's noise-floor run applies to every parameter after every step.
    unit_roundoff: float = 2.0**-24
    #: Weight-only quantization: the bits each linear layer's weight is stored in (8 or 4), and
    #: for 4 bits the group of input channels that shares one scale and zero point; None for the
    #: precisions that store weights as they compute.
    weight_bits: int | None = None
    group_size: int | None = None
    #: Who quantizes: PyTorch's own kernels ("torch"), or torchao's ``quantize_`` ("torchao", an
    #: optional extra: unsupported where it is not installed).
    library: str = "torch"

    @property
    def quantized(self) -> bool:
        """Weight-only quantized: an inference precision (``--mode generate`` only)."""
        return self.weight_bits is not None


PRECISION_SPECS: dict[str, PrecisionSpec] = {
    p.name: p for p in (
        PrecisionSpec("fp32"),
        PrecisionSpec("tf32", matmul="high", tolerance=Tolerance(1e-2, 5e-2), unit_roundoff=2.0**-11),
        PrecisionSpec("bf16", param_dtype="bfloat16", tolerance=Tolerance(5e-2, 2e-1),
                      unit_roundoff=2.0**-8),
        PrecisionSpec("fp16", param_dtype="float16", tolerance=Tolerance(2e-2, 1e-1),
                      unit_roundoff=2.0**-11),
        PrecisionSpec("amp-bf16", autocast_dtype="bfloat16", tolerance=Tolerance(5e-2, 2e-1),
                      unit_roundoff=2.0**-8),
        PrecisionSpec("amp-fp16", autocast_dtype="float16", grad_scaler=True,
                      tolerance=Tolerance(2e-2, 1e-1), unit_roundoff=2.0**-11),
        # Tolerances of check --mode generate's logits (relative to the position's largest):
        # a rounding of the weights to 8 or 4 bits is far coarser than bf16's.
        PrecisionSpec("int8-wo", param_dtype="bfloat16", tolerance=Tolerance(1e-1, 3e-1),
                      unit_roundoff=2.0**-8, weight_bits=8),
        PrecisionSpec("int4-wo", param_dtype="bfloat16", tolerance=Tolerance(2.5e-1, 6e-1),
                      unit_roundoff=2.0**-4, weight_bits=4, group_size=128),
        PrecisionSpec("int8-wo-torchao", param_dtype="bfloat16", tolerance=Tolerance(1e-1, 3e-1),
                      unit_roundoff=2.0**-8, weight_bits=8, library="torchao"),
        PrecisionSpec("int4-wo-torchao", param_dtype="bfloat16", tolerance=Tolerance(2.5e-1, 6e-1),
                      unit_roundoff=2.0**-4, weight_bits=4, group_size=128, library="torchao"),
    )
}
PRECISION_NAMES: tuple[str, ...] = tuple(PRECISION_SPECS)
#: The precisions whose matrix-product rate a roofline measures (and ``roofline --sustained``
#: can hold); autocast runs its products in the autocast dtype.
MATMUL_PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
#: Weight-only quantized precisions: generation only.
QUANTIZED_PRECISIONS: tuple[str, ...] = tuple(n for n, p in PRECISION_SPECS.items() if p.quantized)

#: Parity's views of the table: the tolerances and unit roundoff of each candidate precision.
TOLERANCES: dict[str, Tolerance] = {name: p.tolerance for name, p in PRECISION_SPECS.items()}
UNIT_ROUNDOFF: dict[str, float] = {name: p.unit_roundoff for name, p in PRECISION_SPECS.items()}


def precision_spec(name: str) -> PrecisionSpec:
    """The table's row for ``name``; a UsageError naming the allowed precisions otherwise."""
    try:
        return PRECISION_SPECS[name]
    except KeyError:
        raise UsageError(f"unknown precision {name!r}; allowed: {', '.join(PRECISION_NAMES)}") from None
