"""``probe``'s options, validated when built (torch-free: the features themselves are chosen
once the command runs, since the feature table imports torch)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.bounds import MOST_SECONDS, check_number
from accelbench.codec import Codec
from accelbench.options import DEFAULT_CASE_TIMEOUT_S, ISOLATIONS, _check_choice, _check_flag


@dataclass(frozen=True)
class ProbeOptions(Codec):
    #: Which devices (``--device``): all, a kind, or one device.
    device: str = "all"
    #: ``--feature`` wildcards; none: every feature.
    feature_patterns: tuple[str, ...] = ()
    skip_compile: bool = False
    #: The user's feature files, loaded in this process and again in each worker.
    feature_files: tuple[str, ...] = ()
    isolation: str = "process"
    case_timeout: float = DEFAULT_CASE_TIMEOUT_S
    #: Tracebacks of failing probes to stderr (--debug).
    debug: bool = False

    def __post_init__(self) -> None:
        if self.isolation is None:  # the flag left out (the shared flag's default is None)
            object.__setattr__(self, "isolation", "process")
        _check_choice("--isolation", self.isolation, ISOLATIONS)
        check_number("--case-timeout", self.case_timeout, whole=False, zero_ok=False,
                     most=MOST_SECONDS)
        for flag, switch in (("--skip-compile", self.skip_compile), ("--debug", self.debug)):
            _check_flag(flag, switch)
