"""``--compile BACKEND[:MODE]`` as data (no torch): which ``torch.compile`` back end and mode a case
asks for, and which modes capture CUDA graphs.

A case's ``compile_backend`` string holds both ("inductor", "inductor:reduce-overhead"), so the
mode is part of the comparability key, the case's label, JSON, bundles and every surface without
a field of its own: a compiled decode with CUDA graphs never reads like one without.

The modes are ``torch.compile``'s own (torch/__init__.py, ``_TorchCompileInductorWrapper``):
``default``; ``reduce-overhead`` (inductor's CUDA graphs: each graph is captured once and replayed,
so a step costs one launch from the host, not one per kernel); ``max-autotune`` (Triton
autotuning, and CUDA graphs on GPUs); ``max-autotune-no-cudagraphs``. gpt-fast compiles its decode
step with ``mode="reduce-overhead", fullgraph=True``: the recipe the published decode rows ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.errors import UsageError

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: The modes in which inductor captures CUDA graphs (where the device has them).
GRAPH_MODES = ("reduce-overhead", "max-autotune")
#: The back end ``--compile`` means with no name, and the one whose modes these are.
INDUCTOR = "inductor"


@dataclass(frozen=True)
class CompileSpec:
    """One ``--compile`` value: ``backend`` "" is not compiled; ``mode`` "" is torch's default."""

    backend: str = ""
    mode: str = ""

    @classmethod
    def parse(cls, value: str) -> CompileSpec:
        """``"inductor"``, ``"inductor:reduce-overhead"``, ``"eager"``; "" or "none" = not
        compiled. A mode other than torch.compile's, or a mode without a back end, is a
        UsageError naming what is allowed."""
        text = value.strip()
        if text in ("", "none"):
            return cls()
        backend, _, mode = text.partition(":")
        backend, mode = backend.strip(), mode.strip()
        if not backend:
            raise UsageError(f"--compile {value!r} names a mode without a back end; write e.g. "
                             f"inductor:{mode or 'reduce-overhead'}")
        if ":" in text and mode not in COMPILE_MODES:
            raise UsageError(f"--compile {value!r}: mode {mode!r} is unknown; allowed: "
                             f"{', '.join(COMPILE_MODES)}")
        return cls(backend, "" if mode == "default" else mode)

    @property
    def text(self) -> str:
        """The stored form: "" (not compiled), "inductor", "inductor:reduce-overhead"."""
        return f"{self.backend}:{self.mode}" if self.mode else self.backend

    @property
    def compiled(self) -> bool:
        return bool(self.backend)

    @property
    def graphs(self) -> bool:
        """Whether the mode asks for CUDA graphs (captured only on a device that has them)."""
        return self.mode in GRAPH_MODES

    def describe(self) -> str:
        """Words for a note: "inductor, reduce-overhead mode" / "not compiled"."""
        if not self.backend:
            return "not compiled"
        return f"{self.backend}, {self.mode or 'default'} mode"


def compile_spec(value: str) -> CompileSpec:
    """:meth:`CompileSpec.parse`, for a stored ``compile_backend`` string."""
    return CompileSpec.parse(value)
