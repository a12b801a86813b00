"""The handle workflow as the host library sees it: :class:`AgentWorkflowStub`, an interface
declared by the durable names of :mod:`toolnexus_temporal.workflows.contract.names` and the
contract's types, so the host library calls ``AgentWorkflow`` without importing it.

Each call names a stub handler by method reference (``wf.execute_update(
AgentWorkflowStub.turn, req)``, ``wf.query(AgentWorkflowStub.view)``): what goes on the wire
is the handler's durable name (``"turn"``, ``"view"``), and the argument and result types come
from the stub's annotations, checked by mypy at every call. Importing this module loads the
contract (types, names) and nothing of the workflow's components: ``import
toolnexus_temporal.client`` stays light (``tests/test_layout.py``).

The stub is never run and never registered on a worker: its bodies raise. The real handlers
are ``workflows/agent.py``'s; ``tests/test_layout.py`` checks that every stub handler has the
same name, argument type and result type as the workflow's.
"""

from __future__ import annotations

from temporalio import workflow

from toolnexus_temporal.workflows.contract import names
from toolnexus_temporal.workflows.contract.messages import (
    AnswerResult,
    CloseRequest,
    InterruptRequest,
    MessageOutcome,
    PauseRequest,
    PostResult,
    ScheduleRequest,
    SpawnRequest,
    SpawnResult,
    TurnRequest,
    WaitRequest,
    WaitResponse,
)
from toolnexus_temporal.workflows.contract.models import (
    Answer,
    HandleStatus,
    HandleView,
    InboxItem,
    TraceEntry,
)
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState, RecoveryPoint


def _stub() -> NotImplementedError:
    return NotImplementedError("AgentWorkflowStub is an interface: the worker runs AgentWorkflow")


@workflow.defn(name=names.WORKFLOW_TYPE)
class AgentWorkflowStub:
    """The updates, queries and run of ``AgentWorkflow`` (``workflows/agent.py``) that the
    host library calls, under their durable names. Never registered on a worker."""

    @workflow.run
    async def run(self, inp: AgentInput) -> HandleView:
        """Start a handle (``client.start_workflow(AgentWorkflowStub.run, AgentInput(...))``):
        the run's result is the final HandleView."""
        raise _stub()

    # ---- queries

    @workflow.query(name=names.QUERY_VIEW)
    def view(self) -> HandleView:
        """The handle's view."""
        raise _stub()

    @workflow.query(name=names.QUERY_STATE)
    def state(self) -> HandleState:
        """The handle's whole state (secrets masked)."""
        raise _stub()

    @workflow.query(name=names.QUERY_TRACE)
    def trace(self) -> list[TraceEntry]:
        """The handle's trace lines."""
        raise _stub()

    @workflow.query(name=names.QUERY_INBOX)
    def inbox(self) -> list[InboxItem]:
        """The items waiting for the next wake."""
        raise _stub()

    @workflow.query(name=names.QUERY_RECOVERY)
    def recovery(self) -> RecoveryPoint:
        """What ``recover`` starts again from this run."""
        raise _stub()

    @workflow.query(name=names.QUERY_MESSAGE)
    def message(self, message_id: str) -> MessageOutcome:
        """What became of the wake sent with this message id."""
        raise _stub()

    # ---- updates

    @workflow.update(name=names.UPDATE_SPAWN)
    async def spawn(self, req: SpawnRequest) -> SpawnResult:
        """Spawn a child."""
        raise _stub()

    @workflow.update(name=names.UPDATE_TURN)
    async def turn(self, req: TurnRequest) -> WaitResponse:
        """Wake the handle and wait for its result, in one update."""
        raise _stub()

    @workflow.update(name=names.UPDATE_POST)
    def admit_post(self, item: InboxItem) -> PostResult:
        """Post an inbox item."""
        raise _stub()

    @workflow.update(name=names.UPDATE_WAIT)
    async def wait(self, req: WaitRequest) -> WaitResponse:
        """Wait for the handle's next (or last) result."""
        raise _stub()

    @workflow.update(name=names.UPDATE_INTERRUPT)
    async def admit_interrupt(self, req: InterruptRequest) -> HandleStatus:
        """Abort the running turn."""
        raise _stub()

    @workflow.update(name=names.UPDATE_CLOSE)
    async def admit_close(self, req: CloseRequest) -> HandleStatus:
        """Close the handle and its subtree."""
        raise _stub()

    @workflow.update(name=names.UPDATE_SCHEDULE)
    def schedule(self, req: ScheduleRequest) -> HandleView:
        """Set or remove the tick schedule."""
        raise _stub()

    @workflow.update(name=names.UPDATE_PAUSE)
    async def admit_pause(self, req: PauseRequest) -> HandleStatus:
        """Pause or unpause the handle."""
        raise _stub()

    @workflow.update(name=names.UPDATE_ANSWER)
    async def admit_answer(self, answer: Answer) -> AnswerResult:
        """Answer a pending Request (routed down to its handle)."""
        raise _stub()
