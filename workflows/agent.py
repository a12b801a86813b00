"""``AgentWorkflow``: one workflow per Handle, the root included (CONTRACT §2, §8).

The Handle state machine runs here, deterministically; LLM calls are activities. All state
lives in one :class:`~workflows.models.HandleState`, so queries return it as is and
continue-as-new can carry it whole.

Messages (names are a durable contract; see README "Verbs on the wire"):

* signals ``wake`` (a prompt string, ``null`` or ``{"prompt": ...}``) and ``post`` (an
  InboxItem): usable from ``temporal workflow signal``; a rejected signal leaves a trace line
  and ``last_error``, never a silent drop.
* updates ``spawn``, ``admit_wake`` (synchronous admission for the client), ``admit_post``
  and ``wait``: validated before anything reaches history, rejected loudly.
* queries ``view`` (HandleView), ``state`` (HandleState) and ``trace`` (list of TraceLine).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.models import (
        ROOT_ID,
        AgentInput,
        HandleState,
        HandleStateName,
        HandleStatus,
        HandleView,
        InboxItem,
        LlmCallInput,
        LlmCallResult,
        Message,
        ResolveAgentInput,
        ResolveAgentResult,
        SpawnRequest,
        SpawnResult,
        TaskResult,
        TraceLine,
        WaitRequest,
        WaitResponse,
        WakeRequest,
        workflow_id_for,
    )
    from workflows.render import render_turn_input
    from workflows.search_attributes import (
        AGENT_DEPTH,
        AGENT_NAME,
        AGENT_PARENT,
        AGENT_STATE,
    )

LLM_CALL_ACTIVITY = "tnx.llm_call"
"""Activity name of one LLM round trip (durable contract: do not rename)."""

RESOLVE_AGENT_ACTIVITY = "tnx.resolve_agent"
"""Local activity name that looks an agent name up in the worker's registry."""

_WAKE_PAYLOAD: TypeAdapter[WakeRequest | str | None] = TypeAdapter(WakeRequest | str | None)


