#!/usr/bin/env bash
# Stop the embedded Temporal dev server started by temporal-dev/start.sh.
# Usage: temporal-dev/stop.sh [--data-dir DIR] [--timeout 10]
# Run with the project's venv active (or PYTHON=/path/to/venv/bin/python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python3}" -m toolnexus_temporal.cli.devserver stop "$@"
