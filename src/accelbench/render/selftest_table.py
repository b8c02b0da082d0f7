"""Selftest results as pass/fail lines (pure functions of CheckResult dicts)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from accelbench.selftest.result import counts

_MARK = {"pass": "[green]PASS[/green]", "fail": "[bold red]FAIL[/bold red]",
         "skip": "[yellow]SKIP[/yellow]", "bounds": "[yellow]BOUNDS ONLY[/yellow]"}


def check_line(check: dict[str, Any]) -> str:
    return (f"{_MARK.get(check['status'], check['status'])} {escape(check['device'])} "
            f"{escape(check['group'])}: {escape(check['name'])} - {escape(check['detail'])}")


def summary_line(summary: dict[str, Any]) -> str:
    """One line: the verdict, each status's count, and the ceiling checks judged against vendor
    figures and against physical bounds only, counted apart (a bounds-only check is no pass)."""
    tally = counts(summary["checks"])  # summaries written before the counts were stored
    status, judged = summary.get("status", tally["status"]), summary.get("judged", tally["judged"])
    if not summary["passed"]:
        verdict = "[bold red]some checks FAILED[/bold red]"
    elif status.get("bounds"):
        verdict = "[yellow]no check failed, but some were judged by physical bounds only[/yellow]"
    else:
        verdict = "[green]all checks passed[/green]"
    bounds = f", {status.get('bounds', 0)} within physical bounds only" if status.get("bounds") else ""
    ceilings = (f"; ceilings: {judged['vendor']} against vendor figures, {judged['bounds_only']} "
                "against bounds only") if judged["vendor"] or judged["bounds_only"] else ""
    return (f"selftest: {verdict} ({status.get('pass', 0)} passed{bounds}, {status.get('fail', 0)} "
            f"failed, {status.get('skip', 0)} skipped{ceilings}) in {summary['wall_time_s']:.0f} s")
