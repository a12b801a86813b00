"""The read verbs of :class:`~toolnexus_temporal.client.runtime.AgentRuntime` (CONTRACT §3
inspect, list, trace): queries only, nothing changes. ``HandleReads`` is the base class of
``AgentRuntime``; it holds the root handle, ``workflow_id``, ``inspect``, ``list``,
``transcript``, ``model_view``, ``pending``, ``trace``, ``trace_read`` and ``trace_lines``,
and the refresh of a Handle after a verb (``_apply``, ``_view``, ``_closed_result``).

The trace of a tree (issue 38): a query of a closed handle makes a worker replay its whole
history, so an old agent's hundreds of closed children made ``tnx trace`` grow with its age.
:func:`children_read` is the one rule of which children a trace reads: every child still
open, and with ``closed=N`` only each handle's ``N`` newest closed children (the parent's
state says which are closed: no query of theirs); the others are named in
:attr:`TraceRead.omitted`, and ``tnx trace`` says how many and how to see them (``--all``,
or ``tnx trace ID``). The no-worker read (``cli/replayed.py``) applies the same rule.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import HandleNotFoundError, TnxError
from toolnexus_temporal.client.handle import Handle, HandleRef, handle_id
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.listed import ENDED_OUTSIDE, ListedRow, listed
from toolnexus_temporal.client.queued import QueuedAnswer, queued_answers
from toolnexus_temporal.client.retry import riding_outage
from toolnexus_temporal.client.roots import QueueRow, suspended
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.context import ModelView, model_view
from toolnexus_temporal.workflows.contract.models import (
    HandleStatus,
    HandleView,
    Message,
    TaskResult,
    TraceEntry,
    TraceLine,
    context_policy,
)
from toolnexus_temporal.workflows.contract.names import AGENT_STATE, ROOT_ID, id_in_scope
from toolnexus_temporal.workflows.contract.state import HandleState

# Aliases: inside AgentRuntime the name ``list`` is the verb, not the builtin.
QUERIES_AT_ONCE = 8
"""Queries a read of a tree (``list``, ``trace``) has in flight at once."""

Handles = list[Handle]
TraceLines = list[TraceLine]
Messages = list[Message]
Strings = list[str]
QueueRows = list[QueueRow]


@dataclass(frozen=True)
class TraceRead:
    """The trace of a subtree as :meth:`HandleReads.trace_read` read it.

    Attributes:
        lines: the trace lines of the handles read, merged in order of occurrence (workflow
            time, then tree order, then each handle's sequence number).
        omitted: the closed children whose lines were not read (nor their subtrees'), in
            tree order: each handle's closed children past its ``closed`` newest; empty
            when every handle was read.
    """

    lines: list[TraceLine]
    omitted: list[str] = field(default_factory=list)


def children_read(
    view: HandleView, state: HandleState | None, closed: int | None
) -> tuple[list[str], list[str]]:
    """Which children of a handle a trace reads, in spawn order: every child not closed and
    the ``closed`` newest closed ones (every child when ``closed`` is None); and the closed
    ones it leaves out, oldest first.

    A child is closed when the handle's ``state`` says so: its last report said ``closed``
    (a child whose workflow ended outside the contract is marked closed when the handle
    notices), or it left ``roster.children_info`` at a continue-as-new (only closed
    children leave; ``view.children`` still lists them). No query of the child is needed.

    Args:
        view: the handle's view (``children``: every child ever spawned, in spawn order).
        state: the handle's state (its ``state`` query); None: every child is read.
        closed: how many of the newest closed children to read; None: all.
    """
    if closed is None or state is None:
        return list(view.children), []
    info = state.roster.children_info
    shut = [c for c in view.children if c not in info or info[c].state == "closed"]
    left = set(shut[: max(len(shut) - max(closed, 0), 0)])
    return [c for c in view.children if c not in left], [c for c in shut if c in left]


def merged_lines(traces: Iterable[Sequence[TraceLine]]) -> TraceLines:
    """The trace lines of handles given in tree order (pre-order), merged in order of
    occurrence: by workflow time, then tree order, then each handle's sequence number
    (CONTRACT §7)."""
    merged: builtins.list[tuple[int, int, int, TraceLine]] = [
        (line.at_ms, rank, line.seq, line) for rank, lines in enumerate(traces) for line in lines
    ]
    merged.sort(key=lambda item: item[:3])
    return [item[3] for item in merged]


def pre_order(top: str, children: dict[str, builtins.list[str]]) -> builtins.list[str]:
    """The ids of a tree read level by level (``children``: the children read of each id
    read), in pre-order from ``top``, children in spawn order."""
    out: builtins.list[str] = []
    stack = [top]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(child for child in reversed(children[node]) if child in children)
    return out


class TranscriptReader(Protocol):
    """What :meth:`AgentRuntime.transcript` needs of the workers' conversation store
    (``toolnexus_temporal.SqliteConversationStore`` is one)."""

    async def read(self, conv_id: str, limit: int | None = None) -> Messages:
        """The first ``limit`` messages of a conversation (all when None), oldest first."""
        ...


class HandleReads:
    """The read verbs over the handle workflows of one runtime (the base of ``AgentRuntime``,
    which sets these attributes).

    Attributes:
        store: the workers' conversation store, to read transcripts (:meth:`transcript`).
    """

    _rpc: HandleRpc
    _root: Handle | None
    store: TranscriptReader | None

    @property
    def root(self) -> Handle:
        """The root handle.

        Raises:
            TnxError: ``AgentRuntime.start`` has not run.
        """
        if self._root is None:
            raise TnxError("AgentRuntime.start() has not run (or use `async with`)")
        return self._root

    def workflow_id(self, handle_id: str) -> str:
        """The workflow id of a handle id in this runtime."""
        return self._rpc.workflow_id(handle_id)

    async def list(self, h: HandleRef | None = None) -> Handles:
        """The tree under ``h`` (default: the root), pre-order, children in spawn order. One
        ``view`` query per handle, each level's at once (at most :data:`QUERIES_AT_ONCE`: an
        old agent's closed children are each a replay on the worker)."""
        gate = asyncio.Semaphore(QUERIES_AT_ONCE)

        async def view(ref: HandleRef) -> Handle:
            async with gate:
                return Handle.from_view(await self._view(ref))

        top = await view(h if h is not None else self.root)
        seen: dict[str, Handle] = {top.id: top}
        level = [top]
        while level:
            ids = [child for node in level for child in node.children if child not in seen]
            level = list(await asyncio.gather(*(view(child) for child in ids)))
            seen.update((node.id, node) for node in level)
        out: Handles = []
        stack = [top.id]
        while stack:
            node = seen[stack.pop()]
            out.append(node)
            stack.extend(child for child in reversed(node.children) if child in seen)
        return out

    async def transcript(self, h: HandleRef) -> Messages:
        """The committed transcript of a handle, read through the conversation store (the
        ``view`` query gives the committed length; an aborted turn's tail is not shown).

        Raises:
            TnxError: the runtime was built without ``store``, or the store lacks the
                handle's committed messages (not the workers' store).
            ConnectionError: (``StoreUnavailableError``, from the PostgreSQL store) its server
                is down or unreachable: one line naming the URL without its password; read
                again once it is back (connections it ended are replaced then).
            RuntimeError: (``StoreError``) the store refused the read.
        """
        if self.store is None:
            raise TnxError("AgentRuntime(store=...) is needed to read transcripts")
        view = await self._view(h)
        if view.store_key is None:
            return []
        return await self._committed(view.store_key, view.transcript_len)

    async def _committed(self, key: str, length: int) -> Messages:
        """The first ``length`` (committed) messages of conversation ``key`` from the store.

        Raises:
            TnxError: the store holds fewer: it is not the workers' store (another
                directory's ``.tnx/conversations.sqlite``, say), so an empty or short
                transcript would be false.
        """
        assert self.store is not None
        messages = await self.store.read(key, length)
        if len(messages) < length:
            raise TnxError(
                f"the conversation store holds {len(messages)} of the {length} committed"
                f" messages of {key!r}: it is not the workers' store (pass --store or set"
                " TNX_STORE to the file or URL the workers write)"
            )
        return messages

    async def model_view(self, h: HandleRef) -> ModelView:
        """What the model is sent of the handle's committed transcript on its next call: the
        view its context policy (``AgentDef.context``, else ``RuntimeOptions.context``, else
        the default, ``DEFAULT_CONTEXT``) and summary give (``workflows/contract/context.py``;
        under ``"unbounded"``, the whole transcript). The stored transcript
        (:meth:`transcript`) stays complete.

        Raises:
            TnxError: as :meth:`transcript`.
            ConnectionError: as :meth:`transcript`.
            RuntimeError: as :meth:`transcript`.
        """
        if self.store is None:
            raise TnxError("AgentRuntime(store=...) is needed to read the model's view")
        state = await self._rpc.query(handle_id(h), AgentWorkflowStub.state)
        return await self.model_view_of(state)

    async def model_view_of(self, state: HandleState) -> ModelView:
        """:meth:`model_view` of a handle ``state`` already read (a query, or the CLI's
        replay of its history with no worker).

        Raises:
            As :meth:`model_view`.
        """
        if self.store is None:
            raise TnxError("AgentRuntime(store=...) is needed to read the model's view")
        if state.store_key is None:
            return ModelView(messages=[])
        messages = await self._committed(state.store_key, state.turn.transcript_len)
        defn = state.defn
        policy = context_policy(defn.context if defn is not None else None, state.options.context)
        return model_view(messages, policy, state.turn.summary)

    async def pending(self) -> Handles:
        """Every suspended handle of this runtime, found through the approval queue's
        visibility query (:data:`~toolnexus_temporal.workflows.contract.names.APPROVAL_QUEUE`:
        one row per live handle; visibility is eventually consistent: a handle parked a moment
        ago may show a moment later), each refreshed by a query (needs a worker)."""
        found: Handles = []
        async for row in suspended(self._rpc):
            view = await self._view(row.id)
            if view.state == "suspended":
                found.append(Handle.from_view(view))
        found.sort(key=lambda h: h.id)
        return found

    async def queue(self) -> QueueRows:
        """The approval queue from visibility alone, sorted by id: one :class:`QueueRow` per
        live suspended handle with its pending Request's id, kind, prompt (None with a payload
        codec on) and waiting time. No query, so no worker is needed (visibility may lag a
        moment)."""
        return sorted([row async for row in suspended(self._rpc)], key=lambda row: row.id)

    async def queue_row(self, h: HandleRef) -> QueueRow | None:
        """``h``'s row of the approval queue, read with one consistent describe of its
        workflow (no worker needed, no visibility lag); None when its latest run is not a
        running, suspended handle.

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        try:
            desc = await riding_outage(self._rpc.handle(hid).describe)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise HandleNotFoundError(hid) from None
            raise
        attrs = desc.typed_search_attributes
        if desc.status != WorkflowExecutionStatus.RUNNING or attrs.get(AGENT_STATE) != "suspended":
            return None
        return QueueRow.from_attributes(hid, attrs, self._rpc.scope)

    async def listed(self, h: HandleRef | None = None) -> builtins.list[ListedRow]:
        """The tree under ``h`` (default: the root) from visibility alone, parents first: each
        handle's state, depth, pause, pending Request and next tick as its workflow last
        upserted them (:func:`~toolnexus_temporal.client.listed.listed`). No query, so no
        worker is needed; visibility may lag a moment, and the counters of :meth:`list`
        (turns, tokens, pools, inbox) are not there."""
        return await listed(self._rpc, ROOT_ID if h is None else handle_id(h))

    async def ended(self, h: HandleRef | None = None) -> dict[str, str]:
        """The handles under ``h`` (default: the root) whose workflow ended outside the
        contract, by id: ``terminated``, ``failed``, ``cancelled`` or ``timed out``
        (:data:`~toolnexus_temporal.client.listed.ENDED_OUTSIDE`; from visibility, one list
        call). A query of such a handle still answers with the state it had when it ended
        (``suspended``, ...): this says it no longer runs."""
        rows = await self.listed(h)
        return {row.id: row.state for row in rows if row.state in ENDED_OUTSIDE}

    async def listed_one(self, h: HandleRef) -> ListedRow:
        """``h`` alone as visibility has it (see :meth:`listed`): no worker needed.

        Raises:
            HandleNotFoundError: visibility lists no workflow for it.
        """
        hid = handle_id(h)
        rows = await listed(self._rpc, hid, subtree=False)
        if not rows:
            raise HandleNotFoundError(hid)
        return rows[0]

    async def queued_answers(self, h: HandleRef) -> builtins.list[QueuedAnswer]:
        """The Answers sent to ``h`` by signal that its workflow has not taken yet (no worker
        has run its next workflow task), oldest first, from its history: no worker needed
        (:func:`~toolnexus_temporal.client.queued.queued_answers`). Each ``request_id`` is
        the id without the runtime's scope, as every id this client returns, whichever form
        the sender used (walk 7: one pasted with the scope was printed with it twice).

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        scope = self._rpc.scope
        try:
            found = await queued_answers(self._rpc.client, self._rpc.workflow_id(hid))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise HandleNotFoundError(hid) from None
            raise
        return [replace(a, request_id=id_in_scope(scope, a.request_id)) for a in found]

    async def suspended_ids(self) -> Strings:
        """The ids of this runtime's suspended handles, sorted, from visibility alone (the
        ids of :meth:`queue`)."""
        return [row.id for row in await self.queue()]

    async def inspect(self, h: HandleRef) -> Handle:
        """Read a handle's current view (CONTRACT §3 inspect); refreshes ``h`` in place.

        Raises:
            HandleNotFoundError: no such handle.
        """
        view = await self._view(h)
        if isinstance(h, Handle):
            h.apply(view)
            return h
        return Handle.from_view(view)

    async def trace(self, h: HandleRef | None = None, *, closed: int | None = None) -> TraceLines:
        """The trace lines of ``h``'s subtree (default: the whole tree), merged in order of
        occurrence (workflow time, then tree order) (CONTRACT §7).

        Args:
            closed: read only each handle's ``closed`` newest closed children (and their
                subtrees); None: every handle (:meth:`trace_read` says which were left out).
        """
        return (await self.trace_read(h, closed=closed)).lines

    async def trace_read(
        self, h: HandleRef | None = None, *, closed: int | None = None
    ) -> TraceRead:
        """:meth:`trace`, with the closed children it left out (:class:`TraceRead`).

        Every handle read costs two queries (its ``view``, then its ``trace``, or its
        ``state`` when it has children and ``closed`` is set: the state says which children
        are closed), each level's at once (at most :data:`QUERIES_AT_ONCE`); a query of a
        closed handle is a replay of its history on the worker. With ``closed``, a handle's
        closed children past its ``closed`` newest are not queried at all
        (:func:`children_read`): the cost is that of the open handles and of at most
        ``closed`` closed children per handle, however many the agent closed over its life.
        """
        gate = asyncio.Semaphore(QUERIES_AT_ONCE)

        async def read(hid: str) -> tuple[HandleView, HandleState | None, TraceLines]:
            async with gate:  # an old agent's closed children: each query is a replay
                view = await self._rpc.query(hid, AgentWorkflowStub.view)
                if closed is not None and view.children:
                    state = await self._rpc.query(hid, AgentWorkflowStub.state)
                    return view, state, [TraceEntry.of(line) for line in state.trace]
                return view, None, list(await self._rpc.query(hid, AgentWorkflowStub.trace))

        top = handle_id(h if h is not None else self.root)
        children: dict[str, builtins.list[str]] = {}
        lines: dict[str, TraceLines] = {}
        omitted: dict[str, builtins.list[str]] = {}
        level = [top]
        while level:
            got = await asyncio.gather(*(read(hid) for hid in level))
            nxt: builtins.list[str] = []
            for hid, (view, state, own) in zip(level, got, strict=True):
                kept, left = children_read(view, state, closed)
                children[hid], lines[hid], omitted[hid] = kept, own, left
                nxt.extend(c for c in kept if c not in children and c not in nxt)
            level = nxt
        order = pre_order(top, children)
        return TraceRead(
            lines=merged_lines(lines[hid] for hid in order),
            omitted=[child for hid in order for child in omitted[hid]],
        )

    async def trace_lines(
        self, h: HandleRef | None = None, *, closed: int | None = None
    ) -> Strings:
        """:meth:`trace` as plain strings."""
        return [line.line for line in await self.trace(h, closed=closed)]

    async def _apply(
        self, h: HandleRef, status: HandleStatus, result: TaskResult | None = None
    ) -> Handle:
        """Refresh a Handle from a verb's status; an id gets a full view (one query)."""
        if isinstance(h, Handle):
            h.apply_status(status, result)
            return h
        return await self.inspect(h)

    async def _view(self, h: HandleRef) -> HandleView:
        return await self._rpc.query(handle_id(h), AgentWorkflowStub.view)

    async def _closed_result(self, h: HandleRef) -> TaskResult:
        view = await self.inspect(h)
        return view.last_result or TaskResult(
            status="closed", is_error=True, text=f"{view.id} is closed"
        )
