"""``AgentRuntime``: the host verbs over a ``temporalio.client.Client`` (CONTRACT §3).

Each verb is one Temporal message to the handle's workflow (workflow id == handle id, prefixed
by ``{scope}/`` when the runtime is scoped); the table of verbs and messages is in
:mod:`toolnexus_temporal.client`. Under a parent that limits ``max_concurrent``, a woken
handle without a lease asks its parent for one itself (workflow side). Every update and
query is sent typed, by handler reference (:mod:`toolnexus_temporal.client.rpc`).

A closed handle's workflow has completed; verbs on it answer from its final state (``wait``
returns its last result, ``post`` says ``inbox closed``, ``wake`` raises, ``interrupt`` and
``close`` are no-ops): close is not loss.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from datetime import timedelta
from types import TracebackType
from typing import Self

from temporalio.client import Client

from toolnexus_temporal.client.answers import confirm_at_owner
from toolnexus_temporal.client.audit import AuditRecord, audit_of
from toolnexus_temporal.client.cluster import default_answerer
from toolnexus_temporal.client.errors import (
    AnswerRejectedError,
    HandleNotFoundError,
    SpawnError,
    UpdateLimitError,
    VerbRejectedError,
)
from toolnexus_temporal.client.fallback import Fallbacks, status_of_view
from toolnexus_temporal.client.fork import fork_handle, fork_request
from toolnexus_temporal.client.handle import Handle, HandleRef, handle_id
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.queries import check_scope
from toolnexus_temporal.client.reachability import WorkerProbe
from toolnexus_temporal.client.reads import HandleReads, TranscriptReader
from toolnexus_temporal.client.recover import recover
from toolnexus_temporal.client.roots import start_root
from toolnexus_temporal.client.rpc import FALLBACK_AFTER_S, TERMINATED, HandleRpc
from toolnexus_temporal.client.stream import LiveEvent, follow_turn
from toolnexus_temporal.client.turns import Turns, turn_request
from toolnexus_temporal.workflows.contract.messages import (
    AnswerResult,
    CloseRequest,
    InterruptRequest,
    PauseRequest,
    PostResult,
    ScheduleRequest,
    SpawnRequest,
    WaitResponse,
)
from toolnexus_temporal.workflows.contract.models import (
    Answer,
    Budget,
    InboxItem,
    RuntimeOptions,
    TaskResult,
    TickSpec,
)
from toolnexus_temporal.workflows.contract.names import (
    POST_REFUSALS,
    ROOT_ID,
    UPDATE_TURN,
    UPDATE_WAIT,
)

WAIT_ATTEMPTS = 5
"""How many times :meth:`AgentRuntime.wait` asks again after its update was refused while
the handle still runs (a run that continued as new under it)."""


class AgentRuntime(HandleReads):
    """The host-side runtime: verbs on handles whose state lives in Temporal workflows.

    Use ``async with AgentRuntime(client, ...) as rt:`` (or ``await rt.start()``), which
    starts the root workflow if it is not running yet. A worker (see
    ``toolnexus_temporal.create_worker`` and ``tnx-worker``) must serve ``task_queue`` with the
    agent registry.

    A read (``inspect``, ``list``, ``trace``, ``pending``, ``start``) that goes unanswered for
    5 s while no worker polls ``task_queue`` raises
    :class:`~toolnexus_temporal.client.errors.NoWorkerError` instead of waiting for the
    server's deadline (:mod:`~toolnexus_temporal.client.reachability`); updates (``run_turn``,
    ``wait``, ...) are not checked: they wait for a worker, as long as a turn may take.

    Every verb that takes a Handle refreshes it in place; given a handle id, it returns a new
    Handle. The runtime keeps what it has in flight per handle id (the ``turn`` update of a
    wake), so a Handle object, a copy of it and its id all wait for the same turn.

    Args:
        client: a client built with ``pydantic_data_converter`` (``toolnexus_temporal.connect``).
        task_queue: the task queue every handle of this runtime runs on.
        scope: optional prefix of every workflow id (``{scope}/root/worker.1``) so several
            runtimes can share a namespace; None for bare ids.
        options: runtime options, fixed when the root workflow is first started. With a
            payload codec on ``client``, ``prompt_in_visibility`` is False unless given.
        budget: the root's budget: the runtime-wide pools (default: unlimited tokens and tool
            calls, ``max_depth`` 3, ``max_concurrent`` 8).
        store: the workers' conversation store, to read transcripts (:meth:`transcript`).

    Attributes:
        root: the root Handle (depth 0), available after :meth:`start`.

    Raises:
        ValueError: ``scope`` is not a valid scope (:func:`~toolnexus_temporal.client.queries.
            check_scope`: letters, digits, ``._:-`` in ``/``-joined segments).
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "tnx",
        scope: str | None = None,
        options: RuntimeOptions | None = None,
        budget: Budget | None = None,
        store: TranscriptReader | None = None,
    ) -> None:
        check_scope(scope)
        self.client = client
        self.task_queue = task_queue
        self.scope = scope
        self.options = options or RuntimeOptions()
        if (
            client.data_converter.payload_codec is not None
            and "prompt_in_visibility" not in self.options.model_fields_set
        ):  # search attributes are never encrypted: keep the prompts out of them
            self.options = self.options.model_copy(update={"prompt_in_visibility": False})
        self.budget = budget or Budget()
        self.store = store
        self._root: Handle | None = None
        self._rpc = HandleRpc(client, scope)
        self._rpc.probe = WorkerProbe(client, task_queue)
        self._fallbacks = Fallbacks(self._rpc)
        self._turns = Turns(self._rpc, self._fallbacks)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, *, create: bool = True) -> Self:
        """Start the root workflow, or attach to the running one (its options then apply).

        Args:
            create: False to only attach (tools that must not create a runtime).

        Returns:
            self, with :attr:`root` set.

        Raises:
            HandleNotFoundError: ``create`` is False and there is no root workflow.
            OrphanedHandlesError: the root's workflow has ended (terminated, say) while
                handles of its tree still run; nothing is started.
        """
        if not create:
            self._root = await self.inspect(ROOT_ID)
            return self
        view = await start_root(self._rpc, self.task_queue, self.budget, self.options)
        self._root = Handle.from_view(view)
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    # ------------------------------------------------------------------ verbs

    async def spawn(
        self,
        parent: HandleRef,
        name: str,
        budget: Budget | None = None,
        *,
        wake: bool = False,
        prompt: str | None = None,
        notify: bool = False,
    ) -> Handle | SpawnError:
        """Spawn a child of ``parent`` (CONTRACT §3 spawn). Never raises for a refused spawn.

        Args:
            parent: the parent handle (``rt.root`` for a top-level agent).
            name: the agent name in the worker's registry.
            budget: overrides the def's budget; pools are carved as min(own, parent's live
                remainder).
            wake: also wake the child, in the same message: it starts running (or
                ``queued`` for a slot) with ``prompt``; :meth:`wait` gives that turn's result.
                A ``prompt`` implies ``wake``.
            prompt: the first wake's prompt.
            notify: a background child that reports back: each turn of the child that
                settles (a result, or a ``pending`` one parked on a Request) reaches
                ``parent`` once as one inbox item ``[from=<child id> channel=child] [status]
                text``, never refused by a full inbox, and wakes ``parent`` if it is idle
                (else its next wake reads it). The parent must be a spawned handle: under the
                root it is a SpawnError.

        Returns:
            The child Handle (state ``idle``, id ``{parent.id}/{name}.{n}``), or a SpawnError
            whose ``error`` is the contract's text (``unknown agent "x" (known: a, b)``, ...).

        Raises:
            HandleNotFoundError: the parent's workflow does not exist.
        """
        pid = handle_id(parent)
        try:
            request = SpawnRequest(
                name=name,
                budget=budget,
                wake=wake or prompt is not None,
                prompt=prompt,
                notify=notify,
            )
            result = await self._rpc.update(pid, AgentWorkflowStub.spawn, request)
        except VerbRejectedError as err:  # the parent's workflow has ended: it is closed
            return SpawnError(parent=pid, name=name, error=f"parent closed ({err.reason})")
        if result.handle is None:
            return SpawnError(parent=pid, name=name, error=result.error or "spawn failed")
        if isinstance(parent, Handle):
            parent.children.append(result.handle.id)
        return Handle.from_view(result.handle)

    async def fork(
        self,
        h: HandleRef,
        at_turn: int,
        *,
        budget: Budget | None = None,
        model: str | None = None,
        prompt: str | None = None,
    ) -> Handle:
        """A new agent whose conversation is the first ``at_turn`` turns of ``h``'s
        (``client/fork.py``): spawned under the same parent through the normal spawn path
        (the parent's next child id, ``{parent}/{name}.{n}``), with its own budgets. The
        original is untouched and keeps running; a closed original forks too. Its children
        and pending Request are not copied, nor its inbox, tick schedule or context summary.

        A turn is a ``user`` message and everything after it up to the next one (the
        transcript's leading ``system`` messages always come along). Turns count from 1.
        Every turn of an idle or closed original is offered; of a running or suspended
        one, those before its turn in flight (which may still be rolled back). A tool call
        the copied turns end on without its result (a turn stopped by a budget) is
        answered ``error: not run``.

        Args:
            h: the original (any spawned handle; not the root).
            at_turn: how many of its turns the fork keeps, from 1.
            budget: the fork's budget (default: its definition's), carved from the
                parent's pools like any spawn's.
            model: the fork's model instead of its definition's (``inherit``: the worker's).
            prompt: wake the fork at once with this prompt (then :meth:`wait`).

        Returns:
            The fork, ``idle`` (``running`` or ``queued`` with ``prompt``).

        Raises:
            ForkRefusedError: ``at_turn`` below 1 or past the original's last offered turn,
                the root, a handle with no turn yet, a closed parent, or a spawn the parent
                refused; nothing was spawned.
            HandleNotFoundError: no such handle.
        """
        state = await self._rpc.query(handle_id(h), AgentWorkflowStub.state)
        request = fork_request(state, at_turn, budget=budget, model=model, prompt=prompt)
        return Handle.from_view(await fork_handle(self._rpc, state, request))

    async def wake(
        self,
        h: HandleRef,
        prompt: str | None = None,
        *,
        policy: str | None = None,
        via: str = "wake",
    ) -> Handle:
        """Wake a handle (CONTRACT §3 wake): one ``turn`` update on the handle's workflow,
        returned as soon as the workflow accepted it; :meth:`wait` then awaits that same
        update, which returns the result of the turn that holds ``prompt``. Under a parent
        that limits ``max_concurrent`` (the default: 8) the handle runs at once with the slot
        it holds, or asks its parent and shows ``queued`` until a sibling hands a slot over
        (FIFO; see ``workflows/leases.py``). On a busy handle (running, suspended, paused,
        messages waiting) the prompt is kept and ``policy`` applies: ``enqueue``,
        ``interrupt``, ``reject`` or ``debounce:MS`` (None: the agent's
        ``AgentDef.double_texting``; docs: "Talking to a live agent").

        Args:
            via: who sends it, kept with the message (at most 40 characters).

        Returns:
            The handle, refreshed by one query (a new Handle when given an id): ``running``
            when admitted, ``queued`` while it waits for a slot.

        Raises:
            InvalidPolicyError: ``policy`` is not one of the four (nothing sent).
            AgentBusy: the handle is busy and the policy is ``reject`` (nothing changed).
            VerbRejectedError: closed handle, or the root.
            HandleNotFoundError: no such handle.
        """
        hid = self._turns.check_wakeable(h)
        await self._turns.start(hid, turn_request(prompt, policy, via))
        return await self.inspect(h)

    async def run_turn(
        self, h: HandleRef, prompt: str | None = None, *, policy: str | None = None
    ) -> TaskResult:
        """``wake`` then ``wait`` for the turn that holds ``prompt``: one ``turn`` update on
        the handle's workflow, whatever the parent's ``max_concurrent``. On a busy handle
        ``policy`` applies as in :meth:`wake`; the result is never an earlier turn's.

        Raises:
            InvalidPolicyError: ``policy`` is not one of the four (nothing sent).
            AgentBusy: the handle is busy and the policy is ``reject`` (nothing changed).
            VerbRejectedError: closed handle, or the root.
            HandleNotFoundError: no such handle.
        """
        hid = self._turns.check_wakeable(h)
        resp = await self._turns.run(hid, turn_request(prompt, policy, "run_turn"))
        resp = await self._turns.fresh(hid, resp, None)
        if isinstance(h, Handle):
            h.apply_status(resp.status, resp.result)
        return resp.result

    async def post(self, h: HandleRef, item: InboxItem | str) -> PostResult:
        """Append an item to a handle's inbox; never changes its state (CONTRACT §3 post).

        Args:
            h: the handle.
            item: an InboxItem, or a string (an ``external`` item).

        Returns:
            PostResult: ``ok`` True, or ``ok`` False with ``error`` ``inbox full (N)``,
            ``inbox full (524,288 bytes)`` or ``inbox closed`` (refused by the workflow's
            validator: nothing reached its history), or ``history full (...)``: the
            handle's run holds 16 MiB of history and could not continue as new within 10 s
            (a turn in flight): nothing was added, send it again later.

        Raises:
            HandleNotFoundError: no such handle.
            pydantic.ValidationError: ``item`` is a string longer than ``MAX_TEXT``
                (64,000 characters): refused before anything is sent.
        """
        payload = InboxItem(text=item) if isinstance(item, str) else item
        hid = handle_id(h)
        try:
            result = await self._rpc.update(
                hid, AgentWorkflowStub.admit_post, payload, limit_wait_s=FALLBACK_AFTER_S
            )
        except UpdateLimitError:
            result = await self._fallbacks.post(hid, payload)
        except VerbRejectedError as err:
            # refused by the validator, before it reached history: the inbox's rules
            # (``inbox full``, ``inbox closed``, the root's) or a full history
            if err.reason.startswith(POST_REFUSALS):
                view = await self._view(h)
                return PostResult(ok=False, error=err.reason, status=status_of_view(view))
            if not err.reason.startswith("handle closed"):
                raise
            view = await self._view(h)  # a closed handle's workflow has completed
            return PostResult(ok=False, error="inbox closed", status=status_of_view(view))
        await self._apply(h, result.status)
        return result

    async def wait(self, h: HandleRef, timeout_ms: int | None = None) -> TaskResult:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3).

        Blocks inside the workflow (an update), not by polling: the ``turn`` update of this
        runtime's last wake of the handle, else the ``wait`` update. A timeout returns status
        ``timeout`` and the agent keeps running.

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        resp: WaitResponse | None = None
        for attempt in range(WAIT_ATTEMPTS):
            try:
                resp = await self._turns.wait(hid, timeout_ms)
                break
            except VerbRejectedError as err:
                # The wake's turn update or the wait update failed: its workflow ended first
                # (a close with waiters admitted but not yet delivered is refused by the
                # server: "... wasn't processed by worker"), or its run continued as new.
                # wait never raises: a closed handle gives its closed result, else it waits
                # again with the wait update.
                if err.verb not in (UPDATE_TURN, UPDATE_WAIT):
                    raise
                if err.reason.startswith("handle closed") or await self._rpc.is_closed(hid):
                    return await self._closed_result(h)
                if attempt == WAIT_ATTEMPTS - 1:
                    raise
        if resp is None:  # the turn update's wait timed out (the turn keeps running)
            return TaskResult(
                status="timeout",
                is_error=True,
                text=f"no result within {timeout_ms} ms; the turn keeps running",
            )
        resp = await self._turns.fresh(hid, resp, timeout_ms)
        await self._apply(h, resp.status, resp.result)
        return resp.result

    def stream(
        self, h: HandleRef, timeout_ms: int | None = None, *, after: str | None = None
    ) -> AsyncIterator[LiveEvent]:
        """Follow the turn of ``h`` live: text deltas, tool-call starts and ends, token
        counts, and last a ``TurnEnd`` with the turn's result (``stream.py``). Sends no
        update: any number of hosts can follow one handle.

        Not running (idle, suspended, closed): ends at once with the last result. Use as
        ``async for event in rt.stream(h)``; to leave early, close it (``async with
        contextlib.aclosing(rt.stream(h)) as events``): its polls stop at once.

        Args:
            h: the handle.
            timeout_ms: end with a ``timeout`` result after this many ms (the turn keeps
                running).
            after: the ``seq`` of the last event a host saw: continue with the events after
                it (every event once), across continue-as-new.

        Raises:
            HandleNotFoundError: no such handle.
            InvalidCursorError: ``after`` is not a cursor of this handle's live output.
        """
        hid = handle_id(h)
        return follow_turn(
            self.client,
            hid,
            self.workflow_id(hid),
            lambda: self.inspect(h),
            after=after,
            timeout_ms=timeout_ms,
        )

    async def interrupt(self, h: HandleRef) -> Handle:
        """Abort a running turn (CONTRACT §3 interrupt); returns once the handle is idle.

        The in-flight LLM activity is cancelled, drained inbox items return to the front of
        the inbox, the aborted turn's transcript is not kept and waiters get
        ``interrupted``. Idle or closed: a no-op. Never a kill.

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        if await self._rpc.is_closed(hid):
            return await self.inspect(h)
        try:
            status = await self._rpc.update(
                hid,
                AgentWorkflowStub.admit_interrupt,
                InterruptRequest(),
                limit_wait_s=FALLBACK_AFTER_S,
            )
        except UpdateLimitError:
            status = await self._fallbacks.interrupt(hid)
        return await self._apply(h, status)

    async def close(self, h: HandleRef, force: bool = False, reason: str | None = None) -> Handle:
        """Close a handle and its subtree (CONTRACT §3 close); returns once all are closed.

        Children close first, leaf-first in spawn order; a running turn may finish within
        ``RuntimeOptions.shutdown_ms`` and is then interrupted (``force``: at once); the
        def's ``on_close`` hook runs with ``reason``. Everything stays readable.

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        if not await self._rpc.is_closed(hid):
            req = CloseRequest(force=force, reason=reason)
            try:
                await self._rpc.update(
                    hid, AgentWorkflowStub.admit_close, req, limit_wait_s=FALLBACK_AFTER_S
                )
            except UpdateLimitError:
                await self._fallbacks.close(hid, req)
        return await self.inspect(h)

    async def recover(self, h: HandleRef) -> Handle:
        """Start a handle whose latest run the server terminated (a run past Temporal's
        history limits, or ``temporal workflow terminate``) again from its last state: a new
        run of the same workflow id, idle or parked on the same Request (same id), which an
        Answer then resumes where the turn stopped (``client/recover.py``).

        Returns:
            The handle, refreshed from the new run.

        Raises:
            RecoverRefusedError: the handle is running or closed (its latest run was not
                terminated), its last state had a turn in flight, or another recover
                started it first; nothing was started.
            HandleNotFoundError: no such handle.
            NoWorkerError: no worker serves its task queue (one replays the terminated run).
        """
        view = await recover(self._rpc, handle_id(h))
        if isinstance(h, Handle):
            h.apply(view)
            return h
        return Handle.from_view(view)

    async def resume(self, answer: Answer) -> Handle:
        """Deliver an Answer to the handle parked on the Request with that id (CONTRACT §3).

        The Answer goes to the topmost handle parked on it (a parent waiting through
        ``task`` carries the same Request id), which routes it down to the handle that
        raised it; each of them is ``running`` again when this returns. Then ``wait`` gives
        the continued turn's result.

        Returns:
            The handle that raised the Request, refreshed.

        Raises:
            AnswerRejectedError: the id matches no pending Request; nothing changed.
        """
        origin, sep, _ = answer.id.rpartition("#")
        if not sep or not origin:
            raise AnswerRejectedError(answer.id, "not a request id (expected '<handle id>#<n>')")
        parts = origin.split("/")
        target: str | None = None
        for depth in range(2, len(parts) + 1):  # topmost first; the root never suspends
            candidate = "/".join(parts[:depth])
            try:
                view = await self._view(candidate)
            except HandleNotFoundError:
                break
            if view.pending_req is not None and view.pending_req.id == answer.id:
                target = candidate
                break
        if target is None:
            raise AnswerRejectedError(answer.id, "no handle is waiting on that request")
        await self.answer(target, answer)
        return await self.inspect(origin)

    async def answer(self, h: HandleRef, answer: Answer) -> AnswerResult:
        """Deliver an Answer through ``h``: to its own parked Request, or routed down to the
        descendant whose parked Request has ``answer.id``.

        Raises:
            AnswerRejectedError: ``h`` has no pending Request with that id; nothing changed.
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        if answer.by is None:  # the audit's stated identity: user@host
            answer = answer.model_copy(update={"by": default_answerer()})
        closed = await self._rpc.closed_reason(hid)
        if closed == TERMINATED:
            raise AnswerRejectedError(
                answer.id,
                f"{hid} was terminated: `tnx recover {hid}`"
                " starts it again with its Request pending",
            )
        if closed is not None:
            raise AnswerRejectedError(answer.id, f"{hid} is closed")
        try:
            result = await self._rpc.update(
                hid, AgentWorkflowStub.admit_answer, answer, limit_wait_s=FALLBACK_AFTER_S
            )
        except UpdateLimitError:
            result = await self._fallbacks.answer(hid, answer)
        if not result.ok:
            raise AnswerRejectedError(answer.id, result.error or "rejected")
        await confirm_at_owner(self._rpc, answer, result)
        await self._apply(h, result.status)
        return result

    async def audit(self, h: HandleRef, *, subtree: bool = False) -> builtins.list[AuditRecord]:
        """Every answered Request of ``h`` (and of its subtree with ``subtree``): who answered
        (the identity Temporal recorded on the signal or update event, the server-stamped
        principal where there is one, the stated ``by``), when, through which path
        (``signal``, ``update``, ``interpreter``, ``expiry``, ``escalation``), the decision and
        its data; across every run of a continued-as-new handle, and after close
        (:mod:`.audit`).

        Raises:
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        ids = [node.id for node in await self.list(hid)] if subtree else [hid]
        return await audit_of(self._rpc, ids)

    # ------------------------------------------------------------------ ticks and pause

    async def schedule(
        self,
        h: HandleRef,
        *,
        every: float | timedelta | None = None,
        cron: str | None = None,
        prompt: str | None = None,
        wake: bool = True,
    ) -> Handle:
        """Put a tick schedule in force on ``h``, replacing any (its own or its definition's
        ``AgentDef.tick``): a durable timer in the handle's workflow (``workflows/ticks.py``).

        A tick that finds the handle idle wakes it with ``prompt``; the turn's input ends
        with the inbox line ``[from=clock channel=timer] tick (xN coalesced)``. Ticks that
        fire while it runs, is parked or paused coalesce into that one inbox item (its
        count grows); a worker outage yields one catch-up tick counting the fire times
        missed, never a flood.

        Args:
            h: a spawned handle.
            every: the interval, in seconds (a float, at least 1) or a timedelta; the first
                tick fires one interval from now.
            cron: instead of ``every``: a five-field cron expression, in UTC.
            prompt: the prompt of each tick's wake (None: the inbox block alone).
            wake: False: ticks only land in the inbox, for the next wake.

        Returns:
            The handle, refreshed (``tick``, ``next_tick_ms``).

        Raises:
            ValueError: not exactly one of ``every`` and ``cron``, an interval under 1 s or
                an invalid cron expression (nothing is sent).
            VerbRejectedError: the root, or a closed handle.
            HandleNotFoundError: no such handle.
        """
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        spec = TickSpec(
            every_ms=None if seconds is None else round(seconds * 1000),
            cron=cron,
            prompt=prompt,
            wake=wake,
        )
        return await self._schedule(h, spec)

    async def unschedule(self, h: HandleRef) -> Handle:
        """Remove the tick schedule of ``h`` (the definition's too); ticks already coalesced
        in its inbox stay there for the next wake.

        Raises:
            VerbRejectedError: the root, or a closed handle.
            HandleNotFoundError: no such handle.
        """
        return await self._schedule(h, None)

    async def _schedule(self, h: HandleRef, spec: TickSpec | None) -> Handle:
        view = await self._rpc.update(
            handle_id(h), AgentWorkflowStub.schedule, ScheduleRequest(tick=spec)
        )
        if isinstance(h, Handle):
            h.apply(view)
            return h
        return Handle.from_view(view)

    async def pause(self, h: HandleRef, *, now: bool = False, subtree: bool = False) -> Handle:
        """Pause ``h``: it keeps taking posts and ticks into its inbox but starts no turn;
        the latest wake sent meanwhile is kept and runs on :meth:`unpause`
        (``workflows/pause.py``). A running turn is let finish; a parked one stays parked
        (an Answer still resumes it). Its wall-clock budget keeps running: ``max_wall_ms``
        is a deadline from spawn.

        Args:
            h: a spawned handle.
            now: interrupt a running or parked turn at once (returns once it stopped).
            subtree: pause every open handle under ``h`` too (pre-order).

        Returns:
            ``h``, refreshed (``paused`` True).

        Raises:
            VerbRejectedError: the root (without ``subtree``), or a closed handle.
            HandleNotFoundError: no such handle.
        """
        return await self._pause(h, PauseRequest(paused=True, now=now), subtree)

    async def unpause(self, h: HandleRef, *, subtree: bool = False) -> Handle:
        """Unpause ``h`` (and with ``subtree`` every open handle under it): a wake held
        while it was paused runs now.

        Returns:
            ``h``, refreshed.

        Raises:
            VerbRejectedError: the root (without ``subtree``), or a closed handle.
            HandleNotFoundError: no such handle.
        """
        return await self._pause(h, PauseRequest(paused=False), subtree)

    async def _pause(self, h: HandleRef, req: PauseRequest, subtree: bool) -> Handle:
        hid = handle_id(h)
        if subtree:
            for node in await self.list(hid):
                if node.id != hid and node.state != "closed":
                    await self._rpc.update(node.id, AgentWorkflowStub.admit_pause, req)
            if hid == ROOT_ID:
                return await self.inspect(h)
        status = await self._rpc.update(hid, AgentWorkflowStub.admit_pause, req)
        return await self._apply(h, status)
