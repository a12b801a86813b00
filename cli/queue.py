"""What ``tnx pending``, ``tnx answer`` and ``tnx audit`` do once parsed (their options:
:mod:`~toolnexus_temporal.cli.queue_cmd`). Imported when one of them runs, never by ``tnx
--help``: this module loads the host library.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic import ValidationError
from rich.markup import escape
from temporalio.client import WorkflowExecutionStatus

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.devserver import local_ui_url
from toolnexus_temporal.cli.hostcmd import emit, err_console, fail_line, list_width, out, show
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.cli.queue_cmd import DEFAULT_UI, approval_queue_url
from toolnexus_temporal.cli.workercheck import (
    signal_answer,
    waiting_elsewhere,
    worker_read,
)
from toolnexus_temporal.client.cluster import default_answerer
from toolnexus_temporal.client.errors import NoWorkerError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.queued import QueuedAnswer
from toolnexus_temporal.client.roots import QueueRow
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.messages import AnswerResult
from toolnexus_temporal.workflows.contract.models import ANSWER_MESSAGE_CHARS, Answer

# ---------------------------------------------------------------------------- pending

Pending = tuple[
    list[Handle],
    list[QueueRow],
    NoWorkerError | None,
    dict[str, list[QueuedAnswer]],
    dict[str | None, int],
]
"""What ``tnx pending`` read: the suspended handles (a worker runs), or else the visibility
rows, the NoWorkerError and the Answers queued for each row (by handle id); when this
runtime has none, how many wait in each other runtime (by scope)."""


def pending(opts: Options, ui: bool, ui_url: str | None) -> None:
    """``tnx pending``: the approval queue, from the handles when a worker runs, else from
    visibility with a note; ``--ui``: the web UI link of the same list."""
    if ui:
        _print_ui_link(opts, ui_url)
        return

    async def verb(rt: AgentRuntime) -> tuple[list[Handle], list[QueueRow], NoWorkerError | None]:
        from toolnexus_temporal.cli.replayed import attach

        async def attached() -> list[Handle]:
            await attach(rt)  # a worker SIGKILLed a moment ago: 1 s, not the 3 s grace
            return await rt.pending()

        found = await worker_read(rt, attached)
        if isinstance(found, NoWorkerError):
            return [], await rt.queue(), found
        return found, [], None

    async def read(rt: AgentRuntime) -> Pending:
        handles, rows, missing = await verb(rt)
        # with no worker, the Answers sent to each row that no worker has applied yet
        got = await asyncio.gather(*(rt.queued_answers(row.id) for row in rows))
        waiting = {row.id: answers for row, answers in zip(rows, got, strict=True) if answers}
        empty = not handles and not rows
        elsewhere = await waiting_elsewhere(rt.client, rt.scope) if empty else {}
        return handles, rows, missing, waiting, elsewhere

    handles, rows, missing, waiting, elsewhere = ops.run(opts, read, worker="optional")
    now_ms = int(time.time() * 1000)  # when visibility was read, with no worker
    if opts.json:
        emit(_pending_json(handles, rows, waiting, now_ms))
    elif missing is not None:
        _print_visibility_queue(opts, rows, missing, waiting, now_ms, elsewhere)
    elif not handles:
        out.print(f"no suspended agents{_elsewhere_line(opts.scope, elsewhere)}", soft_wrap=True)
    else:
        show(render.pending_table(handles, width=list_width(), shown=opts.shown))
        out.print(
            "answer with: tnx answer ID --approve | --edit JSON | --decline [--message TEXT]   "
            '(web UI / temporal CLI: signal \'answer\' with {"id": REQUEST, "ok": true})',
            soft_wrap=True,
            style="dim",
        )


def _print_ui_link(opts: Options, ui_url: str | None) -> None:
    """``tnx pending --ui``: the web UI link of the approval queue, and the columns to add."""
    base = ui_url or local_ui_url() or DEFAULT_UI
    out.print(approval_queue_url(base, opts.namespace, opts.scope), soft_wrap=True)
    err_console.print(
        "columns to add in the UI (Configure Columns; kept by the browser): "
        "AgentRequestKind, AgentRequestPrompt, AgentWaitingSince, AgentRequestExpires, "
        "AgentEscalatedTo, AgentRequestId",
        style="dim",
    )


def _pending_json(
    handles: list[Handle],
    rows: list[QueueRow],
    waiting: dict[str, list[QueuedAnswer]],
    now_ms: int,
) -> list[dict[str, Any]]:
    """``tnx pending --json``: one object per suspended agent, from its handle or (no
    worker) from its visibility row (``"source": "visibility"``, read at ``"as_of_ms"``)
    with the Answers sent to it that no worker has applied yet (``"queued_answers"``)."""
    from_handles = [
        {
            "id": h.id,
            "request": args.dump(h.pending_req) if h.pending_req else None,
            "since_ms": h.pending_since_ms,
            "escalated_to": h.escalated_to,
        }
        for h in handles
    ]
    from_rows = [
        {
            "id": row.id,
            "request": (
                {"id": row.request_id, "kind": row.kind, "prompt": row.prompt}
                if row.request_id
                else None
            ),
            "since_ms": (int(row.waiting_since.timestamp() * 1000) if row.waiting_since else None),
            "expires_ms": int(row.expires_at.timestamp() * 1000) if row.expires_at else None,
            "escalated_to": f"queue:{row.escalated_to}" if row.escalated_to else None,
            "source": "visibility",
            "as_of_ms": now_ms,
            "queued_answers": [
                {
                    "request": a.request_id,
                    "ok": a.ok,
                    "by": a.by,
                    "identity": a.identity,
                    "sent_ms": int(a.sent_at.timestamp() * 1000),
                }
                for a in waiting.get(row.id, [])
            ],
        }
        for row in rows
    ]
    return from_handles + from_rows


def _elsewhere_line(here: str | None, elsewhere: dict[str | None, int]) -> str:
    """``; waiting in other runtimes: `tnx pending --scope walk` (1)``: where an empty
    queue's agents are (walk 6), or nothing."""
    if not elsewhere:
        return ""
    ways = ", ".join(
        f"`tnx pending {'--scope ' + scope if scope is not None else '--scope ' + repr('')}` ({n})"
        for scope, n in sorted(elsewhere.items(), key=lambda item: item[0] or "")
    )
    return f" in this runtime; waiting in other runtimes: {escape(ways)}"


