"""Pause: a handle that takes no turns for a while (issue 25 item 3).

A paused handle keeps taking posts and ticks into its inbox but starts no turn: wake
admission keeps every wake as a waiting message instead (``InboxState.wakes``, in arrival
order: nothing sent is lost) and unpause starts one turn holding them all. A running turn is let
finish (``now``: interrupted at once, its drained inbox back in front); a parked turn stays
parked, and an Answer resumes it (the turn was already running). Temporal's own Workflow
Pause is not used: it rejects updates and queries while paused (and is off on the dev
server), so it cannot keep the inbox open.

The wall-clock budget (``max_wall_ms``) keeps running while paused: it is a deadline from
spawn, so a pause past it leaves the next turn ``incomplete`` (limit ``wallMs``) at once.

Paused shows in the ``view`` (``paused``), ``tnx ls``, the ``AgentPaused`` search attribute
and the web UI's current details. Deterministic; no I/O.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.inbox import Inbox
from toolnexus_temporal.workflows.lifecycle.lifecycle import Lifecycle
from toolnexus_temporal.workflows.visibility.visibility import INVALID, Visibility, short_error

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.messages import PauseRequest
    from toolnexus_temporal.workflows.contract.names import (
        AGENT_PAUSED,
        SIGNAL_UNPAUSE,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState


def pause_error(s: HandleState) -> str | None:
    """Why this handle may not be paused or unpaused (the root; closed or closing), or
    None."""
    if s.defn is None:
        return "the root handle never runs an LLM: pause a spawned handle"
    if s.state == "closed" or s.closing:
        return "handle closed"
    return None


class Pause:
    """Pause and unpause of one handle.

    Owns ``HandleState.pause`` (:class:`PauseState`) and per run the ``AgentPaused`` value
    last upserted.

    Args:
        s: the handle's state model.
        vis: trace, publish and rejections.
        inbox: the held wakes, admitted on unpause.
        lifecycle: interrupts the running turn (``now``).
    """

    def __init__(self, s: HandleState, vis: Visibility, inbox: Inbox, lifecycle: Lifecycle):
        self.s = s
        self.vis = vis
        self.inbox = inbox
        self.lifecycle = lifecycle
        self.published = bool(workflow.info().typed_search_attributes.get(AGENT_PAUSED))
        """The ``AgentPaused`` shown (a continued run carries it)."""

    def error(self) -> str | None:
        """See :func:`pause_error`."""
        return pause_error(self.s)

    async def apply(self, req: PauseRequest) -> None:
        """Pause (``req.paused``; ``req.now``: interrupt a running turn) or unpause."""
        if req.paused:
            await self.pause(now=req.now)
        else:
            self.unpause()

    async def pause(self, *, now: bool = False) -> None:
        """Pause: no turn starts until :meth:`unpause`; ``now`` interrupts a running or
        parked turn (returns once it stopped)."""
        s = self.s
        if not s.pause.paused:
            s.pause.paused = True
            s.pause.since_ms = now_ms()
            self.vis.trace(f"{s.id}: paused" + (" (now)" if now else ""))
            self._publish()
            self.lifecycle.machine.report(now=True)  # the parent's background_list shows it
        if now:
            await self.lifecycle.interrupt("pause --now")

    def unpause(self) -> None:
        """Unpause: the wakes held meanwhile (if any) start one turn now."""
        s = self.s
        if not s.pause.paused:
            return
        s.pause.paused = False
        s.pause.since_ms = None
        self.vis.trace(f"{s.id}: unpaused" + (" (held wakes run)" if s.intake.wakes else ""))
        self._publish()
        self.lifecycle.machine.report(now=True)
        self.inbox.admit_waiting()

    async def signal(self, name: str, args: tuple[Any, ...]) -> None:
        """The ``pause`` signal (``null`` or ``{"now": bool}``) or the ``unpause`` signal
        (``null``): bad input is rejected loudly (trace, ``last_error``, current details)
        and changes nothing."""
        payload = self.vis.one(name, args)
        if payload is INVALID:
            return
        if name == SIGNAL_UNPAUSE:
            if payload not in (None, {}):
                self.vis.reject(name, "bad payload: unpause takes no input (null)")
                return
            req = PauseRequest(paused=False)
        else:
            try:
                req = PauseRequest.model_validate(payload or {})
            except ValidationError as err:
                self.vis.reject(name, f"bad payload: {short_error(err)}")
                return
            if not req.paused:
                self.vis.reject(name, 'bad payload: paused: false (send signal "unpause")')
                return
        error = self.error()
        if error is not None:
            self.vis.reject(name, error)
            return
        await self.apply(req)

    def _publish(self) -> None:
        """Upsert ``AgentPaused`` when it changed; refresh the current details."""
        paused = self.s.pause.paused
        if paused != self.published:
            workflow.upsert_search_attributes([AGENT_PAUSED.value_set(paused)])
            self.published = paused
        self.vis.publish()
