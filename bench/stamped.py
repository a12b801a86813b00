"""Print (and write) a one-off measurement's figures as JSON with what it is, when, at which
commit and by which command: the small scripts' results (``bench.spaced``,
``bench.replay_cost``) that the docs cite."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def emit(what: str, module: str, figures: dict[str, Any]) -> None:
    """Print ``figures`` stamped with ``what``, the time (UTC), the short commit and the
    command (``python -m {module} ARGS``); write them to ``sys.argv[1]`` when given."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    doc = {
        "what": what,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "command": f"python -m {module} " + " ".join(sys.argv[1:]),
        **figures,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n")
