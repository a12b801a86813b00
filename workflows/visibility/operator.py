"""What an operator sees of a handle in the Temporal web UI (issue 14): the current details,
a child's static details, and the pending Request's search attributes (the approval queue).

* :func:`current_details`: the markdown the web UI shows as the workflow's "Current Details"
  (served by a worker through the ``__temporal_workflow_metadata`` query). A suspended handle's
  details START with the pending prompt, its Request id, the exact Answer JSON to paste into
  the UI's Signal dialog (name ``answer``) and the ``temporal workflow signal`` line; the last
  rejected input (``answer rejected: ...``) comes first until the next state change.
* :func:`answered_lines`: the current details' tail: who answered the latest Requests.
* :func:`static_summary`, :func:`static_details`: the line and the markdown stored with a
  child's start: shown by the UI with no worker, so an agent's page is never blank.
* :func:`request_attributes`: the ``AgentRequest*`` / ``AgentWaitingSince`` upserts that make
  ``names.APPROVAL_QUEUE`` a queue with "what waits, since when" columns.
* :class:`OperatorView`: the one rule of what the search attributes record: durable states
  only (issue 35 item 2). ``AgentState`` is :func:`durable_state` (never ``running``: a turn
  that starts idle and ends idle writes no upsert, a billable action on Temporal Cloud); the
  pending Request and the escalation queue while suspended. ``AgentPaused`` (``pause.py``)
  and ``AgentNextTick`` (``ticks.py``) are durable too, each upserted by its owner when it
  changes. "Running now" is seen in the current details (not a command: free), the
  ``state``/``view`` query (``tnx inspect``, ``tnx ls``) and the worker's
  ``tnx_turns_in_flight`` gauge.

Pure functions over ``HandleState``; deterministic, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from toolnexus_temporal.workflows.rules.roster import children_count

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import parse_time_ms, time_of_ms
    from toolnexus_temporal.workflows.contract.handler_docs import no_worker_hint
    from toolnexus_temporal.workflows.contract.limits import (
        SUMMARY_BYTES,
        fit,
        fit_search_attribute,
    )
    from toolnexus_temporal.workflows.contract.models import (
        DurableStateName,
        HandleStateName,
        Request,
        iso_utc,
    )
    from toolnexus_temporal.workflows.contract.names import (
        AGENT_ESCALATED_TO,
        AGENT_REQUEST_EXPIRES,
        AGENT_REQUEST_ID,
        AGENT_REQUEST_KIND,
        AGENT_REQUEST_PROMPT,
        AGENT_STATE,
        AGENT_WAITING_SINCE,
        APPROVAL_QUEUE,
        REQUEST_PROMPT_CHARS,
        REQUEST_SEARCH_ATTRIBUTES,
        ROOT_ID,
        SIGNAL_ANSWER,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState

DETAILS_PROMPT_CHARS = 1_000
"""How much of a pending prompt the current details show."""


def answer_json(
    req: Request,
    *,
    ok: bool = True,
    edited_args: dict[str, Any] | None = None,
    scope: str | None = None,
) -> str:
    """The exact input of the ``answer`` signal for ``req``: ``{"id": "<id>", "ok": true}``,
    or with ``ok`` False ``{"id": "<id>", "ok": false, "reason": "declined"}``, or with
    ``edited_args`` (an approval with other arguments) ``{"id": "<id>", "ok": true,
    "edited_args": {...}}`` (an Answer as JSON, CONTRACT §1). The id as ``tnx`` prints it,
    with the runtime's ``scope`` (the workflow takes it: ``names.id_in_scope``).

    Raises:
        ValueError: ``edited_args`` with ``ok`` False (an edit only approves).
    """
    body: dict[str, object] = {"id": workflow_id_for(scope, req.id), "ok": ok}
    if not ok:
        if edited_args is not None:
            raise ValueError("edited_args approves a call with other arguments: only with ok")
        body["reason"] = "declined"
    if edited_args is not None:
        body["edited_args"] = edited_args
    return json.dumps(body)


def shell_quote(text: str) -> str:
    """``text`` as one POSIX shell word (single quotes; ``'`` written as ``'"'"'``)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def signal_command(s: HandleState, req: Request) -> str:
    """The shell line that answers ``req`` ok at this handle (``temporal workflow signal``;
    add ``--address``/``--namespace`` for another server)."""
    wf_id = workflow_id_for(s.scope, s.id)
    return (
        f"temporal workflow signal --workflow-id {shell_quote(wf_id)} --name {SIGNAL_ANSWER}"
        f" --input {shell_quote(answer_json(req, scope=s.scope))}"
    )


def pending_lines(s: HandleState, req: Request) -> list[str]:
    """The head of a suspended handle's current details: the prompt, the Request id, the
    Answer JSON (ok and declined) and the shell line."""
    prompt = req.prompt[:DETAILS_PROMPT_CHARS]
    lines = [
        f"**Waiting for {req.kind}:** {prompt}",
        f"Request id: `{workflow_id_for(s.scope, req.id)}`",
        f"Answer: Signal `{SIGNAL_ANSWER}` with input `{answer_json(req, scope=s.scope)}`",
        f"Decline: `{answer_json(req, ok=False, scope=s.scope)}`",
        f"Shell: `{signal_command(s, req)}`",
    ]
    if req.url:
        lines.insert(2, f"Link: {req.url}")
    if req.expires_at:
        lines.insert(2, f"Expires at: {req.expires_at}")
    if s.approval.escalated_to:
        lines.insert(2, f"Escalated to: `{s.approval.escalated_to}`")
    return lines


def current_details(s: HandleState, rejection: str | None = None) -> str:
    """The markdown the web UI shows as the workflow's current details.

    Args:
        s: the handle's state.
        rejection: the last rejected input of this state (``answer rejected: <reason>``), or
            None; shown first.

    Returns:
        Lines: the rejection (if any); for a suspended handle its pending Request (see
        :func:`pending_lines`); then ``**{id}** — `{state}```, the counters and the last
        result.
    """
    last = s.last_result
    head = [f"**⚠ {rejection}**"] if rejection else []
    if s.state == "suspended" and s.approval.pending_req is not None:
        head += pending_lines(s, s.approval.pending_req)
    inbox = len(s.intake.items) + len(s.background.waiting)
    paused = " · **paused**" if s.pause.paused else ""
    body = [
        f"**{workflow_id_for(s.scope, s.id)}** — `{s.state}`{paused}",  # the id tnx takes
        f"turns {s.turn.turns_total} · tokens {s.usage.usage_total} · inbox {inbox}"
        f" · children {children_count(s)}",
        f"last result: `{last.status}` {last.text[:200]}" if last else "no result yet",
    ]
    if s.pause.paused:
        held = " (a wake is held: it runs on unpause)" if s.intake.wakes else ""
        body.append(f"paused: no turn starts until Signal `unpause`{held}")
    if s.ticks.spec is not None and s.ticks.next_ms is not None:
        rule = s.ticks.spec.every_ms
        how = f"every {rule / 1000:g}s" if rule is not None else f"cron `{s.ticks.spec.cron}`"
        body.append(f"ticks {how}: next at {iso_utc(s.ticks.next_ms)} · {s.ticks.fired} so far")
    body += answered_lines(s)
    return "\n\n".join(head + body) if head else "\n".join(body)


DETAILS_AUDIT_LINES = 3
"""How many of the latest answered Requests the current details show (issue 37 item 9)."""


_NO_SENDER: Final[Mapping[str, str]] = MappingProxyType(
    {"expiry": "its deadline", "escalation": "its escalation"}
)
"""Who answered a Request no one answered by hand, by the path its Answer took."""


def answered_lines(s: HandleState) -> list[str]:
    """The tail of the current details: who answered this handle's latest Requests, so the
    web UI shows it on the agent's page (the whole audit: ``tnx audit``).

    Returns:
        Nothing when no Request was answered; else a heading (``answered: N, latest
        first``) and one line per answered Request, newest first, at most
        :data:`DETAILS_AUDIT_LINES`: ``{answered at} `{request id}` approved|declined by
        {by} ({principal}) via {path} · verified|unverified``.
    """
    if not s.approval.audit:
        return []
    every = f"tnx audit {workflow_id_for(s.scope, s.id)}"  # the id as tnx prints ids
    lines = [f"answered: {len(s.approval.audit)}, latest first (all: `{every}`)"]
    for entry in reversed(s.approval.audit[-DETAILS_AUDIT_LINES:]):
        who = entry.by or entry.principal or _NO_SENDER.get(entry.path, "(not stated)")
        if entry.by and entry.principal and entry.principal != entry.by:
            who += f" ({entry.principal})"
        decision = "approved" if entry.ok else "declined"
        if entry.ok and entry.edited_args is not None:  # as tnx audit says it (walk 7)
            decision = "approved with an edit"
        checked = "verified" if entry.verified else "unverified"
        path = entry.path
        if entry.routed_via:  # as the audit says it: the sender's path (walks 7 and 8)
            path = f"{entry.routed_via} (routed down by its parent)"
        lines.append(
            f"- {iso_utc(entry.answered_ms)} `{workflow_id_for(s.scope, entry.request_id)}`"
            f" {decision} by {who[:120]}"
            f" via {path} · {checked}"
        )
    return lines


def static_summary(s: HandleState) -> str:
    """The one-line static summary of a child's workflow, within Temporal's
    ``SUMMARY_BYTES``: ``agent {name} (child of {parent}): {description}``."""
    name = s.defn.name if s.defn else "root"
    purpose = s.defn.description if s.defn else ""
    head = f"agent {name} (child of {workflow_id_for(s.scope, s.parent or ROOT_ID)})"
    return fit(f"{head}: {purpose[:120]}" if purpose else head, SUMMARY_BYTES)


def static_details(s: HandleState) -> str:
    """The static details of a child's workflow (stored with its start, shown by the
    web UI without a worker): name, id, parent, purpose, and where its live state is."""
    defn = s.defn
    purpose = (defn.description if defn else "") or "(no description)"
    return "\n".join(
        [
            f"**{workflow_id_for(s.scope, s.id)}** — agent `{defn.name if defn else 'root'}`,"
            f" child of `{workflow_id_for(s.scope, s.parent or ROOT_ID)}`",
            f"Purpose: {purpose[:500]}",
            "Live state, the pending request and the answer to paste: Current Details"
            " (served by a running tnx worker).",
            no_worker_hint(s.task_queue),
            f"Approval queue: `{APPROVAL_QUEUE}` (columns `AgentRequestKind`,"
            " `AgentRequestPrompt`, `AgentWaitingSince`, `AgentRequestExpires`,"
            " `AgentEscalatedTo`, `AgentRequestId`: the operator guide's six).",
        ]
    )


def request_shown_id(scope: str | None, req: Request | None) -> str | None:
    """The ``AgentRequestId`` value of ``req``: its id with the runtime's scope, as every
    ``tnx`` line prints it (``demo/root/ops.1#2``; unscoped runtimes: ``root/ops.1#2``), so the
    web UI's queue column pastes into ``tnx answer --request`` and into a raw ``temporal
    workflow signal`` alike (the workflow takes either form, ``names.id_in_scope``). Readers
    take the scope off again (``client/roots.py``, ``client/listed.py``). None: no Request."""
    return workflow_id_for(scope, req.id) if req is not None else None


def request_attributes(
    req: Request | None,
    published: str | None,
    *,
    scope: str | None = None,
    with_prompt: bool = True,
) -> list[SearchAttributeUpdate[Any]]:
    """The upserts that make the pending-Request search attributes show ``req`` (the
    caller adds ``AgentWaitingSince`` = workflow time when ``published`` is None, i.e.
    when the handle starts waiting: one that surfaces another Request keeps its time).

    Args:
        req: the Request the handle is parked on (None: it waits for nothing).
        published: the Request id the attributes show now (None: unset).
        scope: the runtime's scope: ``AgentRequestId`` shows the id as ``tnx`` prints it,
            ``{scope}/root/a.1#2`` (:func:`request_shown_id`; issue 37 item 1, one id form).
        with_prompt: set ``AgentRequestPrompt`` too (``RuntimeOptions.prompt_in_visibility``;
            off, the prompt never reaches a search attribute).

    Returns:
        No update when they already show it; else the set (or unset: all four) updates.
    """
    shown = request_shown_id(scope, req)
    if shown == published:
        return []
    if req is None:
        return [key.value_unset() for key in REQUEST_SEARCH_ATTRIBUTES]
    updates: list[SearchAttributeUpdate[Any]] = [
        AGENT_REQUEST_ID.value_set(fit_search_attribute(shown or "")),
        AGENT_REQUEST_KIND.value_set(fit_search_attribute(req.kind)),
    ]
    if with_prompt:
        prompt = req.prompt[:REQUEST_PROMPT_CHARS]
        updates.append(AGENT_REQUEST_PROMPT.value_set(fit_search_attribute(prompt)))
    expires = time_of_ms(ms) if (ms := _deadline_ms(req)) is not None else None
    if expires is not None:
        updates.append(AGENT_REQUEST_EXPIRES.value_set(expires))
    elif published is not None:  # the Request shown before may have had one
        updates.append(AGENT_REQUEST_EXPIRES.value_unset())
    return updates


def _deadline_ms(req: Request) -> int | None:
    """``req``'s deadline, ms since the epoch; None: it has none (or an unreadable one)."""
    return parse_time_ms(req.expires_at) if req.expires_at else None


def escalation_queue(s: HandleState) -> str | None:
    """The operator queue the pending Request escalated to, or None."""
    to = s.approval.escalated_to
    if s.state != "suspended" or to is None or not to.startswith("queue:"):
        return None
    return to.removeprefix("queue:")


def durable_state(state: HandleStateName) -> DurableStateName:
    """The ``AgentState`` value of a handle in ``state``: the state that lasts past a turn.
    ``running`` shows as ``idle`` (a turn is transient: it starts idle and ends idle, or
    parks, or closes); ``suspended`` and ``closed`` show as themselves."""
    return "idle" if state == "running" else state


class OperatorView(NamedTuple):
    """What the operator's search attributes show of a handle: ``AgentState`` (the durable
    state, :func:`durable_state`), the pending Request (``AgentRequest*``,
    ``AgentWaitingSince``) and ``AgentEscalatedTo``. Built by :meth:`of`;
    ``Visibility.publish`` upserts the difference from the one shown, so only a change of a
    durable state costs an upsert: idle→running→idle none; running→suspended one (the state
    and the Request), suspended→running one (``idle``, the Request cleared), →closed one.

    Attributes:
        state: the handle's durable state (``idle``, ``suspended`` or ``closed``).
        request: the Request it is parked on while suspended, else None.
        request_id: the id the ``AgentRequestId`` attribute shows (``request``'s).
        queue: the operator queue it escalated to, or None.
    """

    state: DurableStateName
    request: Request | None
    request_id: str | None
    queue: str | None

    @classmethod
    def of(cls, s: HandleState) -> OperatorView:
        """The view of ``s`` now."""
        req = s.approval.pending_req if s.state == "suspended" else None
        return cls(durable_state(s.state), req, request_shown_id(s.scope, req), escalation_queue(s))

    def updates(
        self, shown: OperatorView, *, scope: str | None, with_prompt: bool
    ) -> list[SearchAttributeUpdate[Any]]:
        """The upserts that turn ``shown`` into this view, in one command (none: equal);
        ``AgentWaitingSince`` is the workflow time when the handle starts waiting."""
        updates = request_attributes(
            self.request, shown.request_id, scope=scope, with_prompt=with_prompt
        )
        if self.request is not None and shown.request_id is None:  # starts waiting
            updates.append(AGENT_WAITING_SINCE.value_set(workflow.now()))
        if shown.state != self.state:
            updates.insert(0, AGENT_STATE.value_set(self.state))
        if self.queue != shown.queue:  # only a handle that escalated ever upserts it
            updates.append(
                AGENT_ESCALATED_TO.value_set(self.queue)
                if self.queue
                else AGENT_ESCALATED_TO.value_unset()
            )
        return updates