def _print_visibility_queue(
    opts: Options,
    rows: list[QueueRow],
    missing: NoWorkerError,
    waiting: dict[str, list[QueuedAnswer]],
    now_ms: int,
    elsewhere: dict[str | None, int],
) -> None:
    """The queue read from visibility at ``now_ms`` (no worker runs), with the Answers
    queued for a worker, and a note saying so (:func:`~.verbs.visibility_note`)."""
    from toolnexus_temporal.cli.verbs import visibility_note

    if rows:
        show(render.queue_table(rows, width=list_width(), shown=opts.shown, queued=waiting))
    else:
        out.print(f"no suspended agents{_elsewhere_line(opts.scope, elsewhere)}", soft_wrap=True)
    kept = (  # walk 6: the note asked for an answer while one was queued
        "the queued answers are applied then"
        if waiting
        else "an answer is kept until then: tnx answer ID --approve"
    )
    visibility_note(
        opts,
        missing,
        now_ms,
        "each suspended agent's Request as it last published it (the full prompt and the "
        f"turn continue when a worker runs; {kept})",
    )


# ---------------------------------------------------------------------------- answer

Delivered = AnswerResult | tuple[NoWorkerError, str]
"""What :func:`answer` delivered: the workflow's AnswerResult (an update), or, with no worker
running, the NoWorkerError and the Request id it signalled."""


class Verdict(NamedTuple):
    """``tnx answer``'s decision as given: ``--approve``, ``--decline``/``--reject``,
    ``--data``, ``--edit`` (JSON text, implies approve) and ``--message``."""

    approve: bool
    decline: bool
    data: str | None
    edit: str | None
    message: str | None


