"""A generation row's decode diagnosis as every comparing surface reads it, and the two rules that
follow from it.

What it is, read from what the result stored and never judged again: the bound the decode hit
(``generation.decode_bound``, measure/generation/decode_bytes.judge_decode: a TPOT over 3x the
bandwidth floor is overhead-bound, the host's launches; else bandwidth-bound), its words, the floor
and TPOT / floor (catalogue figures), the host CPU that drove it, how it executed
(``generation.execution``, measure/generation/recipe.py: cache, compile mode, CUDA graphs) and the
kernel of a quantized row (``generation.quantization.kernel``). A result keeps it in its generation
section; a shared line in its ``decode`` section and its figures (sharing/build.py).

The rules:

- host: an overhead-bound decode's TPOT is its host's launch rate (Python, the dispatcher, one
  launch per kernel), so it is compared only with rows driven by the same host CPU model, whatever
  their bound; two rows that are not overhead-bound are compared across hosts (``host_mismatch``);
- published: the field's published PyTorch decode rows (gpt-fast, torchao, PyTorch CI) compiled
  the decode step with CUDA graphs and ran int8 as inductor's fused dequantise-and-multiply; a row
  that was eager, captured no graphs, was overhead-bound or ran PyTorch's reference int8 kernel is
  not that recipe, and ``unlike_published`` says why in words set beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from accelbench.results import CaseResult

#: The stored values of ``generation.decode_bound`` (measure/generation/decode_bytes.py OVERHEAD,
#: BANDWIDTH; a test holds them equal: this module stays free of torch).
OVERHEAD, BANDWIDTH = "overhead", "bandwidth"
#: PyTorch's int8 weight-only kernel (devices/quantized.py): the reference, not the fused form the
#: published compiled int8 rows ran.
REFERENCE_INT8 = "_weight_int8pack_mm"
#: The longest text a diagnosis keeps from a shared line (sharing/bundle.MAX_STRING).
_LONGEST = 200
_EXECUTION = ("kv_cache", "compile", "prefill", "decode", "cuda_graphs", "settings")


def _text(value: Any) -> str:
    return value if isinstance(value, str) and len(value) <= _LONGEST else ""


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value == value
    return float(value) if ok else None


def cpu_key(name: str) -> str:
    """Host CPU models compare case- and space-insensitively."""
    return " ".join(name.split()).casefold()


@dataclass(frozen=True, slots=True)
class DecodeDiagnosis:
    """One generation row's bound, host CPU, execution and kernel; "" where not recorded (a result
    or line from before they were kept)."""

    bound: str = ""
    #: "overhead-bound (host launches, <CPU>): 12x the bandwidth floor" / "bandwidth-bound: 59% of
    #: measured bandwidth", as the result stored them.
    bound_words: str = ""
    floor_s: float | None = None
    floor_ratio: float | None = None
    host_cpu: str = ""
    #: The execution section's fields (kv_cache, compile, prefill, decode, cuda_graphs, settings).
    execution: tuple[tuple[str, str], ...] = ()
    kernel: str = ""

    @classmethod
    def of_generation(cls, generation: Mapping[str, Any] | None, figures: Mapping[str, Any] | None = None,
                      ) -> DecodeDiagnosis | None:
        """From a shared line's decode section, with the line's figures for the floor (a case's
        typed section: ``of_case``); None where nothing of it was recorded."""
        if not isinstance(generation, Mapping):
            return None
        numbers = figures if figures is not None else generation
        execution = generation.get("execution")
        quantization = generation.get("quantization")
        kernel = generation.get("kernel", quantization.get("kernel") if isinstance(quantization, Mapping)
                                else None)
        bound = _text(generation.get("decode_bound"))
        bound = bound if bound in (OVERHEAD, BANDWIDTH) else ""
        found = cls(bound, _text(generation.get("decode_bound_words")),
                    _number(numbers.get("decode_floor_s")), _number(numbers.get("decode_floor_ratio")),
                    _text(generation.get("host_cpu")),
                    tuple((name, _text(execution.get(name))) for name in _EXECUTION)
                    if isinstance(execution, Mapping) else (), _text(kernel))
        return found if found != cls() else None

    @classmethod
    def of_case(cls, case: CaseResult) -> DecodeDiagnosis | None:
        """A finished generation case's diagnosis as its result stored it."""
        generation = case.generation if case.mode == "generate" and case.ok else None
        if generation is None:
            return None
        execution = generation.execution
        bound = generation.decode_bound if generation.decode_bound in (OVERHEAD, BANDWIDTH) else ""
        found = cls(bound or "", _text(generation.decode_bound_words),
                    _number(generation.decode_floor_s), _number(generation.decode_floor_ratio),
                    _text(generation.host_cpu),
                    tuple((name, _text(getattr(execution, name))) for name in _EXECUTION)
                    if execution is not None else (),
                    _text(generation.quantization.kernel) if generation.quantization else "")
        return found if found != cls() else None

    @property
    def recorded_execution(self) -> dict[str, str]:
        return dict(self.execution)

    @property
    def overhead_bound(self) -> bool:
        return self.bound == OVERHEAD

    @property
    def compiled(self) -> bool:
        """Whether the decode step ran compiled, as the execution recorded it."""
        return self.recorded_execution.get("decode", "").startswith("compiled")

    @property
    def graphs(self) -> str:
        """What the execution says of CUDA graphs ("captured (CUDA graphs)", "not asked", ...)."""
        return self.recorded_execution.get("cuda_graphs", "")

    @property
    def graphs_captured(self) -> bool:
        return self.graphs.startswith("captured")

    @property
    def reference_int8(self) -> bool:
        return REFERENCE_INT8 in self.kernel

    def recipe_words(self) -> str:
        """The compile mode and graphs in a few words: "eager", "inductor:reduce-overhead, CUDA
        graphs captured", "inductor, no CUDA graphs (not asked)"; "" where not recorded."""
        if not self.execution:
            return ""
        if not self.compiled:
            return "eager"
        compiled = self.recorded_execution.get("compile", "") or "compiled"
        graphs = "CUDA graphs captured" if self.graphs_captured else f"no CUDA graphs ({self.graphs})"
        return f"{compiled}, {graphs}"

    def short_bound(self) -> str:
        """A table cell: "bw-bound 59%" / "overhead-bound (<CPU>)"; "" where not judged."""
        if self.bound == BANDWIDTH and self.floor_ratio:
            return f"bw-bound {1 / self.floor_ratio:.0%}"
        if self.overhead_bound:
            return f"overhead-bound ({self.host_cpu or 'host CPU not recorded'})"
        return ""

    def unlike_published(self) -> list[str]:
        """Why this row is not the published compiled/CUDA-graph recipe (empty when it is)."""
        if not self.execution:
            return ["its execution was not recorded (a result from before the recipe was kept)"]
        reasons = []
        if not self.compiled:
            reasons.append("eager decode (not compiled)")
        elif not self.graphs_captured:
            reasons.append(f"compiled without CUDA graphs ({self.graphs or 'not recorded'})")
        if self.overhead_bound:
            reasons.append(self.bound_words or "overhead-bound (host launches)")
        if self.reference_int8:
            reasons.append(f"PyTorch's reference int8 kernel ({self.kernel}), not the fused "
                           "dequantise-and-multiply the published int8 rows ran")
        return reasons

    def to_dict(self) -> dict[str, Any]:
        """The JSON form every --json view carries (a line's ``decode`` section leaves the floor to
        its figures)."""
        return {"decode_bound": self.bound or None, "decode_bound_words": self.bound_words or None,
                "decode_floor_s": self.floor_s, "decode_floor_ratio": self.floor_ratio,
                "host_cpu": self.host_cpu or None,
                "execution": self.recorded_execution or None, "kernel": self.kernel or None,
                "recipe": self.recipe_words() or None}

    def line_section(self) -> dict[str, Any]:
        """What a shared line carries beside its figures (decode_floor_s, decode_floor_ratio)."""
        section: dict[str, Any] = {"decode_bound": self.bound, "decode_bound_words": self.bound_words,
                                   "host_cpu": self.host_cpu, "execution": self.recorded_execution,
                                   "kernel": self.kernel}
        return {name: value for name, value in section.items() if value}


