#!/usr/bin/env bash
# The README's test command: install accelbench with its test extras into .venv, then run the tests.
# Works on a fresh machine: it creates the virtual environment, and (as root, where Debian's apt is
# available) installs the headless Chromium the HTML-report test drives.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,transformers]'

if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the browser test of the HTML report will skip"
fi

# The layering is a contract (pyproject.toml [tool.importlinter]): an import that runs back up fails.
.venv/bin/lint-imports --no-cache
# Style: the project is ruff-clean (pyproject.toml [tool.ruff]), and CI keeps it so.
.venv/bin/ruff check --output-format concise .
# Types: mypy over src/accelbench (pyproject.toml [tool.mypy]) reports no error (~35 s cold, a few
# seconds with its cache in .mypy_cache/).
.venv/bin/mypy
# The documentation site (mkdocs.yml, docs/): a broken link or a page left out fails the build.
if ! docs_log=$(NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)" 2>&1); then
  echo "$docs_log" | grep -v '^INFO'
  echo "mkdocs build --strict failed"
  exit 1
fi

exec .venv/bin/python -m pytest -q "$@"
