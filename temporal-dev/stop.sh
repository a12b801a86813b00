#!/usr/bin/env bash
# Stop the embedded Temporal dev server started by temporal-dev/start.sh: `tnx server stop`
# (SIGTERM, then SIGKILL). Usage: temporal-dev/stop.sh [--data-dir DIR] [--timeout 10].
# Run with the project's venv active (`tnx` on PATH), or PYTHON=/path/to/venv/bin/python.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -n "${PYTHON:-}" ]; then
  exec "$PYTHON" -m toolnexus_temporal.cli server stop "$@"
fi
exec tnx server stop "$@"
