"""A protocol's overall figures across cases, as a run's record stores them
(``RunRecord.protocol_overall``): MLPerf Client's geometric means over its categories, computed
once by results/protocol_summary.mlperf_client_overall when the run's cases are in and read from
the record by every surface (run's notes, ``--json``, compare, export; the history's
``protocol_overall`` table, a shared line's ``overall`` section and the site, which reads those
lines). Named by the catalogue (results/catalogue.py ACROSS_CASES)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.results.validate import Record, dump


@dataclass(frozen=True)
class Overall(Record):
    """One group's overall figures (None where a category is missing): the cases of one model,
    device, precision and compile (the comparability key without the lengths)."""

    label: str
    device: str
    categories: tuple[str, ...] = ()
    #: Catalogue ``mlperf_ttft_geomean_s``: the geometric mean of the categories' mean TTFT.
    mlperf_ttft_geomean_s: float | None = None
    #: Catalogue ``mlperf_token_rate_geomean``: the geometric mean of their 2nd+ token rates.
    mlperf_token_rate_geomean: float | None = None
    missing: tuple[str, ...] = ()
    protocol: str = "mlperf-client"

    @property
    def ttft_s(self) -> float | None:
        return self.mlperf_ttft_geomean_s

    @property
    def token_rate(self) -> float | None:
        return self.mlperf_token_rate_geomean

    @property
    def figures(self) -> dict[str, float | None]:
        """By the catalogue's names."""
        return {"mlperf_ttft_geomean_s": self.mlperf_ttft_geomean_s,
                "mlperf_token_rate_geomean": self.mlperf_token_rate_geomean}

    def to_dict(self) -> dict[str, Any]:
        """By the catalogue's names, as ``--json`` has always shown them."""
        data: dict[str, Any] = dump(self)
        return {"protocol": data["protocol"], "label": self.label, "device": self.device,
                "categories": data["categories"], **self.figures, "missing": data["missing"]}
