"""Write what is made from the options' one declaration (src/accelbench/options/declared.py):
the option table of docs/run.md, and ``accelbench.run``'s keyword parameters and the "Keyword
Args" list of its docstring (src/accelbench/api.py). tests/options/test_options.py fails when either is
stale: run this after changing an option."""

from __future__ import annotations

from pathlib import Path

from accelbench.options.declared import docstring_lines, markdown_table, signature_lines

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "run.md"
API = ROOT / "src" / "accelbench" / "api.py"
TABLE_HEAD = "| option | Python | meaning |"
SIGNATURE = ("    # BEGIN keywords: written by scripts/option_tables.py from options/declared.py\n",
             "    # END keywords\n")
DOCSTRING = ("    Keyword Args:\n", '    """\n')


def _between(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the line ``start`` and the next ``end`` replaced."""
    begin = text.index(start) + len(start)
    return text[:begin] + body + text[text.index(end, begin):]


def api_source(text: str) -> str:
    text = _between(text, *SIGNATURE, "\n".join(signature_lines()) + "\n")
    return _between(text, *DOCSTRING, "\n".join(docstring_lines("        ")) + "\n")


def page_text(text: str) -> str:
    start = text.index(TABLE_HEAD)
    end = text.find("\n\n", start)
    return text[:start] + markdown_table() + (text[end:] if end >= 0 else "\n")


def main() -> None:
    PAGE.write_text(page_text(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    API.write_text(api_source(API.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