def host_mismatch(mine: DecodeDiagnosis | None, theirs: DecodeDiagnosis | None) -> str:
    """Why two decode rows are not compared: one is overhead-bound and their host CPU models differ;
    "" when they may be compared (neither overhead-bound, the same host CPU, or either not judged)."""
    if mine is None or theirs is None or not (mine.overhead_bound or theirs.overhead_bound):
        return ""
    if cpu_key(mine.host_cpu) == cpu_key(theirs.host_cpu):
        return ""
    return (f"overhead-bound decode (host launches) driven by another host CPU: "
            f"{theirs.host_cpu or 'not recorded'} against {mine.host_cpu or 'not recorded'}")


def bound_class(diagnosis: DecodeDiagnosis | None) -> str:
    """What rows are pooled by: overhead-bound rows per host CPU model, bandwidth-bound rows
    together, rows not judged together."""
    if diagnosis is None or not diagnosis.bound:
        return ""
    return f"{OVERHEAD}:{cpu_key(diagnosis.host_cpu)}" if diagnosis.overhead_bound else diagnosis.bound


def _most(recipes: Counter[str], rows: int) -> str:
    """The most common recipe (a tie: the first in text order), with its count where not every one
    of the ``rows`` judged had it."""
    counts = Counter({recipe: count for recipe, count in recipes.items() if recipe})
    if not counts:
        return ""
    top, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
    return top if count == rows else f"{top} ({count} of {sum(counts.values())})"


def group_words(diagnoses: Sequence[DecodeDiagnosis | None]) -> tuple[str, str]:
    """(recipe, bound) of a group of rows of one bound class (``pooled_words`` of its rows)."""
    known = [d for d in diagnoses if d is not None]
    ratios = [d.floor_ratio for d in known if d.bound and d.floor_ratio]
    host = next((d.host_cpu for d in known if d.bound), "")
    return pooled_words(Counter(d.recipe_words() for d in known), len(known),
                        {d.bound for d in known if d.bound}, median(ratios) if ratios else None, host)


def pooled_words(recipes: Counter[str], rows: int, bounds: set[str], ratio: float | None,
                 host: str) -> tuple[str, str]:
    """(recipe, bound) of a group of rows of one bound class, from what they hold together (what a
    Parquet shard query reduces them to, sharing/query.py): the recipes of the ``rows`` judged
    counted, their bounds, the median floor ratio of the rows with a bound and the host CPU of one
    of them. The most common recipe (with its count where they differ) and the bound with the
    median over the rows ("bandwidth-bound: median 59% of measured bandwidth", "overhead-bound
    (host launches, <CPU>): median 12x the bandwidth floor"); "" where none was recorded."""
    recipe = _most(recipes, rows)
    if len(bounds) != 1 or not ratio:
        return recipe, ""
    if bounds == {BANDWIDTH}:
        return recipe, f"bandwidth-bound: median {1 / ratio:.0%} of measured bandwidth"
    return recipe, (f"overhead-bound (host launches, {host or 'host CPU not recorded'}): median {ratio:.0f}x "
                    "the bandwidth floor")
