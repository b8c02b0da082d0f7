"""How a generation case executed (the execution recipe's record, measure/generation/recipe.py):
without torch, so the result records (results/generation.py) hold it as the file keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Execution:
    """The ``execution`` section of a generation result."""

    #: "static" or "dynamic" (Workload.kv_cache_kind); "static, kept" when one cache served
    #: every round.
    kv_cache: str
    #: The case's --compile value ("" not compiled; "inductor:reduce-overhead").
    compile: str
    #: What ran the prompt and what ran each token: "eager", "compiled", "compiled, fullgraph".
    prefill: str
    decode: str
    #: "not asked", "captured", or why not ("none: cpu has no graph capture", "skipped ...").
    cuda_graphs: str
    #: Inductor settings the recipe compiled under (gpt-fast's), "" for torch's defaults.
    settings: str = ""

    @property
    def graphs_captured(self) -> bool:
        return self.cuda_graphs.startswith("captured")

    def to_dict(self) -> dict[str, Any]:
        return {"kv_cache": self.kv_cache, "compile": self.compile, "prefill": self.prefill,
                "decode": self.decode, "cuda_graphs": self.cuda_graphs, "settings": self.settings}