def _answer_maker(verdict: Verdict, by: str | None) -> Callable[[str], Answer]:
    """The Answer ``tnx answer`` sends, by Request id, from its options.

    Raises:
        CliError: not exactly one verdict, JSON that is not an object, an edit over its
            bound, a message of the wrong length, or a bad ``--by``.
    """
    ok = verdict.approve or verdict.edit is not None
    if ok == verdict.decline:
        raise fail_line(
            "give exactly one of --approve (or --edit JSON) or --decline (--reject)", ops.EXIT_ENV
        )
    payload = args.parse_json_object(verdict.data, "--data")
    edited = args.parse_json_object(verdict.edit, "--edit")
    message = verdict.message
    if message is not None and not 1 <= len(message) <= ANSWER_MESSAGE_CHARS:
        raise fail_line(f"--message must be 1 to {ANSWER_MESSAGE_CHARS} characters", ops.EXIT_ENV)
    who = by if by is not None else default_answerer()
    if not who.strip() or len(who) > 200:
        raise fail_line("--by must be 1 to 200 characters", ops.EXIT_ENV)
    fields = {"ok": ok, "data": payload, "reason": None if ok else "declined", "by": who}
    fields |= {"edited_args": edited, "message": message}
    try:
        Answer.model_validate({"id": "check#1", **fields})
    except ValidationError as err:
        raise fail_line(f"invalid answer: {args.validation_message(err)}", ops.EXIT_ENV) from None
    return lambda request_id: Answer.model_validate({"id": request_id, **fields})


def answer(
    opts: Options,
    handle_id: str,
    verdict: Verdict,
    request: str | None,
    by: str | None,
) -> None:
    """``tnx answer``: answer the pending Request of ``handle_id`` (an update), or with no
    worker running send the ``answer`` signal for the Request id its search attributes hold
    (or ``request``). A Request id given as ``handle_id`` (``root/ops.1#2``) answers that
    Request of the handle before the ``#``."""
    answer_to = _answer_maker(verdict, by)
    if "#" in handle_id and request is None:  # a Request id (the REQUEST column; walk 6)
        handle_id, request = handle_id.rpartition("#")[0], handle_id
    target = args.ref(opts, handle_id)
    if request is not None:  # a Request id as tnx prints it (with the scope) is taken too
        request = args.ref(opts, request, request=True)
    result = ops.run(
        opts, lambda rt: _deliver(rt, opts, target, request, answer_to), worker="optional"
    )
    said = "declined" if verdict.decline else "approved"
    if verdict.edit is not None:
        said = "approved with edited arguments"
    _print_answered(opts, result, target, said)


async def _deliver(
    rt: AgentRuntime,
    opts: Options,
    target: str,
    request: str | None,
    answer_to: Callable[[str], Answer],
) -> Delivered:
    """Answer ``target``'s pending Request (or ``request``): an update when a worker runs,
    else the ``answer`` signal for the Request id of its search attributes.

    Raises:
        CliError: no pending Request (in its state, or its search attributes).
    """
    h = await worker_read(rt, lambda: rt.inspect(target))
    if isinstance(h, NoWorkerError):
        request_id = request
        if request_id is None:
            row = await rt.queue_row(target)
            if row is None or row.request_id is None:
                await _refuse_ended(rt, opts, target)
                raise ops.CliError(
                    f"{opts.shown(target)} has no pending request in its search attributes "
                    f"(not suspended); {ops.no_worker_note(h, opts)}",
                    ops.EXIT_ENV,
                )
            request_id = row.request_id
        await signal_answer(rt, target, answer_to(request_id))
        return h, request_id
    if request is not None:  # the workflow says why it is refused (expired, answered...)
        return await rt.answer(target, answer_to(request))
    if h.pending_req is None:
        raise ops.CliError(f"{opts.shown(h.id)} has no pending request (state {h.state})")
    return await rt.answer(target, answer_to(h.pending_req.id))


async def _refuse_ended(rt: AgentRuntime, opts: Options, target: str) -> None:
    """Refuse an Answer to a handle whose workflow has ended (closed, terminated...): it has
    no Request, whether a worker runs or not (walk 5: a closed demo agent got "no worker
    polls ... start one").

    Raises:
        CliError: the workflow's latest run is not running (exit 1).
    """
    desc = await rt.client.get_workflow_handle(rt.workflow_id(target)).describe()
    if desc.status is not None and desc.status != WorkflowExecutionStatus.RUNNING:
        ended = "closed" if desc.status == WorkflowExecutionStatus.COMPLETED else desc.status.name
        raise ops.CliError(f"{opts.shown(target)} has ended ({ended.lower()}): nothing to answer")


