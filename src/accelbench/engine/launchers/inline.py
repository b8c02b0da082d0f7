"""The inline launcher: the case in this process (``--isolation none``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import Progress

if TYPE_CHECKING:
    from accelbench.engine.work import CaseWork


@dataclass(frozen=True)
class InlineLauncher:
    name = "inline"

    def launch(self, work: CaseWork[Any], item: Any, progress: Progress | None) -> Any:
        return work.inline(item, progress)
