"""The committed histories (``tests/histories/``): where the recorders of
``tests/test_record_histories.py`` write them and the scenario names they are filed under,
which ``tests/test_replay.py`` replays and checks."""

from __future__ import annotations

from pathlib import Path

HISTORIES = Path(__file__).parent / "histories"


SCENARIOS = (
    "basic",
    "delegation",
    "protocol",
    "operator",
    "parked",
    "cancel",
    "interp",
    "hooks",
    "timeouts",
    "grace",
    "task",
    "budget",
    "terminated",
    "race",
    "recovered",
    "background",
    "ticks",
    "context",
    "expiry",
    "workspace",
)
"""Each recorder's file-name prefix (``test_replay.py`` checks each has files)."""
