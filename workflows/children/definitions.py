"""Agent definitions for ``spawn`` (CONTRACT §3 spawn): looking a name up in the worker's
registry (activity ``tnx.resolve_agent``) and the cache that keeps that lookup off the hot
path. Deterministic; no I/O (the lookup is an activity).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import ResolveAgentInput, ResolveAgentResult
    from toolnexus_temporal.workflows.contract.names import RESOLVE_AGENT_ACTIVITY
    from toolnexus_temporal.workflows.contract.state import CachedDef, HandleState

DEF_REFRESH_MS = 10 * 60 * 1000
"""The age (ms of workflow time) after which a cached agent definition is looked
up again at its next spawn. The refresh rule: a handle keeps each definition it looked up (or
inherited from its parent for its ``team``) in its state, across continue-as-new; a spawn uses
it with no activity while it is younger than this; an unknown name is looked up at every
spawn, so a newly registered agent is found at once. A registry edit therefore reaches a
running tree's spawns within ten minutes, or at once through a new runtime."""


class Definitions:
    """The agent definitions one handle spawns from.

    Owns ``HandleState.roster.agent_defs`` and, per run, the lookups in flight.

    Args:
        s: the handle's state model.
    """

    def __init__(self, s: HandleState) -> None:
        self.s = s
        self.resolving: dict[str, asyncio.Future[ResolveAgentResult]] = {}

    async def lookup(self, name: str) -> ResolveAgentResult:
        """One ``tnx.resolve_agent`` activity for ``name``; concurrent spawns of one name share
        it (a fan-out of 50 costs one activity).

        Raises:
            ActivityError: the lookup failed (its sharers get the same error).
        """
        while (shared := self.resolving.get(name)) is not None:
            try:
                return await asyncio.shield(shared)
            except asyncio.CancelledError:
                if not shared.cancelled():
                    raise  # this spawn itself was cancelled
                # the spawn that was looking it up was cancelled: look it up here
        pending: asyncio.Future[ResolveAgentResult] = asyncio.get_running_loop().create_future()
        self.resolving[name] = pending
        try:
            resolved: ResolveAgentResult = await workflow.execute_activity(
                RESOLVE_AGENT_ACTIVITY,
                ResolveAgentInput(name=name),
                result_type=ResolveAgentResult,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary=fit(f"resolve agent {name}", SUMMARY_BYTES),
            )
        except asyncio.CancelledError:
            pending.cancel()
            raise
        except Exception as err:
            pending.set_exception(err)
            pending.exception()  # marked retrieved: the sharers re-raise it
            raise
        finally:
            del self.resolving[name]
        pending.set_result(resolved)
        return resolved

    async def resolve_cached(self, name: str) -> ResolveAgentResult:
        """The definition of ``name`` from this handle's cache (no activity), or
        looked up (and its team's definitions with it) when missing or older than
        ``DEF_REFRESH_MS`` (see there for the refresh rule).

        Raises:
            ActivityError: the lookup failed.
        """
        s = self.s
        now = now_ms()
        cached = s.roster.agent_defs.get(name)
        if cached is not None and now - cached.at_ms < DEF_REFRESH_MS:
            return ResolveAgentResult(defn=cached.defn, tool_options=cached.tool_options)
        resolved = await self.lookup(name)
        now = now_ms()
        for found in (resolved, *resolved.team):
            if found.defn is not None:
                s.roster.agent_defs[found.defn.name] = CachedDef(
                    defn=found.defn, tool_options=found.tool_options, at_ms=now
                )
        return resolved
