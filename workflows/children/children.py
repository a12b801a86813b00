"""Children (CONTRACT §3 spawn, close; §8): spawning child workflows, resolving agent
definitions, the children's reports, and closing a child. Children whose workflows end
without a closed report are handled in :mod:`~toolnexus_temporal.workflows.children.watch`
(``Children.watcher``).

Children are child workflows of type ``AgentWorkflow`` (started by the type name, so this
module does not import the workflow class), with ``ParentClosePolicy.ABANDON``: closing a
parent closes its subtree through the graceful cascade, never by Temporal termination, and
children outlive a parent's continue-as-new. A child reports every change with the
``child_report`` signal: an absolute snapshot, newest ``seq`` wins. Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from toolnexus_temporal.workflows.budgets import BudgetLedger, ChildPools, carve, exhausted
from toolnexus_temporal.workflows.children.definitions import Definitions
from toolnexus_temporal.workflows.children.fork import Forked, copy_conversation, forked_defn
from toolnexus_temporal.workflows.children.watch import ChildWatch
from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.machine import Machine
from toolnexus_temporal.workflows.rules.background import note, track
from toolnexus_temporal.workflows.rules.roster import (
    children_count,
    next_child_id,
    record_spawn,
    was_child,
)
from toolnexus_temporal.workflows.visibility.operator import static_details, static_summary
from toolnexus_temporal.workflows.visibility.visibility import Visibility, view_of

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.limits import DETAILS_BYTES, fit, workflow_id_error
    from toolnexus_temporal.workflows.contract.messages import (
        ChildReport,
        CloseRequest,
        ForkSpec,
        ResolveAgentResult,
        SpawnRequest,
        SpawnResult,
    )
    from toolnexus_temporal.workflows.contract.models import AgentDef, Budget, HandleView
    from toolnexus_temporal.workflows.contract.names import (
        AGENT_DEPTH,
        AGENT_NAME,
        AGENT_PARENT,
        AGENT_STATE,
        SIGNAL_CLOSE,
        WORKFLOW_TYPE,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import (
        AgentInput,
        ApprovalState,
        CachedDef,
        ChildInfo,
        HandleState,
        InboxState,
        Interpreter,
        Lease,
        LeaseState,
        RosterState,
        TurnState,
        UsageState,
    )


def spawn_check(
    s: HandleState, name: str, resolved: ResolveAgentResult, now_ms: float
) -> str | None:
    """Why ``s`` may not spawn ``name`` (CONTRACT §3 spawn), or None.

    Checks, in order: unknown name (``known`` names listed); parent closed or closing;
    depth over ``max_depth``; children over ``max_children`` (closed ones count); a pool
    exhausted or the deadline passed (``now_ms``: ms since the epoch); the child's workflow
    id over Temporal's limit (``limits.py``: refused here, a SpawnError, never a failed
    workflow task of the parent).
    """
    if resolved.defn is None:
        return f'unknown agent "{name}" (known: {", ".join(resolved.known)})'
    if s.state == "closed" or s.closing:
        return "parent closed"
    max_depth = s.budget.max_depth
    if max_depth is not None and s.depth + 1 > max_depth:
        return f"depth {s.depth + 1} over max_depth {max_depth}"
    max_children = s.budget.max_children
    if max_children is not None and children_count(s) >= max_children:
        return f"children over max_children {max_children}"
    too_long = workflow_id_error(workflow_id_for(s.scope, next_child_id(s, resolved.defn.name)))
    if too_long is not None:
        return too_long
    return exhausted(s, now_ms)


def child_state(
    parent: HandleState,
    child_id: str,
    defn: AgentDef,
    pools: ChildPools,
    resolved: ResolveAgentResult,
    *,
    report_results: bool,
    lease: Lease | None = None,
    team_defs: dict[str, CachedDef] | None = None,
    one_shot: bool = False,
    wake: bool = False,
    prompt: str | None = None,
    nonce: str | None = None,
    forked: Forked | None = None,
) -> HandleState:
    """The initial state of a new child of ``parent``: its pools as carved, the interpreter
    chain (its own ``wait_for`` first, then the parent's chain), the parent's options and
    protocol, its lease granted ahead, its team's cached definitions, whether it is a
    one-shot ``task`` child, a first wake that travels with the spawn, its nonce
    (``trust.py``) and, for a fork, the conversation copied for it (``fork.py``)."""
    own_interpreter = [Interpreter(handle_id=child_id, name=defn.wait_for)] if defn.wait_for else []
    return HandleState(
        id=child_id,
        scope=parent.scope,
        task_queue=parent.task_queue,
        defn=defn,
        budget=pools.budget,
        parent=parent.id,
        depth=parent.depth + 1,
        pool_tokens_limit=pools.tokens_limit,
        pool_tool_calls_limit=pools.tool_calls_limit,
        pool_cost_limit=pools.cost_limit,
        wall_deadline_ms=pools.wall_deadline_ms,
        tool_options=resolved.tool_options,
        report_results=report_results,
        options=parent.options,
        protocol=parent.protocol,
        one_shot=one_shot,
        nonce=nonce,
        usage=UsageState(
            pool_tokens=pools.tokens_limit,
            pool_tool_calls=pools.tool_calls_limit,
            floor=pools.floor,
            pool_cost_usd=pools.cost_limit,
        ),
        approval=ApprovalState(interpreters=own_interpreter + parent.approval.interpreters),
        leases=LeaseState(
            slot_parent=parent.budget.max_concurrent is not None,
            lease=lease.id if lease is not None else None,
            lease_sticky=lease is not None and lease.sticky,
            queued_prompt=prompt if wake else None,
        ),
        roster=RosterState(agent_defs=team_defs),
        intake=InboxState(start_wake=wake),
        store_key=forked.store_key if forked is not None else None,
        turn=TurnState(transcript_len=forked.length if forked is not None else 0),
    )


class Children:
    """The children of one handle.

    Owns ``HandleState.roster`` (:class:`RosterState`: ``children``, ``children_info`` and
    ``spawn_count``, with ``roster.py`` for ``spawned*`` and ``closed_*``); the agent
    definitions it spawns from (``definitions.py``, ``roster.agent_defs``).

    Args:
        s: the handle's state model.
        vis: trace lines.
        machine: the report to this handle's own parent.
        budgets: carving pools, the ledger after a report.
        leases: a child's lease at spawn, after its close or when its workflow ended.
        on_change: called after a child's info changed (a report, or its workflow ended):
            the handle's parking follows its task children (``Approvals.sync_parking``).
        on_background: called after a background child's report noted an item for the next
            wake (``BackgroundWake.wake_if_due``: an idle handle is woken).
    """

    def __init__(
        self,
        s: HandleState,
        vis: Visibility,
        machine: Machine,
        budgets: BudgetLedger,
        leases: LeaseBook,
        *,
        on_change: Callable[[], None] = lambda: None,
        on_background: Callable[[], None] = lambda: None,
    ) -> None:
        self.s = s
        self.vis = vis
        self.machine = machine
        self.budgets = budgets
        self.leases = leases
        self.definitions = Definitions(s)
        self.on_change = on_change
        self.on_background = on_background
        self.watcher = ChildWatch(
            s,
            vis,
            machine,
            budgets,
            leases,
            on_report=self.on_report,
            on_change=on_change,
        )
        """Children whose workflows end (``children/watch.py``)."""

    async def spawn(self, req: SpawnRequest) -> SpawnResult:
        """The ``spawn`` update: the child's view, or the SpawnError text (never raises).
        With ``req.wake`` the child starts with that wake admitted; with ``req.notify`` it
        is a background child that reports back (``background.py``), refused under the
        root (which takes no turns)."""
        wake = req.wake
        if req.notify and self.s.defn is None:
            refused = "notify needs a parent that takes turns (the root has no inbox)"
            self.vis.trace(f"{self.s.id}: spawn {req.name} REJECTED ({refused})")
            return SpawnResult(error=refused)
        child, error = await self.start(
            req.name,
            budget=req.budget,
            wake=wake,
            prompt=req.prompt if wake else None,
            report_results=req.notify,
            notify=req.notify,
            fork=req.fork,
        )
        if child is None:
            return SpawnResult(error=error)
        view = view_of(child)
        if wake:  # admitted with the spawn (a lease granted ahead, or no limit), else queued
            admitted = child.leases.lease is not None or child.leases.slot_parent is False
            view = view.model_copy(update={"state": "running"} if admitted else {"queued": True})
        return SpawnResult(handle=view)

    async def spawn_for_task(
        self, name: str, prompt: str | None = None
    ) -> tuple[str | None, str | None]:
        """Spawn for the ``task`` tool (results reported): (child id, None) or (None, the
        SpawnError text). The child starts with its wake (``prompt``) and closes itself once
        that turn settles."""
        child, error = await self.start(
            name, report_results=True, wake=True, prompt=prompt, one_shot=True
        )
        return (child.id if child else None), error

    async def start(
        self,
        name: str,
        *,
        report_results: bool = False,
        budget: Budget | None = None,
        wake: bool = False,
        prompt: str | None = None,
        one_shot: bool = False,
        notify: bool = False,
        fork: ForkSpec | None = None,
    ) -> tuple[HandleState | None, str | None]:
        """Check, then start a child workflow (CONTRACT §3 spawn); with ``notify`` it is a
        background child of this handle (tracked before its workflow starts); with ``fork``
        it starts with a copy of a sibling's first turns (``fork.py``).

        Returns:
            (the child's initial state, None), or (None, the SpawnError text).
        """
        s = self.s
        admitted = await self._admit(name, fork)
        if isinstance(admitted, str):
            return None, admitted
        resolved, forked = admitted
        assert resolved.defn is not None  # checked by _admit
        defn = forked_defn(resolved.defn, fork)
        pools = carve(s, budget or defn.budget, now_ms())
        nonce = str(workflow.uuid4())
        child_id = record_spawn(s, defn.name, nonce)
        if notify:
            track(s, child_id)
        lease = self.leases.at_spawn(child_id)
        team_defs = {m: s.roster.agent_defs[m] for m in defn.team if m in s.roster.agent_defs}
        child = child_state(
            s,
            child_id,
            defn,
            pools,
            resolved,
            report_results=report_results,
            lease=lease,
            team_defs=team_defs,
            one_shot=one_shot,
            wake=wake,
            prompt=prompt,
            nonce=nonce,
            forked=forked,
        )
        attributes = TypedSearchAttributes(
            [
                SearchAttributePair(AGENT_STATE, "idle"),
                SearchAttributePair(AGENT_NAME, defn.name),
                SearchAttributePair(AGENT_DEPTH, child.depth),
                # the parent's id as tnx prints ids, with the scope (walk 8: the web UI's
                # AgentParent column was the only unscoped one); client/listed.py strips it
                SearchAttributePair(AGENT_PARENT, workflow_id_for(s.scope, s.id)),
            ]
        )
        start = workflow.start_child_workflow(
            WORKFLOW_TYPE,
            AgentInput(state=child),
            id=workflow_id_for(s.scope, child_id),
            task_queue=s.task_queue,
            result_type=HandleView,
            # Closing a parent closes its subtree through our own graceful cascade, never
            # by Temporal termination; children also outlive a parent's continue-as-new.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            # the UI's page of a child, with no worker
            static_summary=static_summary(child),
            static_details=fit(static_details(child), DETAILS_BYTES),
            search_attributes=attributes,
        )
        child_handle = await self.watcher.starting(child_id, start)
        of = f" (fork of {fork.source}, turns 1-{fork.turns})" if fork is not None else ""
        self.vis.trace(f"{s.id}: spawn {child_id}{of}")
        asyncio.create_task(self.watcher.watch(child_id, child_handle))  # noqa: RUF006
        return child, None

    async def _admit(
        self, name: str, fork: ForkSpec | None
    ) -> tuple[ResolveAgentResult, Forked | None] | str:
        """The checks of a spawn (``spawn_check``), and for a fork the copy of its
        conversation, checked again after it (the copy takes time): the definition and the
        copy, or the SpawnError text (traced); nothing is recorded either way."""
        s = self.s
        resolved = await self.definitions.resolve_cached(name)
        error = spawn_check(s, name, resolved, now_ms())
        forked: Forked | None = None
        if error is None and fork is not None:
            copied = await copy_conversation(s, fork)
            if isinstance(copied, str):
                error = copied
            else:
                forked = copied
                error = spawn_check(s, name, resolved, now_ms())
        if error is not None or resolved.defn is None:
            error = error or "unknown agent"
            self.vis.trace(f"{s.id}: spawn {name} REJECTED ({error})")
            return error
        return resolved, forked

    def known_view(self, child_id: str) -> HandleView:
        """A child's view as this parent knows it (its last report and cached definition):
        what a spawn sent again after a continue-as-new returns (``lifecycle/updates.py``);
        the client refreshes it with the child's own view at the next verb."""
        s = self.s
        info = s.roster.children_info.get(child_id, ChildInfo(state="closed"))
        name = child_id[len(s.id) + 1 :].rpartition(".")[0]
        cached = s.roster.agent_defs.get(name)
        return HandleView(
            id=child_id,
            name=name,
            parent=s.id,
            depth=s.depth + 1,
            state=info.state,
            inbox_count=0,
            children=[],
            usage_total=info.usage_total,
            turns_total=0,
            tool_calls_total=0,
            pool_tokens=None,
            pool_tool_calls=None,
            wall_deadline_ms=None,
            pending_req=info.pending_req,
            last_result=info.last_result,
            result_seq=info.result_seq,
            conv_id=child_id,
            transcript_len=0,
            last_error=None,
            defn=cached.defn if cached else None,
            subtree_tool_calls=info.subtree_tool_calls,
            report_seq=info.report_seq,
            cost=info.cost,
        )

    def on_report(self, report: ChildReport) -> None:
        """A child's ``child_report``: keep the newest snapshot, then update the slot books
        and the budget ledger, push floors and report upward (older reports are ignored)."""
        info = self.s.roster.children_info.get(report.id)
        if info is None or report.seq <= info.report_seq:
            return  # unknown child or an older report
        if info.state != report.state and report.state == "closed":
            self.vis.trace(f"{self.s.id}: child {report.id} closed")
        self.s.roster.children_info[report.id] = ChildInfo(
            state=report.state,
            usage_total=report.usage_total,
            subtree_tool_calls=report.subtree_tool_calls,
            report_seq=report.seq,
            result_seq=report.result_seq,
            last_result=report.last_result,
            pending_req=report.pending_req,
            parked=report.parked,
            answer_id=report.answer_id,
            answer_error=report.answer_error,
            nonce=info.nonce,
            cost=report.cost,
            paused=report.paused,
        )
        if report.state == "closed":
            self.leases.child_closed(report.id)
        self.budgets.recount()
        self.budgets.push_floors()
        self.machine.report()
        self.on_change()
        if note(self.s, report.id):
            self.on_background()

    async def close(self, child_id: str, req: CloseRequest) -> None:
        """Close one child (signal ``close``) and wait until it reports ``closed``; a child
        already closed, or whose workflow is gone (traced), is done at once; a child whose
        start is in flight is signalled once the start is confirmed."""
        info = self.s.roster.children_info.get(child_id)
        if (info is not None and info.state == "closed") or (
            info is None and was_child(self.s, child_id)
        ):
            return
        await self.watcher.until_started(child_id)  # spawned in this very task: not there yet
        child = workflow.get_external_workflow_handle(workflow_id_for(self.s.scope, child_id))
        try:
            await child.signal(SIGNAL_CLOSE, CloseRequest(force=req.force, reason=req.reason))
        except Exception as err:  # the child's workflow is gone (ended or terminated)
            workflow.logger.warning("%s: close of %s not delivered: %s", self.s.id, child_id, err)
            self.vis.trace(f"{self.s.id}: close of {child_id} not delivered ({err})")
            return
        await workflow.wait_condition(
            lambda: self.s.roster.children_info.get(child_id, ChildInfo()).state == "closed"
        )