def _min_opt(a: int | None, b: int | None) -> int | None:
    """min() where None means unlimited."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def view_of(s: HandleState) -> HandleView:
    """Build the public view of a handle state."""
    return HandleView(
        id=s.id,
        name=s.defn.name if s.defn else ROOT_ID,
        parent=s.parent,
        depth=s.depth,
        state=s.state,
        inbox_count=len(s.inbox),
        children=list(s.children),
        usage_total=s.usage_total,
        turns_total=s.turns_total,
        tool_calls_total=s.tool_calls_total,
        pool_tokens=s.pool_tokens,
        pool_tool_calls=s.pool_tool_calls,
        wall_deadline_ms=s.wall_deadline_ms,
        pending_req=s.pending_req,
        last_result=s.last_result,
        result_seq=s.result_seq,
        conv_id=s.id,
        transcript_len=s.transcript_len,
        last_error=s.last_error,
        defn=s.defn,
    )


def status_of(s: HandleState) -> HandleStatus:
    """Build the small status returned by verbs."""
    return HandleStatus(
        id=s.id,
        state=s.state,
        inbox_count=len(s.inbox),
        children_count=len(s.children),
        usage_total=s.usage_total,
        turns_total=s.turns_total,
        tool_calls_total=s.tool_calls_total,
        pool_tokens=s.pool_tokens,
        pool_tool_calls=s.pool_tool_calls,
        wall_deadline_ms=s.wall_deadline_ms,
        pending_req=s.pending_req,
        result_seq=s.result_seq,
        transcript_len=s.transcript_len,
        last_error=s.last_error,
    )


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    """One Handle. Started by the client for the root, by a parent's ``spawn`` for the rest."""

    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self.s: HandleState = inp.state
        self._published_state: HandleStateName | None = None

    # ------------------------------------------------------------------ run loop

    @workflow.run
    async def run(self, inp: AgentInput) -> HandleView:
        """Serve verbs until the handle is closed; each admitted wake runs one turn.

        Returns:
            The final view (readable after close: close is not loss).
        """
        self._publish(initial=True)
        while True:
            await workflow.wait_condition(lambda: self.s.turn_pending or self.s.state == "closed")
            if self.s.state == "closed":
                break
            await self._run_turn()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return view_of(self.s)

    # ------------------------------------------------------------------ queries

    @workflow.query(name="view")
    def view(self) -> HandleView:
        """The handle's public view (CONTRACT §2 fields)."""
        return view_of(self.s)

    @workflow.query(name="state")
    def state(self) -> HandleState:
        """The whole handle state model."""
        return self.s

    @workflow.query(name="trace")
    def trace(self) -> list[TraceLine]:
        """This handle's trace lines, oldest first (CONTRACT §7)."""
        return list(self.s.trace)

    # ------------------------------------------------------------------ spawn

    @workflow.update(name="spawn")
    async def spawn(self, req: SpawnRequest) -> SpawnResult:
        """Spawn a child handle as a child workflow (CONTRACT §3 spawn).

        Checks, in order: unknown name; parent closed; depth; max_children; pools exhausted.
        A failed check is a SpawnResult with ``error`` set (spawn never raises).
        """
        resolved = await workflow.execute_local_activity(
            RESOLVE_AGENT_ACTIVITY,
            ResolveAgentInput(name=req.name),
            result_type=ResolveAgentResult,
            start_to_close_timeout=timedelta(seconds=10),
        )
        error = self._spawn_check(req.name, resolved)
        if error is not None:
            self._trace(f"{self.s.id}: spawn {req.name} REJECTED ({error})")
            return SpawnResult(error=error)
        assert resolved.defn is not None  # _spawn_check guarantees it
        defn = resolved.defn
        budget = req.budget or defn.budget
        self.s.spawn_count += 1
        child_id = f"{self.s.id}/{defn.name}.{self.s.spawn_count}"
        now_ms = int(workflow.now().timestamp() * 1000)
        own_deadline = now_ms + budget.max_wall_ms if budget.max_wall_ms is not None else None
        child = HandleState(
            id=child_id,
            scope=self.s.scope,
            task_queue=self.s.task_queue,
            defn=defn,
            budget=budget,
            parent=self.s.id,
            depth=self.s.depth + 1,
            pool_tokens=_min_opt(budget.max_tokens, self.s.pool_tokens),
            pool_tool_calls=_min_opt(budget.max_tool_calls, self.s.pool_tool_calls),
            wall_deadline_ms=_min_opt(own_deadline, self.s.wall_deadline_ms),
            options=self.s.options,
        )
        self.s.children.append(child_id)
        await workflow.start_child_workflow(
            AgentWorkflow.run,
            AgentInput(state=child),
            id=workflow_id_for(self.s.scope, child_id),
            task_queue=self.s.task_queue,
            # Closing a parent closes its subtree through our own graceful cascade, never by
            # Temporal termination; children also outlive a parent's continue-as-new.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"agent {defn.name} (child of {self.s.id})",
        )
        self._trace(f"{self.s.id}: spawn {child_id}")
        return SpawnResult(handle=view_of(child))

    def _spawn_check(self, name: str, resolved: ResolveAgentResult) -> str | None:
        if resolved.defn is None:
            return f'unknown agent "{name}" (known: {", ".join(resolved.known)})'
        if self.s.state == "closed":
            return "parent closed"
        max_depth = self.s.budget.max_depth
        if max_depth is not None and self.s.depth + 1 > max_depth:
            return f"depth {self.s.depth + 1} over max_depth {max_depth}"
        max_children = self.s.budget.max_children
        if max_children is not None and len(self.s.children) >= max_children:
            return f"children over max_children {max_children}"
        if self.s.pool_tokens is not None and self.s.pool_tokens <= 0:
            return "budget exhausted (tokens)"
        if self.s.pool_tool_calls is not None and self.s.pool_tool_calls <= 0:
            return "budget exhausted (toolCalls)"
        deadline = self.s.wall_deadline_ms
        if deadline is not None and workflow.now().timestamp() * 1000 >= deadline:
            return "budget exhausted (wallMs)"
        return None

    # ------------------------------------------------------------------ wake

    @workflow.update(name="admit_wake")
    def admit_wake(self, req: WakeRequest) -> HandleStatus:
        """Admit a wake synchronously: when this update returns, the view says ``running``
        (or the wake was a no-op because the handle is already running or suspended).

        Raises:
            ApplicationError: (via the validator) the handle is the root or closed.
        """
        self._admit_wake(req.prompt)
        return status_of(self.s)

    @admit_wake.validator
    def _validate_admit_wake(self, req: WakeRequest) -> None:
        error = self._wake_error()
        if error is not None:
            raise ApplicationError(error, type="WakeRejected", non_retryable=True)

    @workflow.signal(name="wake")
    def wake_signal(self, payload: Any = None) -> None:
        """``wake`` as a signal: a prompt string, ``null``, or ``{"prompt": ...}``."""
        try:
            parsed = _WAKE_PAYLOAD.validate_python(payload)
        except ValidationError as err:
            self._reject("wake", f"bad payload: {_short(err)}")
            return
        prompt = parsed.prompt if isinstance(parsed, WakeRequest) else parsed
        error = self._wake_error()
        if error is not None:
            self._reject("wake", error)
            return
        self._admit_wake(prompt)

    def _wake_error(self) -> str | None:
        if self.s.defn is None:
            return "the root handle never runs an LLM: wake a spawned handle"
        if self.s.state == "closed":
            return "handle closed"
        return None

    def _admit_wake(self, prompt: str | None) -> None:
        if self.s.state != "idle":
            return  # running or suspended: a no-op (CONTRACT §3); posts buffer meanwhile
        self.s.wake_prompt = prompt
        self.s.turn_inbox = self.s.inbox
        self.s.inbox = []
        self.s.turn_pending = True
        self._transition("running", "wake")

    # ------------------------------------------------------------------ post

    @workflow.update(name="admit_post")
    def admit_post(self, item: InboxItem) -> HandleStatus:
        """Append an item to the inbox; never changes state (CONTRACT §3 post).

        Raises:
            ApplicationError: (via the validator) ``inbox closed`` or ``inbox full``.
        """
        self.s.inbox.append(item)
        return status_of(self.s)

    @admit_post.validator
    def _validate_admit_post(self, item: InboxItem) -> None:
        error = self._post_error()
        if error is not None:
            raise ApplicationError(error, type="PostRejected", non_retryable=True)

    @workflow.signal(name="post")
    def post_signal(self, payload: Any = None) -> None:
        """``post`` as a signal: an InboxItem as JSON (``{"from": ..., "channel": ...,
        "text": ...}``) or a bare string (an external item)."""
        try:
            item = (
                InboxItem(text=payload)
                if isinstance(payload, str)
                else InboxItem.model_validate(payload)
            )
        except ValidationError as err:
            self._reject("post", f"bad payload: {_short(err)}")
            return
        error = self._post_error()
        if error is not None:
            self._reject("post", error)
            return
        self.s.inbox.append(item)

    def _post_error(self) -> str | None:
        if self.s.state == "closed":
            return "inbox closed"
        if len(self.s.inbox) >= self.s.options.inbox_cap:
            return f"inbox full ({self.s.options.inbox_cap})"
        return None

    # ------------------------------------------------------------------ wait

    @workflow.update(name="wait")
    async def wait(self, req: WaitRequest) -> WaitResponse:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3).

        Settled means: idle with a result, suspended, or closed. A timeout returns status
        ``timeout`` and the turn keeps running. Never raises.
        """
        if self._settled() and self.s.last_result is not None:
            return WaitResponse(result=self.s.last_result, status=status_of(self.s))
        seen = self.s.result_seq
        timeout = None if req.timeout_ms is None else timedelta(milliseconds=req.timeout_ms)
        try:
            await workflow.wait_condition(lambda: self.s.result_seq > seen, timeout=timeout)
        except TimeoutError:
            result = TaskResult(
                status="timeout",
                is_error=True,
                text=f"no result within {req.timeout_ms} ms; the turn keeps running",
            )
            return WaitResponse(result=result, status=status_of(self.s))
        assert self.s.last_result is not None
        return WaitResponse(result=self.s.last_result, status=status_of(self.s))

    def _settled(self) -> bool:
        return not self.s.turn_pending and self.s.state != "running"

    # ------------------------------------------------------------------ the turn

    async def _run_turn(self) -> None:
        """Run one admitted turn: the LLM loop until a reply without tool calls (CONTRACT §4)."""
        s = self.s
        assert s.defn is not None
        s.turn_pending = False
        user_text = render_turn_input(s.wake_prompt, s.turn_inbox)
        s.wake_prompt = None
        new_messages: list[Message] = list(s.unsent)
        s.unsent = []
        if s.transcript_len == 0 and not new_messages and s.defn.system_prompt:
            new_messages.append(Message(role="system", content=s.defn.system_prompt))
        new_messages.append(Message(role="user", content=user_text))
        turn_start_len = s.transcript_len
        turns = 0
        tokens = 0
        max_turns = s.budget.max_turns
        result: TaskResult
        try:
            while True:
                if max_turns is not None and turns >= max_turns:
                    s.unsent = new_messages
                    result = TaskResult(
                        status="incomplete",
                        is_error=True,
                        limit="maxTurns",
                        text=f"stopped after {turns} LLM round trip(s): max_turns reached",
                        turns=turns,
                        total_tokens=tokens,
                    )
                    break
                reply = await self._llm_call(new_messages)
                turns += 1
                tokens += reply.usage.total_tokens
                s.turns_total += 1
                s.usage_total += reply.usage.total_tokens
                if s.pool_tokens is not None:
                    s.pool_tokens -= reply.usage.total_tokens
                s.transcript_len = reply.stored_len
                calls = reply.message.tool_calls or []
                if not calls:
                    result = TaskResult(
                        status="done",
                        text=reply.message.content or "",
                        turns=turns,
                        total_tokens=tokens,
                    )
                    break
                # Tools arrive with the tools issue; until then every call gets an error result
                # the model can read, in call order.
                new_messages = [
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        content=f"error: tool {call.name!r} is not available to this agent",
                    )
                    for call in calls
                ]
        except ActivityError as err:
            # A failed turn is transactional: the transcript rolls back to the turn start (the
            # store's uncommitted tail is dropped by the next call) and the inbox comes back.
            s.transcript_len = turn_start_len
            s.inbox = s.turn_inbox + s.inbox
            cause = err.cause.message if isinstance(err.cause, ApplicationError) else str(err)
            result = TaskResult(
                status="error",
                is_error=True,
                text=f"LLM call failed: {cause}",
                turns=turns,
                total_tokens=tokens,
            )
            s.last_error = result.text[:500]
        s.turn_inbox = []
        self._settle(result)

    async def _llm_call(self, new_messages: list[Message]) -> LlmCallResult:
        s = self.s
        assert s.defn is not None
        opts = s.options
        result: LlmCallResult = await workflow.execute_activity(
            LLM_CALL_ACTIVITY,
            LlmCallInput(
                conv_id=workflow_id_for(s.scope, s.id),
                base_len=s.transcript_len,
                new_messages=new_messages,
                model=s.defn.model,
                style=s.defn.style,
            ),
            result_type=LlmCallResult,
            start_to_close_timeout=timedelta(milliseconds=opts.llm_timeout_ms),
            heartbeat_timeout=timedelta(milliseconds=opts.llm_heartbeat_ms),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=opts.llm_initial_retry_ms),
                backoff_coefficient=2.0,
                maximum_attempts=opts.llm_max_attempts,
                non_retryable_error_types=["LlmRequestRejected", "MalformedLlmResponse"],
            ),
            summary=f"LLM call for {s.id}",
        )
        return result

    def _settle(self, result: TaskResult) -> None:
        self.s.last_result = result
        self.s.result_seq += 1
        self._transition("idle", result.status)

    # ------------------------------------------------------------------ trace & visibility

    def _transition(self, to: HandleStateName, why: str) -> None:
        before = self.s.state
        self.s.state = to
        self._trace(f"{self.s.id}: {before}→{to} ({why})")
        self._publish()

    def _reject(self, verb: str, error: str) -> None:
        self.s.last_error = f"{verb} rejected: {error}"[:500]
        self._trace(f"{self.s.id}: {verb} REJECTED ({error})")
        workflow.logger.warning("%s: %s signal rejected: %s", self.s.id, verb, error)

    def _trace(self, line: str) -> None:
        s = self.s
        s.trace_seq += 1
        at_ms = int(workflow.now().timestamp() * 1000)
        s.trace.append(TraceLine(seq=s.trace_seq, at_ms=at_ms, line=line))
        if len(s.trace) > s.options.trace_cap:
            del s.trace[: len(s.trace) - s.options.trace_cap]

    def _publish(self, *, initial: bool = False) -> None:
        """Upsert search attributes when the state changed; refresh the UI's current details."""
        s = self.s
        if initial:
            workflow.upsert_search_attributes(
                [
                    AGENT_STATE.value_set(s.state),
                    AGENT_NAME.value_set(s.defn.name if s.defn else ROOT_ID),
                    AGENT_DEPTH.value_set(s.depth),
                    *([AGENT_PARENT.value_set(s.parent)] if s.parent else []),
                ]
            )
            self._published_state = s.state
        elif self._published_state != s.state:
            workflow.upsert_search_attributes([AGENT_STATE.value_set(s.state)])
            self._published_state = s.state
        last = s.last_result
        workflow.set_current_details(
            "\n".join(
                [
                    f"**{s.id}** — `{s.state}`",
                    f"turns {s.turns_total} · tokens {s.usage_total} · inbox {len(s.inbox)}"
                    f" · children {len(s.children)}",
                    f"last result: `{last.status}` {last.text[:200]}" if last else "no result yet",
                ]
            )
        )


def _short(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"{where}: {first.get('msg', 'invalid')}"
