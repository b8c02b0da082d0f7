"""Selftest results as pass/fail lines (pure functions of CheckResult dicts)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

_MARK = {"pass": "[green]PASS[/green]", "fail": "[bold red]FAIL[/bold red]",
         "skip": "[yellow]SKIP[/yellow]"}


def check_line(check: dict[str, Any]) -> str:
    return (f"{_MARK.get(check['status'], check['status'])} {escape(check['device'])} "
            f"{escape(check['group'])}: {escape(check['name'])} - {escape(check['detail'])}")


def summary_line(summary: dict[str, Any]) -> str:
    counts = {status: sum(c["status"] == status for c in summary["checks"])
              for status in ("pass", "fail", "skip")}
    verdict = "[green]all checks passed[/green]" if summary["passed"] \
        else "[bold red]some checks FAILED[/bold red]"
    return (f"selftest: {verdict} ({counts['pass']} passed, {counts['fail']} failed, "
            f"{counts['skip']} skipped) in {summary['wall_time_s']:.0f} s")
