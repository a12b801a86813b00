"""What the suite needs from each contender, and the context it runs them in."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from temporalio.client import Client

from bench.history import HistoryTracker, MultiTracker
from bench.sizes import Size

AgentKind = Literal["chat", "chat1k", "tool"]
"""``chat``: one LLM call per turn, short reply; ``chat1k``: the same with a ~1 KB reply
(history growth); ``tool``: LLM → tool → LLM."""


@dataclass
class Context:
    """Shared by every contender of one suite run.

    Attributes:
        client: a client of the dev server with the pydantic data converter.
        address: the dev server's frontend ``host:port`` (for clients with other converters
            and for the idle-agents subprocess).
        base_url: the scripted LLM server (``http://127.0.0.1:PORT/v1``).
        size: the suite size.
        tmp: a scratch folder (conversation stores).
        run_id: unique per suite run (task queues, workflow ids).
    """

    client: Client
    address: str
    base_url: str
    size: Size
    tmp: Path
    run_id: str
    log: Any = field(default=print)
    evidence_dir: Path | None = None
    """Where a contender may save the histories of workflows that failed (for replay)."""


class Agent:
    """One conversation of a contender."""

    async def turn(self, prompt: str) -> str:
        """Run one turn: prompt in, final text out. Raises when the turn did not finish."""
        raise NotImplementedError

    def tracker(self) -> MultiTracker | None:
        """The workflows this agent's turns write history to (None: no durability)."""
        return None


@dataclass
class FanoutRun:
    """One 1 → N fan-out: wall time, and history across every workflow it touched."""

    seconds: float
    events: int | None = None
    bytes: int | None = None
    llm_calls: int | None = None


class Contender:
    """A runtime under test. Subclasses set the class attributes and implement the hooks.

    Attributes:
        name: the short key used by ``--only`` and in the results.
        label: the human name in tables and plots.
        durable: whether it writes Temporal history.
        module: the importable module of the idle-agents measure (``bench.idle``).
    """

    name = ""
    label = ""
    durable = True
    rejected = 0
    """Requests the server rejected as over a limit and the bench retried (see ours)."""
    retried_calls = 0
    """Calls (turns, spawns) the bench retried at least once after such a rejection."""
    not_measured: ClassVar[dict[str, str]] = {}
    """Measures (``latency``, ..., ``idle``) this contender cannot do, each with why: the
    suite records them as skipped with that reason."""

    shapes_not_built: ClassVar[dict[str, str]] = {
        "tick": "not built for this contender",
        "spawn": "not built for this contender",
        "approval": "not built for this contender",
        "continue_as_new": "not built for this contender",
    }
    """Shapes of ``bench.shapes`` this contender does not measure, each with why."""

    async def action_shape(self, shape: str) -> dict[str, Any]:
        """One shape of ``bench.shapes.SHAPES`` run once: its billable actions, events and
        bytes (``bench.shapes.shape_result``). Raises NotImplementedError when not built."""
        raise NotImplementedError(shape)

    async def diagnose(self, agent: Agent, prompt_prefix: str) -> dict[str, Any] | None:
        """Contender-specific evidence about the agent's turns whose prompt starts with
        ``prompt_prefix`` (ours: wake signal delays)."""
        return None

    async def save_evidence(self, group: str) -> list[str]:
        """After a measure of ``group`` failed: save the histories worth replaying; returns
        the files written."""
        return []

    def workaround(self, on: bool = True) -> str | None:
        """Turn this contender's workaround for a measure that failed as it ships on (and
        say what it is; None when it has none) or off. The failure stays in the results."""
        return None

    def skip_reason(self) -> str | None:
        """Why this contender cannot run here (a missing package, ...), or None."""
        return None

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        """Run the contender's worker (and whatever else it needs) for the measures."""
        yield

    def attach(self, ctx: Context) -> None:
        """Drive agents on the workers of a :meth:`session` with the same ``ctx.run_id``
        run elsewhere (``bench.cpu`` runs the worker in a process of its own): set up the
        client side only. Raises NotImplementedError for a contender that cannot."""
        raise NotImplementedError(f"{self.name}: no worker in another process")

    async def new_agent(self, kind: AgentKind, group: str) -> Agent:
        """A fresh agent of ``kind``. Agents of one ``group`` (a measure) may share a
        parent."""
        raise NotImplementedError

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        """One turn of a lead that delegates ``n`` jobs at once and waits for all of them."""
        raise NotImplementedError


def tracker_of(client: Client, *workflow_ids: str) -> MultiTracker:
    """A MultiTracker over workflow ids."""
    return MultiTracker([HistoryTracker(client, wid) for wid in workflow_ids])