def _print_answered(opts: Options, result: Delivered, target: str, verdict: str) -> None:
    """What ``tnx answer`` prints once the Answer is delivered (an update or a signal)."""
    if isinstance(result, tuple):
        missing, request_id = result
        if opts.json:
            emit(
                {
                    "ok": True,
                    "delivered": "signal",
                    "queued": True,
                    "answered": None,
                    "request": request_id,
                }
            )
        else:
            to, sent = escape(opts.shown(target)), escape(opts.shown(request_id))
            out.print(
                f"answer {sent} ({verdict}) queued for {to}: no worker is "
                f"running; it is applied when one polls task queue {escape(missing.task_queue)} "
                "(tnx pending shows it beside its Request until then)",
                soft_wrap=True,
            )
        return
    if opts.json:
        emit(args.dump(result))
    else:
        to = escape(opts.shown(result.answered)) if result.answered else "?"
        out.print(
            f"answered → delivered to {to} ({verdict})",
            soft_wrap=True,
        )


# ---------------------------------------------------------------------------- audit


def audit(opts: Options, handle_id: str, subtree: bool) -> None:
    """``tnx audit``: every answered request of ``handle_id`` (its subtree with
    ``subtree``), one line each; with no worker, from each handle's replayed history
    (:func:`~toolnexus_temporal.cli.replayed.audit_read`), with a note on stderr."""
    from toolnexus_temporal.cli import replayed

    target = args.ref(opts, handle_id)

    async def read(rt: AgentRuntime) -> tuple[Any, NoWorkerError | None, Any, list[QueuedAnswer]]:
        records, missing, as_of = await replayed.audit_read(rt, target, subtree)
        # with no worker, the Answers sent that no workflow task has taken (walk 6: the
        # audit said "no answered requests" and nothing of the one queued)
        if missing is None:
            return records, missing, as_of, []
        ids = [target]
        if subtree:  # the parked ones of the subtree, from visibility (walk 7)
            ids = [row.id for row in await rt.listed(target) if row.state == "suspended"]
        found = await asyncio.gather(*(rt.queued_answers(hid) for hid in ids))
        return records, missing, as_of, [answer for answers in found for answer in answers]

    records, missing, as_of, unapplied = ops.run(opts, read, worker="optional")
    if missing is not None:
        note = "the answered requests up to its last workflow task"
        replayed.history_note(opts, missing, as_of, note)
    if opts.json:
        dumped = args.dump(records)
        if missing is not None:
            dumped = [{**record, "source": "history", "as_of_ms": as_of} for record in dumped]
        # the Answers no worker has taken yet, as the text lists them (walk 9: --json left
        # them out)
        dumped += [
            {
                "request_id": q.request_id,
                "ok": q.ok,
                "by": q.by,
                "identity": q.identity,
                "edited": q.edited,
                "sent_at": q.sent_at.isoformat(),
                "source": "queued",
            }
            for q in unapplied
        ]
        emit(dumped)
        return
    for q in unapplied:
        out.print(
            f"queued  {escape(opts.shown(q.request_id))}  {escape(q.line())}: not applied yet "
            "(no worker is running; the audit records it when a worker takes it)",
            soft_wrap=True,
        )
    if not records:
        where = "" if subtree else " (its children's: add --subtree)"
        out.print(f"{escape(opts.shown(target))}: no answered requests{where}", soft_wrap=True)
        return
    for r in records:
        verdict = "ok" if r.ok else (r.reason or "declined")
        who = r.principal or r.identity or "-"
        checked = "verified" if r.verified else "unverified"
        queued = r.sent_at is not None and r.sent_at < (r.answered_at or "")
        out.print(
            f"{escape(r.answered_at or '?')}  {escape(opts.shown(r.request_id))}  {verdict}"
            + f"  via {r.path}"
            + (f" (sent {escape(r.sent_at or '')})" if queued else "")
            + f"  by {escape(r.by or '-')} ({checked}; identity {escape(who)})"
            + (f"  escalated to {escape(r.escalated_to)}" if r.escalated_to else "")
            + (f"  data {escape(json.dumps(r.data, sort_keys=True))}" if r.data else "")
            + (f"  args {escape(r.arguments)}" if r.arguments else "")
            + (
                f"  edited {escape(json.dumps(r.edited_args, sort_keys=True))}"
                if r.edited_args is not None
                else ""
            )
            + (f"  message {escape(json.dumps(r.message))}" if r.message else ""),
            soft_wrap=True,
        )
