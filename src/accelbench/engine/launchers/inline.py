"""The inline launcher: the case in this process (``--isolation none``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.engine.launchers.base import Progress, Work


@dataclass(frozen=True)
class InlineLauncher:
    name = "inline"

    def launch(self, work: Work, item: Any, progress: Progress | None) -> Any:
        return work.inline(item, progress)
