"""Write the figure catalogue's table into docs/figures.md from results/catalogue.py (the one
definition); tests/results/test_one_figure.py fails when the page and the code disagree."""

from __future__ import annotations

from pathlib import Path

from accelbench.results.catalogue import markdown_table

PAGE = Path(__file__).resolve().parent.parent / "docs" / "figures.md"


def main() -> None:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("| figure | unit | statistic |")
    end = text.find("\n\n", start)
    PAGE.write_text(text[:start] + markdown_table() + (text[end:] if end >= 0 else "\n"), encoding="utf-8")


if __name__ == "__main__":
    main()
