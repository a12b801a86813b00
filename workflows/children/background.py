"""Background children that report back (issue 25 item 2): the component. A child started
without blocking its parent's turn, whose every settled turn reaches the parent once, as one
inbox item; the rules (what is noted, read, dropped, listed) are pure functions in
:mod:`~toolnexus_temporal.workflows.rules.background`, which says how it works.

:class:`Background` starts one (the ``task`` tool's ``"background": true``), wakes an idle
handle when an item waits (:meth:`BackgroundWake.wake_if_due`, through the same wake path as a
host's wake) and runs the model's tools: ``background_list``, ``background_wait``,
``background_post`` and ``background_close``. Deterministic; no I/O.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow

from toolnexus_temporal.workflows.rules.background import (
    consume,
    is_background,
    listing,
    parse_args,
    result_text,
)
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import CloseRequest, WakeRequest
    from toolnexus_temporal.workflows.contract.models import (
        InboxItem,
        ToolCall,
        ToolResult,
    )
    from toolnexus_temporal.workflows.contract.names import (
        BACKGROUND_CLOSE_TOOL,
        BACKGROUND_LIST_TOOL,
        BACKGROUND_POST_TOOL,
        BACKGROUND_WAIT_DEFAULT_S,
        BACKGROUND_WAIT_MAX_S,
        BACKGROUND_WAIT_TOOL,
        CHILD_CHANNEL,
        SIGNAL_POST,
        SIGNAL_WAKE,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import (
        ChildInfo,
        HandleState,
    )

if TYPE_CHECKING:  # types only: Children and Inbox are given at construction (agent.py)
    from toolnexus_temporal.workflows.children.children import Children
    from toolnexus_temporal.workflows.inbox import Inbox


def _error(text: str) -> ToolResult:
    return ToolResult(output=f"error: {text}", is_error=True)


# ---------------------------------------------------------------- the component


class BackgroundWake:
    """Wakes an idle handle when a background child's item waits for it: after a report
    noted one (``Children``), and after each turn (the run loop).

    Args:
        s: the handle's state model.
        vis: trace lines.
        inbox: wakes this handle (the same path as a host's wake).
    """

    def __init__(self, s: HandleState, vis: Visibility, inbox: Inbox) -> None:
        self.s = s
        self.vis = vis
        self.inbox = inbox

    def wake_if_due(self) -> None:
        """Wake this handle when a child item waits and the handle is idle (not closing,
        not already waiting for a slot, not a one-shot ``task`` child, which closes after its
        turn); a running or parked handle is woken once its turn settles (the run loop calls
        this again)."""
        s = self.s
        if (
            not s.background.waiting
            or s.state != "idle"
            or s.closing
            or s.one_shot
            or s.defn is None
            or s.intake.turn_pending
            or s.leases.slot_waiting
        ):
            return
        senders = ", ".join(i.from_ for i in s.background.waiting)
        self.vis.trace(f"{s.id}: woken by background result ({senders})")
        self.inbox.wake_from_outside(None)


class Background:
    """The background children of one handle: starting one, waking the handle with their
    items, and the model's tools.

    Owns ``HandleState.background`` (:class:`BackgroundState`).

    Args:
        s: the handle's state model.
        vis: trace lines.
        children: spawns and closes the children.
    """

    def __init__(self, s: HandleState, vis: Visibility, children: Children) -> None:
        self.s = s
        self.vis = vis
        self.children = children

    async def start(self, agent: str, prompt: str) -> ToolResult:
        """``task`` with ``"background": true``: spawn ``agent`` with its first wake
        (``prompt``) and return at once with the child's id."""
        child, error = await self.children.start(
            agent, report_results=True, wake=True, prompt=prompt, notify=True
        )
        if child is None:
            return _error(f"spawn {agent} refused: {error}")
        self.vis.trace(f"{self.s.id}: task → {child.id} (background)")
        return ToolResult(
            output=(
                f"started {child.id} in the background: its result will arrive in your inbox "
                f"as [from={child.id} channel={CHILD_CHANNEL}]; background_wait, "
                "background_post and background_close take its id"
            )
        )

    async def tool(self, call: ToolCall) -> ToolResult:
        """Run one background tool call (``background_list``, ``_wait``, ``_post``,
        ``_close``).

        Returns:
            The tool's text, or an error result (bad arguments, an id that is not one of
            this handle's background children, a busy child for ``background_post``).
        """
        args = parse_args(call)
        if args is None:
            return _error(f"{call.name} needs a JSON object of arguments")
        if call.name == BACKGROUND_LIST_TOOL:
            return ToolResult(output=listing(self.s))
        child_id = args.get("id")
        if not isinstance(child_id, str) or not is_background(self.s, child_id):
            known = ", ".join(self.s.background.followed) or "none"
            return _error(f"{call.name} needs the id of a background child (yours: {known})")
        if call.name == BACKGROUND_WAIT_TOOL:
            timeout = args.get("timeout_s", BACKGROUND_WAIT_DEFAULT_S)
            if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
                return _error("background_wait's timeout_s must be a positive number of seconds")
            return await self.wait(child_id, min(float(timeout), BACKGROUND_WAIT_MAX_S))
        if call.name == BACKGROUND_POST_TOOL:
            text = args.get("text")
            if not isinstance(text, str) or not text:
                return _error('background_post needs {"id": <child id>, "text": <text>}')
            return await self.post(child_id, text)
        if call.name == BACKGROUND_CLOSE_TOOL:
            return await self.close(child_id)
        return _error(f"unknown background tool {call.name!r}")

    def _info(self, child_id: str) -> ChildInfo:
        return self.s.roster.children_info.get(child_id, ChildInfo(state="closed"))

    async def wait(self, child_id: str, timeout_s: float) -> ToolResult:
        """``background_wait``: the child's results not read yet, at once, or else its next
        one (a settled turn, a parked one, or its close) within ``timeout_s`` seconds; an
        idle child whose results were all read gives its last one again.

        Returns:
            ``[status] text``, one line per unread result, oldest first (an error result
            unless the latest is ``done`` or ``pending``), or ``[timeout] ...`` when the
            child is still running.
        """
        s = self.s
        bg = s.background.followed[child_id]

        def settled() -> bool:
            info = self._info(child_id)
            if info.result_seq > bg.delivered or info.state == "closed":
                return True  # a result not read yet (a parked one too), or the end
            # idle with every result read: its last one again (not while a post woke it)
            return info.state == "idle" and info.result_seq >= 1 and not bg.woken

        try:
            await workflow.wait_condition(settled, timeout=timedelta(seconds=timeout_s))
        except TimeoutError:
            state = self._info(child_id).state
            return _error(f"[timeout] {child_id} is still {state} after {timeout_s:g} s")
        info = self._info(child_id)
        unread, left = consume(s, child_id)
        if info.last_result is None:
            return ToolResult(output=f"{child_id} is {info.state} with no result yet")
        status = info.last_result.status
        output = "\n".join(i.text for i in unread) or result_text(info.last_result)
        if left:
            output += f"\n({left} more unread result(s) of {child_id}: background_wait again)"
        return ToolResult(output=output, is_error=status not in ("done", "pending"))

    async def post(self, child_id: str, text: str) -> ToolResult:
        """``background_post``: post ``text`` to an idle child (``[from=<this id>
        channel=parent]``) and wake it; its result arrives as the next item."""
        s = self.s
        state = self._info(child_id).state
        if state != "idle":
            hint = "wait for its report (background_wait) first" if state != "closed" else ""
            return _error(f"{child_id} is {state}" + (f": {hint}" if hint else ""))
        target = workflow.get_external_workflow_handle(workflow_id_for(s.scope, child_id))
        item = InboxItem.model_validate({"from": s.id, "channel": "parent", "text": text})
        bg = s.background.followed[child_id]
        bg.woken = True  # before the signals: its result may come back before they return
        try:
            await target.signal(SIGNAL_POST, item)
            await target.signal(SIGNAL_WAKE, WakeRequest())
        except Exception as err:  # the child's workflow is gone
            bg.woken = False
            return _error(f"post to {child_id} not delivered ({err})")
        self.vis.trace(f"{s.id}: background_post → {child_id}")
        return ToolResult(output=f"posted to {child_id} and woke it: its result will arrive")

    async def close(self, child_id: str) -> ToolResult:
        """``background_close``: close the child (its subtree first); its results this
        handle had not read come with the reply and are not delivered again."""
        s = self.s
        before = sum(1 for i in s.background.waiting if i.from_ == child_id)
        await self.children.close(child_id, CloseRequest(reason="closed by its parent"))
        items, left = consume(s, child_id)
        unread, after = items[:before], items[before:]
        output = f"closed {child_id}"
        # the close's own settle (an interrupted turn) is not news; an unread result is
        if unread:
            output += f"; its unread result{'s' if len(unread) > 1 else ''}: " + "; ".join(
                i.text for i in unread
            )
        elif after and not after[-1].text.startswith("[interrupted]"):
            output += f"; its last result: {after[-1].text}"
        if left:
            output += f"; {left} more unread result(s) come in your inbox"
        return ToolResult(output=output)
