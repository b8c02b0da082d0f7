"""The documentation a newcomer scans (issue 36; the API page, issue 35): every page of docs/ has
headings and an example, inline code shows no stray backslash, the home page says what the README
says, and the API page documents every name of ``accelbench.__all__``. Plain file reads: fast."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import accelbench

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return FENCE.sub("", text)


def test_the_docs_are_found() -> None:
    assert len(PAGES) >= 20, PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_every_page_has_headings_and_a_code_block(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    headings = re.findall(r"^#{1,6} \S", _prose(text), re.M)
    assert len(headings) >= 2, f"{page.name}: {len(headings)} heading(s)"
    assert FENCE.search(text), f"{page.name}: no code block"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda page: page.name
                         if page.parent == ROOT else str(page.relative_to(DOCS)))
def test_no_escaped_pipe_inside_inline_code(page: Path) -> None:
    # In a Markdown table `a\|b` renders its backslash: write `{a,b}` or words instead.
    spans = re.findall(r"`[^`\n]*`", _prose(page.read_text(encoding="utf-8")))
    assert not [span for span in spans if "\\|" in span]


def test_the_home_page_is_the_readme() -> None:
    # docs/index.md is README.md with its links made relative to docs/.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert (DOCS / "index.md").read_text(encoding="utf-8") == readme.replace("](docs/", "](")


def test_the_api_page_documents_every_exported_name() -> None:
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    lazy = vars(accelbench)["_LAZY"]
    for name in accelbench.__all__:
        if name != "__version__":
            assert f"{lazy[name]}.{name}" in documented, name


def test_the_generation_page_has_a_heading_for_each_feature_a_newcomer_looks_for() -> None:
    headings = re.findall(r"^#{2,3} (.*)$", _prose((DOCS / "generate.md").read_text(encoding="utf-8")),
                          re.M)
    for feature in ("`--mode generate`", "`--stream`", "`--protocol`", "Quantized decode",
                    "`compare --published`", "execution recipe"):
        assert any(feature in heading for heading in headings), (feature, headings)


def test_the_readme_names_every_tool_the_test_command_runs() -> None:
    # README "What the test command does" lists scripts/test.sh's steps: a tool added there (a type
    # checker, say) must be named here too.
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    tools = set(re.findall(r"\.venv/bin/(?:python -m )?([\w-]+)", script)) - {"python", "pip"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## What the test command does"):]
    section = section[:section.index("\n## ", 1)]
    assert tools >= {"lint-imports", "ruff", "mkdocs", "pytest"}, tools
    assert not [tool for tool in tools if f"`{tool}" not in section], (tools, section)


# Code blocks allowed past the width, each with why (page, a text the wide line holds).
WIDE_ON_PURPOSE = {
    # the CLI's error message is one line by design (a terminal wraps it); pasted as printed
    ("faults.md", "accelbench: error: unknown workload 'mnsit'"),
    # tested verbatim by tests/project (the workload snippet a reader copies)
    ("your-own-model.md", ""),
    # a table row from a 200-step inductor compile run (a record: not re-run here, and a
    # table row cannot be wrapped without changing what was printed)
    ("sustained.md", " mnist    train cpu    fp32 compile:inductor"),
}


def test_no_code_block_line_is_wider_than_100_characters() -> None:
    wide = []
    for page in PAGES:
        relative = page.relative_to(DOCS)
        if relative.parts[0] == "hardware":
            continue
        for block in FENCE.findall(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                if len(line) <= 100:
                    continue
                if any(str(relative) == name and text in line for name, text in WIDE_ON_PURPOSE):
                    continue
                wide.append(f"{relative}: {len(line)}: {line[:60]}")
    assert not wide, "\n".join(wide)
