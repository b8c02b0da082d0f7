"""Issue 27, housekeeping: no module's name points where its code does not go.

``probes/engine.py`` (the probes' runner) bore the name of the ``engine`` package it never
imports, and ``workloads/named/named.py`` the name of its own folder; they are ``probes/cells.py``
and ``workloads/named/shared.py`` now. A module may share a package's name only as that
package's face in another layer, which imports it (``cli/scale.py`` runs ``scale``,
``selftest/parity.py`` runs a parity check), or as one of the few named below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import accelbench

ROOT = Path(accelbench.__file__).parent
#: Modules named after a package they cannot import (it sits above them), with why the name holds.
FACES = {
    "data/options.py": "the data layer's own options (DataOptions), below the options package",
    "options/scale.py": "scale's options, which the options layer holds below scale itself",
}


def _top_level_names() -> set[str]:
    return ({path.name for path in ROOT.iterdir() if (path / "__init__.py").exists()}
            | {path.stem for path in ROOT.glob("*.py")}) - {"__init__", "__main__"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def _submodules() -> list[Path]:
    return [path for path in sorted(ROOT.rglob("*.py"))
            if len(path.relative_to(ROOT).parts) > 1 and path.stem != "__init__"]


def test_no_module_is_named_after_its_own_folder() -> None:
    assert [str(path.relative_to(ROOT)) for path in _submodules()
            if path.stem == path.parent.name] == []


def test_a_module_named_after_a_package_imports_it() -> None:
    names = _top_level_names()
    misnamed = []
    for path in _submodules():
        rel = path.relative_to(ROOT).as_posix()
        if path.stem not in names or rel in FACES:
            continue
        target = f"accelbench.{path.stem}"
        if not any(name == target or name.startswith(f"{target}.") for name in _imports(path)):
            misnamed.append(rel)
    assert misnamed == []


def test_the_named_exceptions_still_exist() -> None:
    assert all((ROOT / rel).exists() for rel in FACES)


def test_tests_are_grouped_by_package_and_named_after_what_they_test() -> None:
    """Issue 35: tests live in tests/<package>/ (one folder per package of accelbench, or project/
    for the repository's own files), and no module is named after an issue number (the number
    goes in a docstring)."""
    tests = Path(__file__).resolve().parents[1]
    assert not list(tests.glob("test_*.py")), "a test module outside its package folder"
    folders = {path.parent.name for path in tests.glob("*/test_*.py")}
    assert folders - {"project"} <= _top_level_names(), folders - _top_level_names()
    issue_named = [path.name for path in tests.rglob("test_*.py") if re.search(r"issue\d", path.name)]
    assert not issue_named
