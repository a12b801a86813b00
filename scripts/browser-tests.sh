#!/usr/bin/env bash
# The browser tests (README "Operator's path"): the Temporal web UI of a dev server, driven by
# headless Chromium through playwright (tests/test_browser.py, marker `browser`). Installs
# Debian's chromium (apt-get; sudo when not root) and the `browser` extra (playwright) when
# they are missing, then runs `pytest -m browser`. No browser download: playwright drives the
# system Chromium. The screenshots land in docs/operator/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q chromium
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import playwright" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,browser]'
fi
.venv/bin/python -m pytest -q -p no:cacheprovider -m browser "$@"
