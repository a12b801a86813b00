"""What ``tnx demo`` prints to paste next (issue 37 item 3): every line runs as printed."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from toolnexus_temporal.cli.demo import DEFAULT_DATA_DIR, _print_next
from toolnexus_temporal.client.cluster import ClusterConfig


def printed(**kwargs: object) -> str:
    console = Console(file=io.StringIO(), width=300, record=True)
    _print_next(console, "demo/root/coordinator.1", ClusterConfig(), **kwargs)  # type: ignore[arg-type]
    return console.export_text()


def test_a_stopped_demo_server_is_started_again_first() -> None:
    text = printed(server_left=False, data_dir=DEFAULT_DATA_DIR)
    lines = [line.strip() for line in text.splitlines()[1:]]
    assert lines[0].startswith("tnx server start   #"), text
    assert "tnx inspect demo/root/coordinator.1" in text and "URL" not in text, text
    other = printed(server_left=False, data_dir=Path("/tmp/elsewhere"))
    assert "tnx server start --data-dir /tmp/elsewhere" in other, other


def test_a_server_left_running_needs_no_start_line() -> None:
    text = printed(server_left=True)
    assert "tnx server start" not in text and "tnx trace demo/root/coordinator.1" in text, text
