"""``AgentRuntime.fork``: a new agent whose conversation is an original's first turns.

The client reads the original's state (its definition, parent, store key, committed length
and where its latest turn started: a closed handle's too) and asks the original's parent
for one ``spawn`` carrying a :class:`~toolnexus_temporal.workflows.contract.messages.ForkSpec`.
The parent copies the turns in the conversation store (activity ``tnx.fork_transcript``)
before the fork's workflow starts, so the fork is a normal child: the parent's next child id,
its own budgets, ``idle`` (or running with a first prompt). A refusal is one
:class:`~toolnexus_temporal.client.errors.ForkRefusedError` and nothing is spawned.

Which turns are offered: all of an idle or closed original's; of a running or suspended one,
those before its turn in flight (``TurnState.start_len``), which may still be rolled back.
"""

from __future__ import annotations

from toolnexus_temporal.client.errors import ForkRefusedError, VerbRejectedError
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.messages import ForkSpec, SpawnRequest
from toolnexus_temporal.workflows.contract.models import Budget, HandleView
from toolnexus_temporal.workflows.contract.state import HandleState

SETTLED = ("idle", "closed")
"""States with no turn in flight: every committed turn is offered."""


def fork_request(
    state: HandleState,
    at_turn: int,
    *,
    budget: Budget | None = None,
    model: str | None = None,
    prompt: str | None = None,
) -> SpawnRequest:
    """The ``spawn`` that forks the handle of ``state`` at ``at_turn``.

    Raises:
        ForkRefusedError: ``at_turn`` below 1, the root, a handle with no turn yet, an
            empty ``model``.
    """
    if state.defn is None or state.parent is None:
        raise ForkRefusedError(state.id, at_turn, "the root takes no turns: nothing to fork")
    if isinstance(at_turn, bool) or not isinstance(at_turn, int):
        raise ForkRefusedError(state.id, at_turn, "the turn must be a whole number, from 1")
    if at_turn < 1:
        raise ForkRefusedError(state.id, at_turn, "turns count from 1")
    if model is not None and not model:
        raise ForkRefusedError(state.id, at_turn, "an empty model name")
    settled = state.state in SETTLED
    upto = state.turn.transcript_len if settled else state.turn.start_len
    if state.store_key is None or upto == 0:
        running = "" if settled else f" ({state.state}: its turn in flight is not offered)"
        raise ForkRefusedError(state.id, at_turn, f"{state.id} has no complete turn{running}")
    fork = ForkSpec(
        source=state.id, store_key=state.store_key, upto=upto, turns=at_turn, model=model
    )
    return SpawnRequest(
        name=state.defn.name, budget=budget, wake=prompt is not None, prompt=prompt, fork=fork
    )


async def fork_handle(rpc: HandleRpc, state: HandleState, request: SpawnRequest) -> HandleView:
    """Send ``request`` (:func:`fork_request`) to the original's parent.

    Returns:
        The fork's view.

    Raises:
        ForkRefusedError: the parent is closed, or it refused the spawn (its reason; a turn
            past the last offered is one).
    """
    assert request.fork is not None and state.parent is not None
    turn = request.fork.turns
    try:
        result = await rpc.update(state.parent, AgentWorkflowStub.spawn, request)
    except VerbRejectedError as err:  # the parent's workflow has ended: it is closed
        raise ForkRefusedError(state.id, turn, f"its parent {state.parent} is closed") from err
    if result.handle is None:
        reason = (result.error or "spawn failed").removeprefix("fork refused: ")
        if state.state not in SETTLED and "past the turns" in reason:
            reason += f"; {state.id} is {state.state}: its turn in flight is not offered"
        raise ForkRefusedError(state.id, turn, reason)
    return result.handle
